"""How one GPU type at one count does on every workload: fits, time per job, serving capacity, or why not.

Training on several GPUs shards with ZeRO-3/FSDP (the user's --zero when higher) over nodes of 8.
Serving uses the smallest tensor-parallel degree that fits the model, then replicas; a replica's capacity is
Little's law at the largest batch whose end-to-end latency (its prefill + output tokens x decode step) meets the
SLO, planned at 80 % of saturation so that queues stay short (a gpuwise assumption; `serve-sim` shows the tail).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpuwise.catalog import GPU, Catalog
from gpuwise.errors import GpuwiseError
from gpuwise.estimate.estimate import estimate
from gpuwise.estimate.perf import TrainPerf, decode_step_s, prefill_s
from gpuwise.estimate.serving_memory import inference_memory
from gpuwise.recommend.request import Workload
from gpuwise.workload.architecture import Architecture
from gpuwise.workload.job import InferJob, TrainJob, make_job

PLANNING_UTILISATION = 0.8
GPUS_PER_NODE = 8


@dataclass(frozen=True)
class Rejection:
    code: str  # memory, feature, stack, power, chassis, budget, slo, deadline, count, vendor, os, offer
    reason: str
    gap: float = 1.0  # how far from acceptable (needed / allowed); the nearest options have the smallest


@dataclass(frozen=True)
class Fit:
    """A GPU type and count that can run every workload, with the figures the ranking needs."""

    per_gpu_gb: float
    job_hours: float | None = None  # training: one job (the sum over training workloads)
    tokens_per_s: float | None = None
    qps_capacity: float | None = None
    p99_ms: float | None = None
    tp: int = 1
    notes: tuple[str, ...] = field(default_factory=tuple)


def _train_job(workload: Workload, count: int) -> TrainJob:
    options = dict(workload.options)
    if count > 1:
        options["zero"] = max(int(options.get("zero", 0)), 3)
        options["nodes"] = max(1, math.ceil(count / GPUS_PER_NODE))
    job = make_job(TrainJob, **{**options, "count": count})
    assert isinstance(job, TrainJob)
    return job


def _train(arch: Architecture, workload: Workload, gpu: GPU, catalog: Catalog, count: int) -> Fit | Rejection:
    job = _train_job(workload, count)
    result = estimate(arch, job, gpu, catalog)
    memory = result.memory
    if not memory.fits:
        return Rejection("memory", f"needs {memory.per_gpu_bytes / 1e9:,.1f} GB per GPU, has "
                                   f"{memory.capacity_bytes / 1e9:,.1f}", memory.per_gpu_bytes / memory.capacity_bytes)
    perf = result.perf
    assert isinstance(perf, TrainPerf)
    hours = workload.tokens / perf.tokens_per_s / 3600
    if workload.deadline_hours is not None and hours > workload.deadline_hours:
        return Rejection("deadline", f"takes {hours:,.1f} h > deadline {workload.deadline_hours:,.1f} h",
                         hours / workload.deadline_hours)
    return Fit(per_gpu_gb=memory.per_gpu_bytes / 1e9, job_hours=hours, tokens_per_s=perf.tokens_per_s)


def _replica(arch: Architecture, workload: Workload, gpu: GPU, catalog: Catalog, tp: int
             ) -> tuple[InferJob, float, float, float] | Rejection:
    """(job, per-GPU GB, requests/s one replica sustains within the SLO, its latency) or why it cannot serve."""
    job = make_job(InferJob, **{**workload.options, "count": tp, "tp": tp})
    assert isinstance(job, InferJob)
    memory = inference_memory(arch, job.model_copy(update={"batch": 1}), capacity_bytes=gpu.memory_bytes)
    if not memory.fits:
        return Rejection("memory", f"needs {memory.per_gpu_bytes / 1e9:,.1f} GB per GPU at TP {tp}, has "
                                   f"{memory.capacity_bytes / 1e9:,.1f}", memory.per_gpu_bytes / memory.capacity_bytes)
    slo = workload.p99_ms / 1e3 if workload.p99_ms else math.inf

    def latency(batch: int) -> float:
        step = decode_step_s(arch, job, gpu, catalog, batch=batch, context=job.input_len + job.output_len / 2)
        return prefill_s(arch, job, gpu, catalog, tokens=job.input_len) + max(job.output_len - 1, 0) * step

    limit = max(1, min(256, memory.max_concurrency or 1))
    if latency(1) > slo:
        return Rejection("slo", f"P99 {latency(1) * 1e3:,.0f} ms > SLO {slo * 1e3:,.0f} ms even at batch 1",
                         latency(1) / slo)
    best = 1
    while best * 2 <= limit and latency(best * 2) <= slo:
        best *= 2
    capacity = best / latency(best) * PLANNING_UTILISATION
    return job, memory.per_gpu_bytes / 1e9, capacity, latency(best)


def _serve(arch: Architecture, workload: Workload, gpu: GPU, catalog: Catalog, count: int) -> Fit | Rejection:
    first: Rejection | None = None
    for tp in (1, 2, 4, 8):
        if tp > count or count % tp:
            continue
        replica = _replica(arch, workload, gpu, catalog, tp)
        if isinstance(replica, Rejection):
            first = first or replica
            if replica.code == "memory":
                continue
            return replica
        _job, per_gpu, capacity, latency = replica
        total = capacity * (count // tp)
        if workload.qps is not None and total < workload.qps:
            return Rejection("slo", f"{count} GPU(s) serve {total:,.1f} QPS within the SLO < {workload.qps:,.1f} "
                                    "QPS needed", workload.qps / max(total, 1e-9))
        return Fit(per_gpu_gb=per_gpu, qps_capacity=total, p99_ms=latency * 1e3, tp=tp)
    return first or Rejection("memory", f"does not fit on {count} GPU(s) at any tensor-parallel degree")


def evaluate(archs: dict[str, Architecture], workloads: tuple[Workload, ...], gpu: GPU, catalog: Catalog,
             count: int) -> Fit | Rejection:
    """Every workload on ``count`` x ``gpu``; the first rejection wins, else the combined figures."""
    hours = 0.0
    fits: list[Fit] = []
    for workload in workloads:
        try:
            if workload.task == "train":
                outcome = _train(archs[workload.model], workload, gpu, catalog, count)
            else:
                outcome = _serve(archs[workload.model], workload, gpu, catalog, count)
        except GpuwiseError as exc:  # e.g. a count that does not divide into the requested TP x PP
            return Rejection("count", str(exc))
        if isinstance(outcome, Rejection):
            return outcome
        fits.append(outcome)
        hours += outcome.job_hours or 0.0
    train = [f for f in fits if f.job_hours is not None]
    serve = [f for f in fits if f.qps_capacity is not None]
    return Fit(
        per_gpu_gb=max(f.per_gpu_gb for f in fits), job_hours=hours if train else None,
        tokens_per_s=train[0].tokens_per_s if train else None,
        qps_capacity=serve[0].qps_capacity if serve else None, p99_ms=serve[0].p99_ms if serve else None,
        tp=serve[0].tp if serve else 1,
    )
