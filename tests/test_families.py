"""The 2025-2026 families, counted block by block, against three independent truths: the vendors' published
figures (model cards, reports), hand-worked shapes from the papers (DeepSeek-V2/V3 MLA, gpt-oss, Qwen3-Next, Gemma 3,
Llama 4) and -- in test_params.py, for every preset -- transformers' own build on the meta device."""

from __future__ import annotations

import re

import pytest

from gpuwise.estimate.memory.kv_cache import kv_bytes_per_token, sequence_cache_bytes, state_bytes_per_sequence
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.architecture import Architecture
from gpuwise.workload.model.presets import presets
from gpuwise.workload.model.resolve import resolve_model
from plans import infer_plan

PUBLISHED = sorted(p for p, v in presets().items() if v.published and (v.published.total or v.published.active))


def _figure(text: str) -> tuple[float, float]:
    """("30.5B") -> (30.5e9, 0.1e9): the value and the place of its last significant digit. A vendor's "355B"
    may be rounded or cut ("3.3B" for 3.35B, "3B activated" for 3.87B), so a count agrees when it is within one
    unit of that place; "400B" and "1T" are stated to one significant digit."""
    match = re.match(r"\s*([\d.]+)\s*([BT])", text)
    assert match, text
    digits, scale = match.group(1), 1e9 if match.group(2) == "B" else 1e12
    decimals, zeros = len(digits.partition(".")[2]), len(digits) - len(digits.rstrip("0"))
    place = 10.0 ** (-decimals if "." in digits else zeros)
    return float(digits) * scale, place * scale


def _as_counted(arch: Architecture, value: int, convention: tuple[str, ...]) -> int:
    parts = {"-embedding": -arch.params.embedding, "-head": -arch.params.head, "-tower": -arch.params.tower,
             "+mtp": arch.params.mtp}
    return value + sum(parts[c] for c in convention)


@pytest.mark.parametrize("preset_id", PUBLISHED)
def test_counts_agree_with_the_published_figures(preset_id: str) -> None:
    published = presets()[preset_id].published
    assert published is not None and published.source and published.quote
    arch = resolve_model(preset_id)
    for figure, value, convention in ((published.total, arch.total_params, published.total_convention),
                                      (published.active, arch.active_params, published.active_convention)):
        if figure:
            expected, place = _figure(figure)
            counted = _as_counted(arch, value, convention)
            assert abs(counted - expected) < place, (preset_id, figure, counted)


def _kinds(arch: Architecture) -> dict[tuple[str, int | None], int]:
    found: dict[tuple[str, int | None], int] = {}
    for block in arch.blocks:
        key = (block.attention.kind, block.attention.window)
        found[key] = found.get(key, 0) + block.count
    return found


def test_deepseek_v3_mla_attention_and_cache_follow_the_paper() -> None:
    """DeepSeek-V3 (arXiv 2412.19437 sec. 4.2): h 7168, 128 heads, q latent 1536, KV latent 512, RoPE key 64,
    nope/value head dims 128. Per layer: W^DQ + norm + W^UQ,QR + W^DKV,KR + norm + W^UK,UV + W^O."""
    arch = resolve_model("deepseek-ai/DeepSeek-V3")
    attention = 7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256 + 128 * 128 * 7168
    assert attention == 187_107_328
    mla = [b for b in arch.blocks if b.attention.kind == "mla"]
    assert sum(b.count for b in mla) == 61
    assert {b.ffn.experts for b in arch.blocks} == {0, 256} and sum(b.count for b in arch.blocks if b.ffn.experts) == 58
    # the cache holds the latent and the RoPE key per layer: 61 x (512 + 64) values per token (V2 sec. 2.1.2-3)
    job = InferJob(kv_dtype="bf16")
    assert kv_bytes_per_token(infer_plan(arch, job)) == 61 * (512 + 64) * 2
    # tensor parallelism does not split the latent: every rank holds it whole
    assert kv_bytes_per_token(infer_plan(arch, InferJob(kv_dtype="bf16", tp=8, count=8))) == 61 * 576 * 2


def test_glm5_caches_the_indexer_key_beside_the_latent() -> None:
    arch = resolve_model("zai-org/GLM-5")
    attention = arch.blocks[0].attention
    assert attention.kind == "mla" and attention.selected == 2048
    assert attention.cache_elements_per_token == 512 + 64 + 128


def test_gpt_oss_sliding_layers_hold_only_their_window() -> None:
    """gpt-oss-20b: 24 layers alternating a 128-token window and full attention, 8 KV heads of 64 (config.json
    layer_types); sinks are per-head parameters, not cache."""
    arch = resolve_model("openai/gpt-oss-20b")
    assert _kinds(arch) == {("gqa", 128): 12, ("gqa", None): 12}
    job = InferJob(kv_dtype="bf16")
    per_layer_token = 2 * 8 * 64 * 2
    assert sequence_cache_bytes(infer_plan(arch, job), 8192) == 12 * 8192 * per_layer_token + 12 * 128 * per_layer_token
    assert all(b.attention.sinks == 64 for b in arch.blocks)


def test_qwen3_next_linear_layers_hold_a_fixed_state() -> None:
    """Qwen3-Next-80B: 36 gated-DeltaNet layers with a 32 x 128 x 128 fp32 state and a (2 x 16 x 128 + 32 x 128) x 4
    conv window per sequence; 12 full-attention layers with 2 KV heads of 256."""
    arch = resolve_model("Qwen/Qwen3-Next-80B-A3B-Instruct")
    assert _kinds(arch) == {("linear", None): 36, ("gqa", None): 12}
    job = InferJob(kv_dtype="bf16")
    state = 36 * (32 * 128 * 128 * 4 + 8192 * 4 * 2)
    assert state_bytes_per_sequence(infer_plan(arch, job)) == state == 77_856_768
    assert sequence_cache_bytes(infer_plan(arch, job), 10_000) - sequence_cache_bytes(infer_plan(arch, job), 1_000) == (
        9_000 * 12 * 2 * 2 * 256 * 2)  # only the full-attention layers grow


def test_gemma3_and_llama4_layer_patterns() -> None:
    gemma = resolve_model("google/gemma-3-4b-it")  # every 6th layer global (Gemma3TextConfig)
    assert _kinds(gemma) == {("gqa", 1024): 29, ("gqa", None): 5}
    scout = resolve_model("meta-llama/Llama-4-Scout-17B-16E")  # every 4th layer NoPE global, the rest chunked
    assert _kinds(scout) == {("gqa", 8192): 36, ("gqa", None): 12}
    maverick = resolve_model("meta-llama/Llama-4-Maverick-17B-128E")  # MoE on every other layer
    assert sum(b.count for b in maverick.blocks if b.ffn.experts == 128) == 24
    assert sum(b.count for b in maverick.blocks if not b.ffn.experts) == 24


def test_mtp_layers_are_counted_apart() -> None:
    """DeepSeek-V3's MTP module is one more MoE layer with an eh_proj (2h x h) and three norms (V3 sec. 2.2), outside
    the 671B that transformers builds."""
    arch = resolve_model("deepseek-v3")
    h = 7168
    moe_layer = 187_107_328 + 2 * h + 3 * h * 2048 * (256 + 1) + 256 * h  # MLA, 2 norms, 257 experts, router
    assert arch.params.mtp == 2 * h * h + 3 * h + moe_layer == 11_610_067_968


def test_vision_towers_are_counted_and_not_active() -> None:
    """Kimi-K2.5's card: 'Parameters of Vision Encoder 400M' (MoonViT, 27 blocks of 1152); the tower does not run
    for a text token."""
    arch = resolve_model("moonshotai/Kimi-K2.5")
    text = resolve_model("moonshotai/Kimi-K2-Instruct")
    assert 0.4e9 <= arch.params.tower <= 0.5e9
    assert arch.total_params - text.total_params == arch.params.tower
    assert arch.active_params == text.active_params


def test_sliding_windows_and_dsa_limit_the_keys_each_query_attends() -> None:
    """A causal prefill of s tokens averages s/2 keys per query; under a window w < s the query at i attends
    min(i, w): (w (s - w) + w^2 / 2) / s = w - w^2 / (2 s). Decode attends min(context, w)."""
    from gpuwise.estimate.speed.operators import Pass, _context
    from gpuwise.workload.model.blocks import Attention

    windowed = Attention("gqa", 8, 8, 64, 64, window=128)
    prefill = Pass(batch=1, query=8192, context=4096, act_bytes=2, weight_bytes=2, kv_bytes=2)
    assert _context(windowed, prefill) == 128 - 128 * 128 / (2 * 8192)
    short = Pass(batch=1, query=100, context=50, act_bytes=2, weight_bytes=2, kv_bytes=2)
    assert _context(windowed, short) == 50  # the whole prompt fits in the window
    decode = Pass(batch=1, query=1, context=30_000, act_bytes=2, weight_bytes=2, kv_bytes=2)
    assert _context(windowed, decode) == 128
    glm5 = next(b.attention for b in resolve_model("zai-org/GLM-5").blocks if b.attention.kind == "mla")
    assert glm5.selected == 2048 and _context(glm5, decode) == 2048  # GLM-5 config.json index_topk 2048


def test_the_dsa_indexer_scores_every_key() -> None:
    """DeepSeek-V3.2 lightning indexer: 2 x query tokens x keys x n_I x d_I FLOPs per layer (GLM-5: 32 x 128)."""
    from gpuwise.estimate.speed.operators import Pass, _indexer

    glm5 = next(b.attention for b in resolve_model("zai-org/GLM-5").blocks if b.attention.kind == "mla")
    decode = Pass(batch=1, query=1, context=30_000, act_bytes=2, weight_bytes=2, kv_bytes=1)
    (op,) = _indexer(glm5, decode, 1)
    assert op.flops == 2 * 30_000 * glm5.indexer_heads * glm5.indexer_dim
    assert op.bytes == 30_000 * glm5.indexer_dim  # one fp8 index key per cached token


def test_mtp_layers_count_only_when_loaded(shipped) -> None:  # type: ignore[no-untyped-def]
    """DeepSeek-V3 ships one MTP module (11,610,067,968 parameters beyond the 671B; README_WEIGHTS.md): --mtp loads
    it for speculative decoding, stored in the checkpoint's fp8 blocks like the rest."""
    from gpuwise.estimate.estimate import estimate

    arch = resolve_model("deepseek-ai/DeepSeek-V3")
    card = shipped.gpus["h200-sxm-141gb"]
    plain = estimate(arch, InferJob(count=8, tp=8), card).memory.breakdown_bytes["weights"]
    loaded = estimate(arch, InferJob(count=8, tp=8, mtp=True), card).memory.breakdown_bytes["weights"]
    assert (loaded - plain) * 8 == pytest.approx(arch.params.mtp * plain * 8 / arch.total_params)
    assert 1.0 < (loaded - plain) * 8 / arch.params.mtp < 1.01  # about one byte per fp8 weight
