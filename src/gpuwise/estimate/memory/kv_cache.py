"""What a sequence keeps on each GPU while it is generated: the K/V (or latent) cache of every caching layer and
the fixed state of linear-attention layers, block by block (workload/model/blocks.py).

Per layer and token: GQA caches K and V of its KV heads (tensor parallelism splits the heads, at least one per
GPU); MLA caches one latent plus one RoPE key shared by all heads, which every tensor-parallel rank holds whole
(DeepSeek-V2 sec. 2.1.2: "MLA only needs to cache c^KV_t"); a sliding-window or chunked layer holds at most its
window. A linear-attention layer holds a state per sequence that does not grow with the context: value heads x key
dim x value dim in fp32, plus the last conv-kernel inputs (transformers cache_utils LinearAttentionLayer).
"""

from __future__ import annotations

from gpuwise.estimate.dtypes import activation_bytes, bytes_per_element
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.architecture import Architecture
from gpuwise.workload.model.blocks import Attention

RECURRENT_STATE_BYTES = 4  # fp32: the delta-rule state is accumulated in float32 (torch_chunk_gated_delta_rule)


def elements_on_gpu(attention: Attention, tp: int) -> float:
    """Cache elements one token adds to one layer on one GPU of a ``tp``-way group."""
    if attention.kind == "mla":
        return float(attention.cache_elements_per_token)
    if attention.kind == "linear":
        return 0.0
    return max(attention.kv_heads / tp, 1.0) * (attention.head_dim + attention.value_dim)


def kv_bytes_per_token(arch: Architecture, job: InferJob) -> float:
    """Cache bytes one token adds on one GPU, every caching layer holding it (a window not yet full)."""
    per_element = bytes_per_element(job.kv_dtype)
    return sum(b.count * elements_on_gpu(b.attention, job.tp) for b in arch.caching_blocks) * per_element


def state_bytes_per_sequence(arch: Architecture, job: InferJob) -> float:
    """The fixed linear-attention state of one sequence on one GPU (value heads split over tensor parallelism)."""
    total = 0.0
    for block in arch.caching_blocks:
        recurrent, conv = block.attention.state_elements
        total += block.count * (recurrent * RECURRENT_STATE_BYTES + conv * activation_bytes(job.weights))
    return total / job.tp


def sequence_cache_bytes(arch: Architecture, job: InferJob, context: float) -> float:
    """Everything one sequence of ``context`` tokens keeps on one GPU: windows hold at most their window."""
    per_element = bytes_per_element(job.kv_dtype)
    cache = sum(b.count * elements_on_gpu(b.attention, job.tp) * min(context, b.attention.window or context)
                for b in arch.caching_blocks)
    return cache * per_element + state_bytes_per_sequence(arch, job)


def cached_tokens(arch: Architecture, context: float) -> float:
    """Tokens a sequence keeps, averaged over its caching layers by their cache size: the whole context, or the
    window on the layers that slide (all of Mistral's; the local ones of Gemma 2 and 3, of gpt-oss)."""
    weights = [(b.count * elements_on_gpu(b.attention, 1), min(context, b.attention.window or context))
               for b in arch.caching_blocks]
    total = sum(w for w, _ in weights)
    return float(context) if not total else sum(w * t for w, t in weights) / total


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
