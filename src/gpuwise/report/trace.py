"""A traced training step (workload/trace/steps.py) beside the closed form's estimate."""

from __future__ import annotations

from typing import Any

from gpuwise.estimate.memory.breakdown import MemoryEstimate
from gpuwise.workload.trace.steps import Trace

_NOT_ALLOCATED = ("framework_overhead", "allocator_reserve")  # CUDA context and the caching allocator's slack


def allocated_bytes(memory: MemoryEstimate) -> float:
    """The closed form's counterpart of torch.cuda.max_memory_allocated(): without the CUDA context, workspaces and
    the allocator's reserve."""
    return sum(v for k, v in memory.breakdown_bytes.items() if k not in _NOT_ALLOCATED)


def trace_json(traced: Trace, memory: MemoryEstimate) -> dict[str, Any]:
    closed = allocated_bytes(memory)
    return {"peak_allocated_gb": round(traced.peak_allocated_bytes / 1e9, 4),
            "breakdown_gb": {k: round(v / 1e9, 4) for k, v in traced.breakdown_bytes.items()},
            "flops_per_step": traced.flops_per_step, "kernels_per_step": traced.kernels_per_step,
            "closed_form_allocated_gb": round(closed / 1e9, 4),
            "closed_form_over_trace": round(closed / traced.peak_allocated_bytes, 4)
            if traced.peak_allocated_bytes else None,
            "method": traced.method}


def trace_line(traced: Trace, memory: MemoryEstimate) -> str:
    closed = allocated_bytes(memory)
    parts = ", ".join(f"{k} {v / 1e9:,.2f}" for k, v in traced.breakdown_bytes.items() if v >= 5e6)
    return (f"traced step (fake tensors, the model's own code): peak allocated {traced.peak_allocated_bytes / 1e9:,.2f}"
            f" GB ({parts}); the closed form's allocated part {closed / 1e9:,.2f} GB "
            f"({closed / traced.peak_allocated_bytes:.2f}x); {_flops(traced.flops_per_step)} and "
            f"{traced.kernels_per_step:,} aten operators per step")


def _flops(flops: float) -> str:
    return f"{flops / 1e12:,.1f} TFLOP" if flops >= 1e11 else f"{flops / 1e9:,.2f} GFLOP"
