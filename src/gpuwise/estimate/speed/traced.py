"""A traced step timed kernel by kernel: each aten operator the model's own code dispatched (workload/trace/kernels.py)
gets its roofline time on the card and, in an eager runtime, its host dispatch cost; the step takes the longer of
the two. A second derivation of the closed form's step for any model transformers builds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuwise.catalog import GPU
from gpuwise.estimate.weights import matmul_dtype
from gpuwise.estimate.speed.eager import host_s_per_dispatch
from gpuwise.estimate.speed.roofline import Op, machine, phase_time
from gpuwise.estimate.speed.training import train_dtype
from gpuwise.workload.jobs.job import InferJob, Job
from gpuwise.workload.trace.kernels import TracedOp


@dataclass(frozen=True)
class TracedTime:
    seconds: float  # the traced step: its kernels on the GPU, or the host dispatching them, whichever is longer
    gpu_s: float
    host_s: float
    launches: int
    dispatches: int


def traced_time(ops: Mapping[str, TracedOp], job: Job, gpu: GPU) -> TracedTime:
    """The roofline over the traced operators of one step of ``job`` on ``gpu``."""
    dtype = matmul_dtype(job.weights, gpu) if isinstance(job, InferJob) else train_dtype(job.precision)
    m = machine(gpu, dtype)
    listed = [Op(name, op.kind, op.flops, op.bytes, op.launches) for name, op in ops.items()]
    gpu_s = phase_time(listed, m).seconds
    dispatches = sum(op.dispatches for op in ops.values())
    host_s = dispatches * host_s_per_dispatch(job)
    return TracedTime(max(gpu_s, host_s), gpu_s, host_s, sum(op.launches for op in ops.values()), dispatches)
