"""What a sequence keeps on each GPU while it is generated: the K/V (or latent) cache of every caching layer and
the fixed state of linear-attention layers, block by block (workload/model/blocks.py).

Per layer and token: GQA caches K and V of its KV heads (tensor parallelism splits the heads, at least one per
GPU); MLA caches one latent plus one RoPE key shared by all heads, which every tensor-parallel rank holds whole
(DeepSeek-V2 sec. 2.1.2: "MLA only needs to cache c^KV_t"); a sliding-window or chunked layer holds at most its
window. A linear-attention layer holds a state per sequence that does not grow with the context: value heads x key
dim x value dim in fp32, plus the last conv-kernel inputs (transformers cache_utils LinearAttentionLayer).
"""

from __future__ import annotations

from gpuwise.estimate.plan import InferPlan
from gpuwise.workload.model.architecture import Architecture
from gpuwise.workload.model.blocks import Attention

RECURRENT_STATE_BYTES = 4  # fp32: the delta-rule state is accumulated in float32 (torch_chunk_gated_delta_rule)


# q, k and v padded to 256 dims, the kernels lacking 192 (the code's own comment says so above
# Attention(num_local_heads, 256, ...) in DeepseekV2Attention: vLLM before its MLA backend of v0.7.1; SGLang's port,
# sgl-project/sglang python/sglang/srt/models/deepseek_v2.py); vLLM 0.6.6's 528 CPU blocks of DeepSeek-V3 at TP 8 x
# PP 2 agree: 4 GiB of swap / (16 tokens x 31 layers x 16 heads x 2 x 256 x 2 bytes) = 528.5
DECOMPRESSED_MLA_HEAD = 256


def elements_on_gpu(attention: Attention, tp: int, *, latent: bool = True) -> float:
    """Cache elements one token adds to one layer on one GPU of a ``tp``-way group (``latent=False``: an engine
    that runs MLA decompressed caches K and V per head, each padded to DECOMPRESSED_MLA_HEAD dims)."""
    if attention.kind == "mla":
        if not latent:
            return 2 * max(attention.kv_heads / tp, 1.0) * max(attention.head_dim, DECOMPRESSED_MLA_HEAD)
        return float(attention.cache_elements_per_token)
    if attention.kind == "linear":
        return 0.0
    return max(attention.kv_heads / tp, 1.0) * (attention.head_dim + attention.value_dim)


def kv_bytes_per_token(plan: InferPlan) -> float:
    """Cache bytes one token adds on one GPU, every caching layer holding it (a window not yet full), in the
    plan's KV format."""
    tp, latent = plan.job.tp, caches_latent(plan)
    return sum(b.count * elements_on_gpu(b.attention, tp, latent=latent) for b in plan.arch.caching_blocks) * (
        plan.kv_bytes)


def caches_latent(plan: InferPlan) -> bool:
    """Whether the plan's engine, at its version, caches MLA's latent (vLLM from 0.7.1, SGLang, the rest)."""
    profile = plan.engine.memory_profile(plan.job.engine_version)
    return profile is None or profile.caches_latent


def state_bytes_per_sequence(plan: InferPlan) -> float:
    """The fixed linear-attention state of one sequence on one GPU (value heads split over tensor parallelism)."""
    total = 0.0
    for block in plan.arch.caching_blocks:
        recurrent, conv = block.attention.state_elements
        total += block.count * (recurrent * RECURRENT_STATE_BYTES + conv * plan.act_bytes)
    return total / plan.job.tp


def sequence_cache_bytes(plan: InferPlan, context: float) -> float:
    """Everything one sequence of ``context`` tokens keeps on one GPU: windows hold at most their window."""
    tp, latent = plan.job.tp, caches_latent(plan)
    cache = sum(b.count * elements_on_gpu(b.attention, tp, latent=latent) * min(context, b.attention.window or context)
                for b in plan.arch.caching_blocks)
    return cache * plan.kv_bytes + state_bytes_per_sequence(plan)


def describe_cache(arch: Architecture) -> str:
    """``2 x 32 layers x 8 KV heads x 128 dims per token`` and the like, per kind of attention."""
    counts: dict[Attention, int] = {}
    for block in arch.caching_blocks:  # blocks that differ only in their MLP share one cache shape
        counts[block.attention] = counts.get(block.attention, 0) + block.count
    parts = []
    windowed = any(a.window for a in counts)
    for a, count in counts.items():
        if a.kind == "mla":
            indexer = f" + {a.indexer_dim} indexer key" if a.indexer_dim else ""
            parts.append(f"{count} MLA layers x ({a.kv_lora_rank} latent + {a.rope_dim} RoPE{indexer}) per token")
        elif a.kind == "linear":
            parts.append(f"{count} linear-attention layers x a {a.kv_heads} x {a.head_dim} x {a.value_dim} "
                         "state per sequence")
        else:
            window = (f" (sliding window: the last {a.window:,} tokens)" if a.window else
                      " (full attention: the whole context)" if windowed else "")
            parts.append(f"2 x {count} layers x {a.kv_heads} KV heads x {a.head_dim} dims per token{window}")
    return "; ".join(parts) or "none"
