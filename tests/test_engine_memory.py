"""Inference memory per engine against measured breakdowns: llm-d-planner's vLLM v0.19.0 runs on one H100-80GB at
--gpu-memory-utilization 0.95 (docs/accuracy/vllm-v0.19.0-accuracy-report.md, commit 2d557dca: weights, the
profiling run's activation peak and the KV pool vLLM logged), and llama.cpp's compute buffer worked by hand."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from gpuwise import runtimes
from gpuwise.catalog import Catalog
from gpuwise.estimate.memory.engine_pool import (
    cuda_total_bytes,
    pool_fraction,
    profiled_pool_bytes,
    static_pool_bytes,
    whole_blocks,
)
from gpuwise.estimate.memory.inference import inference_memory
from gpuwise.estimate.memory.kv_cache import kv_bytes_per_token
from gpuwise.estimate.memory.kv_layout import kv_layout
from gpuwise.runtimes.memory_profiles import version_tuple
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.resolve import resolve_model
from plans import infer_plan

GIB = 2**30
# model: (weights GiB, activation peak GiB, KV tokens) as vLLM v0.19.0 reported them (TP 1, max_model_len 8192)
MEASURED = {"llama-3.1-8b": (14.99, 1.89, 476_016), "qwen2.5-7b": (14.25, 2.21, 1_096_000)}


@pytest.mark.parametrize("model", sorted(MEASURED))
def test_vllm_pool_and_profile_peak_match_vllm_logs(model: str, shipped: Catalog) -> None:
    weights_gib, activation_gib, kv_tokens = MEASURED[model]
    gpu = shipped.gpus["h100-sxm-80gb"]
    job = InferJob(engine="vllm", memory_fraction=0.95, engine_version="0.19.0", input_len=8192, output_len=0)
    memory = inference_memory(infer_plan(resolve_model(model), job, gpu.id))
    assert memory.breakdown_bytes["weights"] / GIB == pytest.approx(weights_gib, rel=0.01)
    # the sampler over 1,024 rows (14 bytes per vocabulary entry, v0.17's Triton top-k/top-p) is the larger half
    assert memory.breakdown_bytes["activations"] / GIB == pytest.approx(activation_gib, rel=0.15)
    # the catalog's 80 GiB against the 79.19 GiB the card shows torch accounts for most of the rest
    assert memory.details["kv_tokens_per_gpu"] == pytest.approx(kv_tokens, rel=0.03)


def test_vllm_batch_defaults_follow_the_card() -> None:
    """vllm/engine/arg_utils.py get_batch_defaults (OpenAI server): 8,192 tokens and 1,024 sequences on cards of
    70 GiB or more that are not A100s."""
    arch = resolve_model("llama-3.1-8b")
    for gpu, limits in (("h100-sxm-80gb", (8192, 1024)), ("a100-sxm-80gb", (2048, 256)), ("rtx-4090", (2048, 256))):
        plan = infer_plan(arch, InferJob(engine="vllm"), gpu)
        assert (plan.max_batched_tokens, plan.max_num_seqs) == limits, gpu


def test_llama_cpp_compute_buffer_is_the_logits_of_one_micro_batch(shipped: Catalog) -> None:
    """512 tokens x 128,256 vocabulary x 4 bytes = 262.7 MB: llama.cpp logs 'CUDA0 compute buffer size' of about
    250-260 MiB for Llama-3-8B with flash attention."""
    gpu = shipped.gpus["rtx-4090"]
    job = InferJob(engine="llamacpp", quant="gguf-q4_k_m")
    memory = inference_memory(infer_plan(resolve_model("llama-3.1-8b"), job, gpu.id))
    assert memory.breakdown_bytes["activations"] == 512 * 128_256 * 4


def test_sglang_keeps_weights_and_pool_inside_its_static_fraction(shipped: Catalog) -> None:
    """SGLang's pool is the memory free at start x mem_fraction_static - weights: at most that fraction of the
    card, less the weights, and no less than it less the CUDA context and the driver's share."""
    gpu = shipped.gpus["h100-sxm-80gb"]
    arch = resolve_model("llama-3.1-8b")
    memory = inference_memory(infer_plan(arch, InferJob(engine="sglang", memory_fraction=0.8), gpu.id))
    upper = 0.8 * gpu.usable_memory_bytes - memory.breakdown_bytes["weights"]
    assert upper * 0.97 < (memory.kv_budget_bytes or 0.0) < upper


def test_mem_fraction_is_refused_for_an_engine_without_a_pool() -> None:
    with pytest.raises(ValueError, match="has none"):
        InferJob(engine="hf", memory_fraction=0.9)


# ---- the engines' start-up arithmetic, worked by hand from their source (issue 40) --------------------------------

def test_kv_bytes_per_token_of_llama_and_of_an_mla_cell() -> None:
    """Llama-3.1-8B: 2 (K, V) x 32 layers x 8 KV heads x 128 dims x 2 bytes = 131,072 B, halved by TP 2 and by fp8.
    DeepSeek-V3's MLA caches one latent of kv_lora_rank 512 plus a RoPE key of 64 per layer, 61 layers x 576 x 2 B
    = 70,272 B, the same on every tensor-parallel rank (vLLM MLACommonBackend, one latent per layer)."""
    llama = resolve_model("llama-3.1-8b")
    assert kv_bytes_per_token(infer_plan(llama, InferJob(kv_dtype="bf16"))) == 131_072
    assert kv_bytes_per_token(infer_plan(llama, InferJob(kv_dtype="bf16", tp=2, count=2))) == 65_536
    assert kv_bytes_per_token(infer_plan(llama, InferJob(kv_dtype="fp8"))) == 65_536
    deepseek = resolve_model("deepseek-v3")
    for tp in (1, 8):
        plan = infer_plan(deepseek, InferJob(kv_dtype="bf16", tp=tp, count=tp, quant="fp8-block"))
        assert kv_bytes_per_token(plan) == 61 * 576 * 2


def test_vllm_v0_profiling_arithmetic_of_the_rtx3090_log() -> None:
    """vllm#10517 (v0.6.4, RTX 3090, Llama-3.1-8B): total 23.58 GiB x 0.90 - peak torch 17.06 GiB (weights 14.99
    included) - non-torch 0.35 GiB = 3.81 GiB; blocks of 16 tokens x 131,072 B = 2 MiB, so the pool holds
    floor(3.812 GiB / 2 MiB) = 1,951 whole blocks (the log prints 1,952 from the unrounded figures)."""
    pool = profiled_pool_bytes(total=23.58 * GIB, fraction=0.9, weights=14.99 * GIB, activations=(17.06 - 14.99) * GIB,
                               non_torch=0.35 * GIB)
    assert pool / GIB == pytest.approx(23.58 * 0.9 - 17.06 - 0.35)
    assert round(pool / GIB, 2) == 3.81
    assert whole_blocks(pool, 16, 131_072) == 1951
    assert whole_blocks(2 * 2**20 * 1952 - 1, 16, 131_072) == 1951  # a byte short of a block is no block


def test_sglang_max_total_num_tokens_of_the_mi300x_log() -> None:
    """llm-tracker MI300X notes (SGLang, Llama-3-8B): 191.33 GiB free at start, x 0.88 - 15.0 GiB of weights =
    153.37 GiB; / 131,072 B per token (page size 1) = 1,256,400 tokens against the printed 1,256,440."""
    pool = static_pool_bytes(free_at_start=191.33 * GIB, fraction=0.88, weights=15.0 * GIB)
    assert whole_blocks(pool, 1, 131_072) == pytest.approx(1_256_440, rel=0.001)


def test_version_picks_the_memory_profile() -> None:
    """V0 (<= 0.7) profiles max(max_model_len, 2048) tokens and captures graphs after the pool; V1 (0.8+) the token
    budget; from 0.21 the graphs' estimate comes off before the pool (vllm#30515, on by default in 0.21)."""
    vllm = runtimes.engine("vllm")
    v0, v1, late = (vllm.memory_profile(v) for v in ("0.6.4.dev9+g5d264f4a", "v0.11.0", "0.24.0"))
    assert v0 is not None and v1 is not None and late is not None
    assert (v0.profile_tokens, v0.graphs_before_pool, v0.max_num_seqs) == ("model_len_unless_chunked", False, 256)
    assert (v1.profile_tokens, v1.graphs_before_pool) == ("budget", False)
    assert late.graphs_before_pool and vllm.memory_profile(None) == late
    assert version_tuple("0.6.4.dev9+g5d264f4a") == (0, 6, 4) and version_tuple("v0.21.0rc1") == (0, 21, 0)


def test_v0_tokens_and_concurrency_come_from_whole_blocks() -> None:
    """V0 on a 20,000-token Llama-3.1-8B: the printed tokens are blocks x 16 and the concurrency tokens / 20,000
    (1,952 x 16 / 20,000 = 1.56x in the log's own figures)."""
    plan = infer_plan(resolve_model("llama-3.1-8b"), InferJob(
        engine="vllm", engine_version="0.6.4", input_len=20_000, output_len=0, kv_dtype="bf16"), "rtx-3090")
    details = inference_memory(plan).details
    assert details["kv_tokens_per_gpu"] == details["kv_blocks"] * 16
    assert details["max_concurrency_at_len"] == pytest.approx(details["kv_tokens_per_gpu"] / 20_000)


def test_enforce_eager_captures_no_graphs_and_later_versions_pay_for_them_first() -> None:
    arch = resolve_model("llama-3.1-8b")
    base = dict(engine="vllm", input_len=8192, output_len=0)
    eager = inference_memory(infer_plan(arch, InferJob(**base, engine_version="0.24.0", enforce_eager=True)))
    before = inference_memory(infer_plan(arch, InferJob(**base, engine_version="0.20.0")))
    after = inference_memory(infer_plan(arch, InferJob(**base, engine_version="0.24.0")))
    assert eager.details["cuda_graph_bytes"] == 0
    graphs = after.details["cuda_graph_bytes"]
    assert graphs > 0
    assert after.details["kv_pool_bytes"] == pytest.approx(before.details["kv_pool_bytes"] - graphs)
    assert eager.details["kv_pool_bytes"] == pytest.approx(before.details["kv_pool_bytes"])


def test_gddr_ecc_and_the_driver_share_leave_cuda_less_than_the_datasheet(shipped: Catalog) -> None:
    """An L40S (48 GiB GDDR6, ECC on) shows 45 GiB before the driver's share; an RTX 4090 (no ECC) 24 GiB x 0.987
    = 23.69 GiB against the 23.68 GiB PyTorch reports (zai-org/CogVideo#36)."""
    assert cuda_total_bytes(shipped.gpus["l40s"]) / GIB == pytest.approx(45 * 0.987)
    assert cuda_total_bytes(shipped.gpus["rtx-4090"]) / GIB == pytest.approx(23.68, abs=0.02)


def test_estimate_prints_the_pool_as_the_engine_would() -> None:
    from typer.testing import CliRunner

    from gpuwise.cli.main import app

    args = ["estimate", "llama-3.1-8b", "--task", "infer", "--engine", "vllm", "--gpu", "h100-sxm-80gb",
            "--input-len", "131072", "--output-len", "0", "--engine-version", "0.11.0"]
    memory = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)["memory"]
    assert memory["kv_cache_tokens"] == memory["kv_blocks"] * 16
    assert memory["max_concurrency_at_len"] == pytest.approx(memory["kv_cache_tokens"] / 131_072, abs=0.01)
    text = CliRunner().invoke(app, args, env={"COLUMNS": "200"}).stdout
    assert f"= {memory['kv_cache_tokens']:,} tokens ({memory['kv_blocks']:,} blocks of 16)" in text
    assert "maximum concurrency for 131,072 tokens per request" in text


LOGS = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "engine-logs"


@pytest.mark.skipif(not LOGS.is_dir(), reason="the shared engine logs are absent")
def test_predictions_against_the_public_engine_logs() -> None:
    """benchmarks/engine_memory.py over ../shared/data/engine-logs: the floors reached (KV tokens within 5 % on 9 of
    12 logs that print them, KV GiB on 6 of 10, weights within 10 % on all 10); the misses are named in the
    benchmark's output (PP2 DeepSeek-V3, the int4 Kimi-K2 and mxfp4 gpt-oss-120b weights, the hybrid Qwen3.6)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import engine_memory

    rows = engine_memory.all_rows(LOGS)

    def within(figure: str, bar: float) -> int:
        return sum(1 for r in rows if r.figure == figure and r.error is not None and abs(r.error) <= bar)

    assert within("kv_cache_tokens", 0.05) >= 9
    assert within("kv_cache_gib", 0.05) >= 6
    assert within("weights_gib", 0.10) >= 10
    assert within("max_total_num_tokens", 0.05) >= 1


def test_vllm_before_mla_caches_every_heads_k_and_v() -> None:
    """vLLM 0.6.6 ran DeepSeek-V3 decompressed: each of 128 / 8 = 16 heads per rank caches K (128 + 64 = 192 dims)
    and V, both padded to the 256 its attention was built with, so 61 layers x 2 x 16 x 256 x 2 B per token at TP 8
    -- the head size the log's own 528 CPU blocks imply: 4 GiB of swap / (16 tokens x 31 layers at PP 2 x 16 x 2 x
    256 x 2 B) = 528.5; from 0.7.1 the latent."""
    assert int(4 * 2**30 / (16 * 31 * 16 * 2 * 256 * 2)) == 528
    arch = resolve_model("deepseek-v3")
    job = dict(kv_dtype="bf16", tp=8, count=8, quant="fp8-block", engine="vllm")
    assert kv_bytes_per_token(infer_plan(arch, InferJob(**job, engine_version="0.6.6"))) == 61 * 2 * 16 * 256 * 2
    assert kv_bytes_per_token(infer_plan(arch, InferJob(**job, engine_version="0.7.1"))) == 61 * 576 * 2


def test_sglang_default_fraction_by_version() -> None:
    """SGLang 0.3: 0.88 at TP 1, 0.87 at TP 2. From 0.5.3 on an H100 (81,920 MiB) at TP 1: reserve 512 + 8,192 x 1.5
    + 1 x 128 + 256 x 2 = 13,440 MiB, so round((81,920 - 13,440) / 81,920, 3) = 0.836."""
    arch = resolve_model("llama-3.1-8b")
    sglang = runtimes.engine("sglang")
    for version, tp, fraction in (("0.3.0", 1, 0.88), ("0.3.0", 2, 0.87), ("0.5.3", 1, 0.836)):
        plan = infer_plan(arch, InferJob(engine="sglang", engine_version=version, tp=tp, count=tp))
        assert pool_fraction(plan, sglang.memory_profile(version)) == fraction


def test_vllm_hybrid_allocator_groups_sliding_and_linear_layers() -> None:
    """vLLM >= 0.10 (kv_cache_utils): gpt-oss-20b's 12 sliding + 12 full layers make 2 groups of 12 with pages of
    16 x 2 x 8 x 64 x 2 B = 32,768 B; Gemma-3-27B's 52 sliding + 10 full layers make 6 + 1 groups of 10, so a
    10 GiB pool is 10 GiB // (131,072 x 10) = 8,192 blocks and prints 8,192 // 7 x 16 = 18,720 tokens, and one
    8,192-token request takes 6 x (cdiv(1,023 + 2,048, 16) + 1) + 512 = 1,670 blocks. Qwen3-Next's linear layers
    hold 32 x 128 x 128 + (2 x 16 x 128 + 32 x 128) x (4 - 1) = 548,864 bf16 elements per sequence, so its
    attention block grows to 16 x cdiv(1,097,728, 16 x 2,048) = 544 tokens (vLLM's config.py
    HybridAttentionMambaModelConfig logs 'Setting attention block size to N tokens'), pages of 544 x 2,048 B, 3 + 1
    groups of 12."""
    job = dict(engine="vllm", engine_version="0.19.0", kv_dtype="bf16", input_len=8192, output_len=0)
    oss = kv_layout(infer_plan(resolve_model("gpt-oss-20b"), InferJob(**job)), 16, grouped=True)
    assert (oss.block_tokens, oss.page_bytes, oss.group_size, oss.groups) == (16, 32_768, 12, 2)
    gemma = kv_layout(infer_plan(resolve_model("gemma-3-27b"), InferJob(**job)), 16, grouped=True)
    assert (gemma.page_bytes, gemma.group_size, gemma.groups) == (131_072, 10, 7)
    blocks = gemma.blocks(10 * GIB)
    assert (blocks, gemma.tokens(blocks)) == (8192, 18_720)
    assert gemma.blocks_per_request(8192, 2048) == 1670
    nxt = kv_layout(infer_plan(resolve_model("qwen3-next-80b-a3b"), InferJob(**job, quant="bf16")), 16, grouped=True)
    assert (nxt.block_tokens, nxt.page_bytes, nxt.group_size, nxt.groups) == (544, 1_114_112, 12, 4)
    flat = kv_layout(infer_plan(resolve_model("gemma-3-27b"), InferJob(**job)), 16, grouped=False)
    assert flat.tokens(flat.blocks(10 * GIB)) == 10 * GIB // (16 * 62 * 8192) * 16  # V0: every layer every token


def test_vllm_pads_mxfp4_experts_for_marlin_below_hopper() -> None:
    """vLLM runs MXFP4 MoE through Marlin below compute capability 9.0, which pads each expert's intermediate width
    to a multiple of 128 and its hidden width to 256: gpt-oss-20b's 2880 x 2880 experts become 2944 x 3072, so its
    expert bytes grow by (2944 / 2880) x (3072 / 2880) = 1.0904 on an A100 and not at all on an H100 (Triton)."""
    from gpuwise.api import model
    from gpuwise.catalog.catalog import load_catalog
    from gpuwise.estimate.plan import InferPlan, resolve
    from gpuwise.workload.jobs.job import InferJob

    arch, catalog = model("gpt-oss-20b"), load_catalog()
    job = InferJob(engine="vllm", batch=1, input_len=1024, output_len=0)
    ampere = resolve(arch, job, catalog.gpu("a100-sxm-80gb"))
    hopper = resolve(arch, job, catalog.gpu("h100-sxm-80gb"))
    assert isinstance(ampere, InferPlan) and isinstance(hopper, InferPlan)
    assert arch.intermediate == 2880 and arch.hidden == 2880
    factor = (2944 / 2880) * (3072 / 2880)
    assert hopper.stored.expert_padding == 1.0
    assert ampere.stored.expert_bytes == pytest.approx(hopper.stored.expert_bytes * factor, rel=1e-9)
    assert ampere.stored.bytes - hopper.stored.bytes == pytest.approx(hopper.stored.expert_bytes * (factor - 1),
                                                                      rel=1e-9)
