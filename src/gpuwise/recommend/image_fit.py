"""An image pipeline as a recommended option: one pipeline per GPU, the GPUs sharing the load, held to the tighter of
the workload's TTFT and end-to-end SLOs (an image is answered at once)."""

from __future__ import annotations

import math

from gpuwise import runtimes
from gpuwise.catalog import GPU, Catalog
from gpuwise.estimate.serving.capacity import batch_capacity
from gpuwise.flags import command_line
from gpuwise.recommend.fit import Fit, Rejection, too_big
from gpuwise.recommend.request import Workload
from gpuwise.workload.diffusion.pipeline import Pipeline
from gpuwise.workload.jobs.image import ImageJob
from gpuwise.workload.jobs.parse import job_flag_fields


def whole_answer_s(workload: Workload) -> float | None:
    """The bound on a model that answers at once (an image, a batch of embeddings): its tighter of TTFT and e2e."""
    whole = workload.slos.whole_answer_ms
    return whole / 1e3 if whole is not None else None


def lighter_settings(job: ImageJob) -> list[str]:
    """The offload modes the job's runtime has and the job did not use, and one smaller weight format it runs."""
    image = job.runtime.image
    modes = [m for m in ("model-cpu", "auto", "sequential") if image and m in image.offload_modes.value]
    lighter = [q for q in ("nf4", "gguf-q4_k_m") if q != job.quant and runtimes.engine_runs(job.engine, q)]
    return [f"--offload {m}" for m in modes if m != job.offload_mode] + [f"--quant {q}" for q in lighter[:1]]


def images(pipeline: Pipeline, workload: Workload, gpu: GPU, catalog: Catalog, count: int) -> Fit | Rejection:
    """A diffusers pipeline runs on one GPU; ``count`` GPUs are that many independent pipelines sharing the load."""
    from gpuwise.estimate.image.pipeline import image_estimate

    job = workload.job
    assert isinstance(job, ImageJob)
    result = image_estimate(pipeline, job, gpu, catalog)
    if not result.memory.fits:
        too_large = too_big(result.memory)
        untried = lighter_settings(job)
        hint = f"; {' or '.join(untried)} needs less" if untried else ""
        return Rejection("memory", too_large.reason + hint, too_large.gap)
    assert result.seconds_per_call is not None
    if workload.tpot_p99_ms is not None:
        return Rejection("slo", "--tpot-p99-ms bounds generated tokens; an image pipeline answers at once: use "
                                "--e2e-p99-ms")
    slo_s = whole_answer_s(workload)
    rate, p99 = batch_capacity(seconds_per_batch=result.seconds_per_call, batch=job.batch, slo_s=slo_s)
    if rate <= 0 and slo_s is not None:
        idle = p99(0.0)
        return Rejection("slo", f"{idle:,.1f} s per call of {job.batch} image(s) > SLO {slo_s:,.1f} s",
                         idle / slo_s)
    total = rate * count
    if workload.qps is not None and total < workload.qps:
        return Rejection("slo", f"{count} GPU(s) make {total:,.3f} images/s < {workload.qps:,.3f} needed",
                         workload.qps / max(total, 1e-9))
    latency = p99(workload.qps / count if workload.qps is not None else rate)
    shared = {name: flag for name, (_info, flag) in job_flag_fields("estimate").items()}
    command = command_line(job, command="estimate", head=(workload.model, "--gpu", gpu.id), borrowed=shared)
    notes = result.warnings
    if result.working_set_bytes is not None and result.working_set_bytes < result.memory.per_gpu_bytes:
        notes += (f"{job.runtime.name} keeps every component loaded when they fit "
                  f"({result.memory.per_gpu_bytes / 2**30:,.1f} GiB here); it needs "
                  f"{result.working_set_bytes / 2**30:,.1f} GiB, one component at a time, and unloads the others "
                  "when memory is short",)
    return Fit(per_gpu_bytes=result.working_set_bytes or result.memory.per_gpu_bytes, qps_capacity=total,
               p99_ms=latency * 1e3 if math.isfinite(latency) else None, seconds_per_image=result.seconds_per_image,
               notes=notes, commands=(command,))
