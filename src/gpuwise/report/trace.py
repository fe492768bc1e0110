"""A traced training step (workload/trace/steps.py) beside the closed form's estimate."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # types only: `gpuwise --help` imports this module and loads no estimator for it
    from gpuwise.api import Estimate, MemoryEstimate
    from gpuwise.api.reporting import Trace, TracedTime


def allocated_bytes(memory: MemoryEstimate) -> float:
    """The closed form's counterpart of torch.cuda.max_memory_allocated() (MemoryEstimate.allocated_bytes)."""
    return memory.allocated_bytes


def closed_form_step_s(result: Estimate) -> float | None:
    """The closed form's counterpart of the traced step: a training step, or one decode step."""
    from gpuwise.api import InferPerf, TrainPerf

    perf = result.perf
    if isinstance(perf, TrainPerf):
        return perf.step_time_s
    if isinstance(perf, InferPerf) and perf.tpot_ms is not None:
        return perf.tpot_ms / 1e3
    return None


def _timed_json(timed: TracedTime, result: Estimate) -> dict[str, Any]:
    closed = closed_form_step_s(result)
    return {"step_s": round(timed.seconds, 6), "gpu_s": round(timed.gpu_s, 6), "host_s": round(timed.host_s, 6),
            "launches": timed.launches, "dispatches": timed.dispatches,
            "closed_form_step_s": None if closed is None else round(closed, 6),
            "closed_form_over_trace": None if closed is None or not timed.seconds else round(closed / timed.seconds,
                                                                                               4)}


def trace_json(traced: Trace, memory: MemoryEstimate, timed: TracedTime | None = None,
               result: Estimate | None = None) -> dict[str, Any]:
    closed = allocated_bytes(memory)
    return {"timed": _timed_json(timed, result) if timed is not None and result is not None else None,
            "peak_allocated_gb": round(traced.peak_allocated_bytes / 1e9, 4),
            "breakdown_gb": {k: round(v / 1e9, 4) for k, v in traced.breakdown_bytes.items()},
            "flops_per_step": traced.flops_per_step, "kernels_per_step": traced.kernels_per_step,
            "closed_form_allocated_gb": round(closed / 1e9, 4),
            "closed_form_over_trace": round(closed / traced.peak_allocated_bytes, 4)
            if traced.peak_allocated_bytes else None,
            "method": traced.method}


def trace_line(traced: Trace, memory: MemoryEstimate, timed: TracedTime | None = None,
               result: Estimate | None = None) -> str:
    closed = allocated_bytes(memory)
    parts = ", ".join(f"{k} {v / 1e9:,.2f}" for k, v in traced.breakdown_bytes.items() if v >= 5e6)
    timed_text = _timed_line(timed, result) if timed is not None and result is not None else ""
    peak = traced.peak_allocated_bytes
    return timed_text + (f"traced step (fake tensors, the model's own code): peak allocated {peak / 1e9:,.2f} GB "
                         f"({parts}); the closed form's allocated part {closed / 1e9:,.2f} GB ({closed / peak:.2f}x); "
                         f"{_flops(traced.flops_per_step)} and {traced.kernels_per_step:,} aten operators per step")


def _flops(flops: float) -> str:
    return f"{flops / 1e12:,.1f} TFLOP" if flops >= 1e11 else f"{flops / 1e9:,.2f} GFLOP"


def _timed_line(timed: TracedTime, result: Estimate) -> str:
    closed = closed_form_step_s(result)
    versus = "" if closed is None else f" (the closed form: {closed * 1e3:,.1f} ms, {closed / timed.seconds:.2f}x)"
    bound = "the host's dispatch" if timed.host_s > timed.gpu_s else "the GPU's kernels"
    return (f"traced step timed kernel by kernel: {timed.seconds * 1e3:,.1f} ms{versus}, bound by {bound} "
            f"({timed.launches:,} launches, {timed.gpu_s * 1e3:,.1f} ms on the GPU, {timed.host_s * 1e3:,.1f} ms "
            "of host dispatch)\n")
