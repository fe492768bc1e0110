"""Predictions for the corpus's microbenchmarks, from the same roofline the estimators use.

  [gemm, GPU, DTYPE, M, N, K]                       -> tflops: achieved rate of one M x N x K matmul
  [attention, GPU, IMPL, DTYPE, B, S, H, D, CAUSAL, PASS] -> tflops: the attention kernel's rate
  [allreduce, GPU, RANKS, BYTES, LINK]              -> busbw_gb_s: nccl-tests bus bandwidth, 2 (n-1)/n x S / time
  [copy, GPU]                                       -> gb_s: device-memory copy bandwidth (read + write)

A command gpuwise cannot place (an unknown card, a link it has no record of) answers a one-line reason.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from gpuwise.errors import GpuwiseError

KINDS = ("gemm", "attention", "allreduce", "copy")


@functools.lru_cache(maxsize=1)
def _catalog() -> Any:
    """The shipped catalog, loaded once for all the microbenchmarks."""
    from gpuwise.catalog.catalog import load_catalog

    return load_catalog(use_user_dir=False)


def _gemm(catalog: Any, gpu_id: str, dtype: str, m: str, n: str, k: str) -> dict[str, float]:
    from gpuwise.estimate.roofline import machine

    rates = machine(catalog.gpu(gpu_id), dtype)  # type: ignore[arg-type]
    flops = 2.0 * float(m) * float(n) * float(k)
    return {"tflops": rates.gemm_rate(flops) / 1e12}


def _attention(catalog: Any, gpu_id: str, _impl: str, dtype: str, *_shape: str) -> dict[str, float]:
    from gpuwise.estimate.roofline import machine

    rates = machine(catalog.gpu(gpu_id), dtype)  # type: ignore[arg-type]
    return {"tflops": rates.peak_flops * rates.attention_efficiency / 1e12}


def _allreduce(catalog: Any, gpu_id: str, ranks: str, size: str, link_kind: str) -> dict[str, float]:
    from gpuwise.estimate.speed.parallel import all_reduce_s, links

    gpu = catalog.gpu(gpu_id)
    paths = links(gpu, catalog, network=None, nodes=1)
    link = paths.pcie if link_kind == "pcie" and paths.pcie is not None else paths.intra
    if link_kind not in ("nvlink", "pcie", "xgmi", "infinity-fabric"):
        raise ValueError(f"no link model for {link_kind!r} in a single-node all-reduce")
    n, size_bytes = int(ranks), float(size)
    seconds = all_reduce_s(size_bytes, n, link)
    return {"busbw_gb_s": 2 * (n - 1) / n * size_bytes / seconds / 1e9}


def _copy(catalog: Any, gpu_id: str) -> dict[str, float]:
    from gpuwise.estimate.roofline import machine

    return {"gb_s": machine(catalog.gpu(gpu_id), "bf16").memory_bytes_per_s / 1e9}


def answer(command: Sequence[str]) -> dict[str, float] | str:
    """The predicted figure of a microbenchmark command, or why it has none."""
    kind, *args = command
    functions = {"gemm": _gemm, "attention": _attention, "allreduce": _allreduce, "copy": _copy}
    try:
        return functions[kind](_catalog(), *args)
    except (KeyError, ValueError, TypeError, LookupError, GpuwiseError) as exc:
        return f"{kind}: {exc}".splitlines()[0][:200]
