"""A traced step timed kernel by kernel: each aten operator the model's own code dispatched (workload/trace/kernels.py)
gets its roofline time on the card and, in an eager runtime, its host dispatch cost; the step takes the longer of
the two. A second derivation of the closed form's step for any model transformers builds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuwise.estimate.plan import Plan
from gpuwise.estimate.roofline import Op, machine, phase_time
from gpuwise.estimate.speed.eager import host_s_per_dispatch
from gpuwise.workload.trace.kernels import TracedOp


@dataclass(frozen=True)
class TracedTime:
    seconds: float  # the traced step: its kernels on the GPU, or the host dispatching them, whichever is longer
    gpu_s: float
    host_s: float
    launches: int
    dispatches: int


def traced_time(ops: Mapping[str, TracedOp], plan: Plan) -> TracedTime:
    """The roofline over the traced operators of one step of the plan's job on its card, at the rates the user's
    calibration measured where the plan carries one."""
    m = machine(plan.gpu, plan.matmul_dtype, calibration=plan.calibration)
    listed = [Op(name, op.kind, op.flops, op.bytes, op.launches) for name, op in ops.items()]
    gpu_s = phase_time(listed, m).seconds
    dispatches = sum(op.dispatches for op in ops.values())
    host_s = dispatches * host_s_per_dispatch(plan)
    return TracedTime(max(gpu_s, host_s), gpu_s, host_s, sum(op.launches for op in ops.values()), dispatches)
