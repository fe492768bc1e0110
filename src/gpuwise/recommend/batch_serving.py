"""Serving a model that generates nothing (encoder, CNN, ViT, detector) in batches: a replica's rate and P99 at the
batch the server forms.

A serving stack groups waiting requests into one forward pass (Triton's dynamic batcher up to ``max_batch_size``,
TorchServe's ``batch_size``): a larger batch fills more of a big card, a smaller one answers sooner. When the user left
--batch free the recommender plans the batch as such a server would be configured, the largest rate whose P99 meets
the SLO; a given --batch is kept.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuwise.catalog import GPU, Catalog
from gpuwise.estimate.calibration import Calibration
from gpuwise.estimate.estimate import estimate
from gpuwise.estimate.serving.capacity import batch_capacity
from gpuwise.recommend.fit import Rejection, too_big
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.architecture import Architecture

DYNAMIC_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128)
"""gpuwise policy: the batch sizes tried when --batch is free, powers of two up to 128 (Triton's and TorchServe's
batchers take any maximum; a power of two fills the kernels' tiles)."""

BatchPlan = tuple[float, float, Callable[[float], float], int | None]  # bytes per GPU, rate, P99 at a rate, batch


def _at_batch(arch: Architecture, job: InferJob, gpu: GPU, catalog: Catalog, calibration: Calibration | None,
              slo_s: float | None) -> BatchPlan | Rejection:
    result = estimate(arch, job, gpu, catalog, calibration=calibration)
    if not result.memory.fits:
        return too_big(result.memory, job.tp)
    samples = getattr(result.perf, "samples_per_s", None)
    if not samples:
        return Rejection("stack", f"no throughput model for serving {arch.name}")
    rate, p99 = batch_capacity(seconds_per_batch=job.batch / samples, batch=job.batch, slo_s=slo_s)
    if rate <= 0 and slo_s is not None:
        idle = p99(0.0)
        advice = "a smaller --batch is faster" if job.batch > 1 else "one request at a time is already its fastest"
        return Rejection("slo", f"P99 {idle * 1e3:,.3g} ms for a batch of {job.batch} > SLO {slo_s * 1e3:,.3g} ms; "
                                f"{advice}", idle / slo_s)
    return result.memory.per_gpu_bytes, rate, p99, job.batch


def plan_batches(arch: Architecture, job: InferJob, gpu: GPU, catalog: Catalog, calibration: Calibration | None,
                 *, slo_s: float | None, free_batch: bool) -> BatchPlan | Rejection:
    """One replica at the job's --batch, or, with ``free_batch``, at the batch of DYNAMIC_BATCHES that serves the
    most requests per second within ``slo_s`` (the batch is the plan's last element, None when it was given)."""
    if not free_batch:
        kept = _at_batch(arch, job, gpu, catalog, calibration, slo_s)
        return kept if isinstance(kept, Rejection) else (*kept[:3], None)
    best: BatchPlan | None = None
    first: Rejection | None = None
    for batch in DYNAMIC_BATCHES:
        outcome = _at_batch(arch, job.updated(batch=batch), gpu, catalog, calibration, slo_s)
        if isinstance(outcome, Rejection):  # a larger batch needs more memory and takes longer still
            first = first or outcome
            break
        if best is not None and outcome[1] <= best[1]:
            break  # past the batch that serves the most within the SLO
        best = outcome
    assert best is not None or first is not None
    return best if best is not None else first  # type: ignore[return-value]
