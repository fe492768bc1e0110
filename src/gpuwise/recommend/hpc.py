"""How a GPU type at a count does on a scientific-computing workload, and which cards it refuses outright.

Refused (the card itself): an application with no GPU port for the card's software stack, and one whose time is
dense FP64 arithmetic (HPL, VASP: the profile's ``fp64_dominant``) on a card whose FP64 is cut down -- the seeds'
advice, the VASP wiki's ("gaming GPUs ... do not offer fast double precision"), and a 20-60x slower solve. Every
other shortfall (no ECC; cut FP64 in a bandwidth-bound solver or a custom code, where the estimate shows what the
arithmetic costs) stays an option, with a note that says so.
"""

from __future__ import annotations

from gpuwise.catalog import GPU, Catalog
from gpuwise.estimate.hpc.estimate import HpcEstimate, hpc_estimate
from gpuwise.estimate.hpc.rates import fp64_cut, fp64_ratio_text
from gpuwise.recommend.fit import Fit, Rejection, fullness, too_big
from gpuwise.recommend.machines import Machines
from gpuwise.workload.hpc.apps import apps
from gpuwise.workload.jobs.hpc import HpcJob


def hpc_card_rejection(job: HpcJob, gpu: GPU) -> Rejection | None:
    assert job.app is not None
    app = apps()[job.app]
    if gpu.software.stack not in app.stacks:
        return Rejection("stack", f"{app.name} has no GPU port for {gpu.software.stack} ({app.stacks_basis})")
    if app.fp64_dominant and fp64_cut(gpu):
        return Rejection("feature", f"cut-down FP64 ({fp64_ratio_text(gpu)}): {app.id} is FP64 arithmetic; a card "
                                    "with full-rate FP64 (A100, H100, H200, B200, MI200/MI300) runs it 20-60x faster")
    return None


def talks_between_gpus(job: object) -> bool:
    """A run of a parallel application spans GPUs (several machines then need a network); independent runs do not."""
    return isinstance(job, HpcJob) and job.app is not None and apps()[job.app].multi_gpu.mode == "parallel"


def evaluate_hpc(job: HpcJob, deadline_hours: float | None, gpu: GPU, catalog: Catalog, count: int,
                 machines: Machines) -> Fit | Rejection:
    """``count`` cards on the job: its memory, hours per job (and at the slow end of the measured band), speed."""
    est = hpc_estimate(job.model_copy(update={"count": count}), gpu, catalog)
    if est.perf is None:
        if not est.memory.fits:
            return too_big(est.memory)
        return Rejection("feature", est.warnings[0] if est.warnings else f"{gpu.id} cannot run {est.app.id}")
    perf = est.perf
    if perf.gpus_per_run > machines.gpus_per_node and machines.nodes > 1 and machines.network is None:
        return Rejection("network", f"one run spans {perf.gpus_per_run} GPUs over machines of "
                                    f"{machines.gpus_per_node} with no network between them")
    high = _slow_end(est)
    if deadline_hours is not None and high > deadline_hours:
        return Rejection("deadline", f"takes up to {high:,.1f} h (expected {perf.job_hours:,.1f} h) > deadline "
                                     f"{deadline_hours:,.1f} h", high / deadline_hours)
    notes = (*est.warnings, *fullness(est.memory.per_gpu_bytes, est.memory.capacity_bytes))
    settings = {"app": est.app.id, "gpus_per_run": perf.gpus_per_run, "runs_at_once": perf.runs_at_once,
                "unit": est.app.unit, est.app.unit: round(perf.value, 4), "hours": round(perf.job_hours, 4)}
    return Fit(per_gpu_bytes=est.memory.per_gpu_bytes, job_hours=perf.job_hours, job_hours_high=high,
               notes=notes, settings=(settings,), hpc_value=perf.value, hpc_unit=perf.unit,
               work_per_s=perf.throughput)


def _slow_end(est: HpcEstimate) -> float:
    """Hours per job at the slow end of the app's measured band (what deadlines are held to)."""
    assert est.perf is not None
    band = est.calibration.band
    return est.perf.job_hours / min(band[0], 1.0) if band else est.perf.job_hours
