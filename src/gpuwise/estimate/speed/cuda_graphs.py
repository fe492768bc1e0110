"""Which decode batches a serving engine replays as a CUDA graph, from each engine's own defaults.

An engine captures its decode step once per batch size in a list; a batch between two captured sizes is padded
up to the next one (vLLM, SGLang) or, where padding is off by default (TensorRT-LLM), runs without a graph, as does
any batch above the largest captured size. Without a graph every kernel is launched from Python, so a step costs
at least its kernel count times the eager launch cost (constants.EAGER_OVERHEAD).

Sources (the defaults an engine starts with when no flag is given):
- vLLM ``vllm/config/vllm.py`` ``_set_cudagraph_sizes``: largest size ``min(max_num_seqs x (1 + speculative
  tokens) x 2, 512)``, no more than ``max_num_batched_tokens``; sizes ``[1, 2, 4] + range(8, 256, 8) +
  range(256, largest + 1, 16)`` tokens; a batch above it runs without a graph (``cudagraph_dispatcher``).
- SGLang ``python/sglang/srt/server_args.py`` ``_handle_gpu_memory_settings``: ``cuda_graph_max_bs`` 24 (80 at
  TP >= 4) below 35 GB, 32 (160) below 60 GB, 256 (512) below 160 GB, 512 above; ``_generate_cuda_graph_batch_sizes``:
  ``[1, 2, 4, 8, 12] + range(16, 257, 8) + range(272, 512, 16) + range(512, max + 1, 32)``, padded.
- TensorRT-LLM ``tensorrt_llm/llmapi/llm_args.py`` ``CudaGraphConfig``: ``max_batch_size`` 0 means 128,
  ``enable_padding`` False, sizes ``1..31, 32, 64, 128``; other batch sizes run without a graph.
"""

from __future__ import annotations

import bisect
from functools import lru_cache

SGLANG_MAX_BS = ((35, 24, 80), (60, 32, 160), (160, 256, 512), (float("inf"), 512, 512))  # (GB below, TP<4, TP>=4)


@lru_cache(maxsize=64)
def captured_sizes(engine: str, gpu_memory_gb: float, tp: int, max_num_seqs: int, query: int = 1,
                   max_batched_tokens: int | None = None) -> tuple[int, ...] | None:
    """The decode batch sizes ``engine`` captures by default, in sequences; None for engines without graphs in
    this model (transformers, llama.cpp, exllamav2, lmdeploy: their steps keep the launch floor they have)."""
    if engine == "vllm":
        largest = min(max_num_seqs * query * 2, 512, max_batched_tokens or 512)
        tokens = [t for t in [1, 2, 4, *range(8, 256, 8), *range(256, largest + 1, 16)] if t <= largest]
        return tuple(sorted({max(1, t // query) for t in tokens}))
    if engine == "sglang":
        largest = next(big if tp >= 4 else small for below, small, big in SGLANG_MAX_BS if gpu_memory_gb < below)
        sizes = [1, 2, 4, 8, 12, *range(16, 257, 8), *range(272, 512, 16), *range(512, largest + 1, 32)]
        return tuple(s for s in sizes if s <= largest)
    if engine == "trtllm":
        return (*range(1, 32), 32, 64, 128)
    return None


def graph_batch(engine: str, batch: int, sizes: tuple[int, ...] | None) -> int | None:
    """The captured size a decode step of ``batch`` sequences replays (the batch padded up where the engine pads),
    or None when it runs without a graph."""
    if sizes is None or batch > sizes[-1]:
        return None
    at = sizes[bisect.bisect_left(sizes, batch)]
    if engine == "trtllm" and at != batch:  # TensorRT-LLM pads only with enable_padding
        return None
    return at
