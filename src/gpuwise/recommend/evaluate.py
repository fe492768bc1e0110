"""How one GPU type at one count does on every workload: fits, time per job, serving capacity, or why not.

Training on several GPUs shards with ZeRO-3/FSDP (the user's --zero when higher) over nodes of 8.
Serving uses the smallest tensor-parallel degree that fits the model, then replicas; a replica's capacity is the
highest rate whose P99 end-to-end latency meets the SLO in a mean-value model of continuous batching (prefill
interference and batch growth, see `_replica`); it agrees with `serve-sim`'s discrete-event simulation within
the band tested in tests/test_recommend.py, and `serve-sim` is the check for one chosen option.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from gpuwise.catalog import GPU, Catalog
from gpuwise.errors import GpuwiseError
from gpuwise.estimate import constants as C
from gpuwise.estimate.estimate import estimate, tp_divides
from gpuwise.estimate.memory import MemoryEstimate
from gpuwise.estimate.perf import TrainPerf, decode_step_s, prefill_s
from gpuwise.estimate.serving_memory import inference_memory
from gpuwise.recommend.request import Workload
from gpuwise.workload.architecture import Architecture
from gpuwise.workload.job import InferJob, TrainJob, make_job

PLANNING_UTILISATION = C.SERVING_PLANNING_UTILISATION.value
TAIL = C.SERVING_TAIL_FACTOR.value
GPUS_PER_NODE = int(C.GPUS_PER_NODE.value)


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


def _too_big(memory: MemoryEstimate, tp: int) -> Rejection:
    return Rejection("memory", f"needs {memory.per_gpu_bytes / 1e9:,.1f} GB per GPU at TP {tp}, has "
                               f"{memory.capacity_bytes / 1e9:,.1f}", memory.per_gpu_bytes / memory.capacity_bytes)


def _replica(arch: Architecture, workload: Workload, gpu: GPU, catalog: Catalog, tp: int
             ) -> tuple[float, float, Callable[[float], float]] | Rejection:
    """(per-GPU GB, requests/s one replica sustains within the SLO, P99 latency in s at a given rate) or why not.

    Continuous batching at rate r (mean-value model, solved as a fixed point): each request waits for its prefill
    P and then decodes O tokens at the step time of the running batch B = r x T; prefills of arriving requests
    take a fraction r x P of the engine, stretching everything by 1 / (1 - r x P). So T = (P + O x step(B)) /
    (1 - r x P), unstable when r x P >= 1 or B passes the batch limit; P99 = tail factor x T."""
    job = make_job(InferJob, **{**workload.options, "count": tp, "tp": tp})
    assert isinstance(job, InferJob)
    memory = inference_memory(arch, job.model_copy(update={"batch": 1}), capacity_bytes=gpu.memory_bytes)
    if not memory.fits:
        return _too_big(memory, tp)
    slo = workload.p99_ms / 1e3 if workload.p99_ms else math.inf
    limit = max(1, min(int(C.MAX_NUM_SEQS.value), memory.max_concurrency or 1))
    context = job.input_len + job.output_len / 2
    prefill = prefill_s(arch, job, gpu, catalog, tokens=job.input_len)
    tokens_after_first = max(job.output_len - 1, 0)
    steps: dict[int, float] = {}

    def step(batch: int) -> float:
        if batch not in steps:
            steps[batch] = decode_step_s(arch, job, gpu, catalog, batch=batch, context=context)
        return steps[batch]

    def p99(rate: float) -> float:
        busy = rate * prefill
        if busy >= 1:
            return math.inf
        latency = prefill + tokens_after_first * step(1)
        for _ in range(60):
            batch = rate * latency
            if batch > limit:
                return math.inf
            new = (prefill + tokens_after_first * step(max(1, round(batch)))) / (1 - busy)
            if abs(new - latency) <= 1e-4 * latency:
                latency = new
                break
            latency = (latency + new) / 2
        return TAIL * latency

    alone = p99(0.0)
    if alone > slo:
        return Rejection("slo", f"P99 {alone * 1e3:,.0f} ms > SLO {slo * 1e3:,.0f} ms even with no other request",
                         alone / slo)
    low, high = 1e-4, 1e4
    for _ in range(40):  # bisection on a log scale for the highest rate meeting the SLO (or staying stable)
        mid = math.sqrt(low * high)
        latency = p99(mid)
        low, high = (mid, high) if math.isfinite(latency) and latency <= slo else (low, mid)  # inf: unstable
    capacity = low * (PLANNING_UTILISATION if math.isinf(slo) else 1.0)
    return memory.per_gpu_bytes / 1e9, capacity, p99


def _batch_replica(arch: Architecture, workload: Workload, gpu: GPU, catalog: Catalog, tp: int
                   ) -> tuple[float, float, Callable[[float], float]] | Rejection:
    """A model that does not generate tokens (encoder, CNN, ViT): a replica runs batches of --batch samples;
    capacity is its samples/s at the planning utilisation, P99 the tail factor x one batch's time."""
    job = make_job(InferJob, **{**workload.options, "count": tp, "tp": tp})
    assert isinstance(job, InferJob)
    result = estimate(arch, job, gpu, catalog)
    if not result.memory.fits:
        return _too_big(result.memory, tp)
    samples = getattr(result.perf, "samples_per_s", None)
    if not samples:
        return Rejection("stack", f"no throughput model for serving {arch.name}")
    latency = TAIL * job.batch / samples
    slo = workload.p99_ms / 1e3 if workload.p99_ms else math.inf
    if latency > slo:
        return Rejection("slo", f"P99 {latency * 1e3:,.0f} ms for a batch of {job.batch} > SLO {slo * 1e3:,.0f} ms; "
                                "a smaller --batch is faster", latency / slo)
    return result.memory.per_gpu_bytes / 1e9, samples * PLANNING_UTILISATION, lambda _rate: latency


def _serve(arch: Architecture, workload: Workload, gpu: GPU, catalog: Catalog, count: int) -> Fit | Rejection:
    first: Rejection | None = None
    for tp in (1, 2, 4, 8):
        if tp > count or count % tp or not tp_divides(arch, tp):
            continue
        replica = (_replica if arch.decoder_layers else _batch_replica)(arch, workload, gpu, catalog, tp)
        if isinstance(replica, Rejection):
            first = first or replica
            if replica.code == "memory":
                continue
            return replica
        per_gpu, capacity, p99 = replica
        replicas = count // tp
        total = capacity * replicas
        if workload.qps is not None and total < workload.qps:
            return Rejection("slo", f"{count} GPU(s) serve {total:,.1f} QPS within the SLO < {workload.qps:,.1f} "
                                    "QPS needed", workload.qps / max(total, 1e-9))
        rate = workload.qps / replicas if workload.qps is not None else capacity
        return Fit(per_gpu_gb=per_gpu, qps_capacity=total, p99_ms=p99(rate) * 1e3, tp=tp)
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
