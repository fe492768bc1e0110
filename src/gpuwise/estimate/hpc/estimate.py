"""One scientific-computing estimate: memory per GPU, the application's own figure (ns/day, TFLOPS, GFLOPS, s per
iteration) with its measured band, time and cost per job, and what the card cannot do well for it (cut-down FP64,
no ECC, no port for its software stack)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuwise.catalog import GPU, Catalog
from gpuwise.estimate.cost.price import CostFigures, hourly_price
from gpuwise.estimate.hpc.model import (
    StepTime,
    gpus_per_run,
    host_link_bytes_per_s,
    hpc_memory,
    kernels_of,
    step_time,
    steps_per_run,
    value_of,
)
from gpuwise.estimate.hpc.rates import AppCalibration, calibration, fp64_cut, fp64_ratio_text, uses_fp64
from gpuwise.estimate.memory.breakdown import MemoryEstimate
from gpuwise.estimate.plan import HpcPlan, resolve
from gpuwise.workload.hpc.apps import HpcApp
from gpuwise.workload.jobs.hpc import HpcJob


@dataclass(frozen=True)
class HpcPerf:
    value: float  # the application's figure for one run (all its GPUs), in ``unit``
    unit: str
    band: tuple[float, float] | None  # the same figure at the ends of the measured error band
    step: StepTime  # one step (MD step, iteration, solve) of one run
    gpus_per_run: int
    runs_at_once: int
    rounds: int  # how many times the GPUs take a new set of runs
    job_hours: float  # every run of the job

    @property
    def higher_is_better(self) -> bool:
        return self.unit != "s/iteration"

    @property
    def throughput(self) -> float:
        """Work per second across the job's runs side by side, in the unit's sense (bigger is better)."""
        per_run = self.value if self.higher_is_better else 1.0 / self.value
        return per_run * self.runs_at_once


@dataclass(frozen=True)
class HpcEstimate:
    app: HpcApp
    gpu: GPU
    job: HpcJob  # with the profile's defaults filled in
    calibration: AppCalibration
    memory: MemoryEstimate
    perf: HpcPerf | None
    cost: CostFigures | None
    warnings: tuple[str, ...]
    assumptions: tuple[str, ...]
    plan: HpcPlan  # the job as resolved: the application's profile and its reference problem where left out

    @property
    def task(self) -> str:
        return "hpc"

    @property
    def fp64_dominant(self) -> bool:
        return self.app.fp64_dominant


def hpc_estimate(job: HpcJob, gpu: GPU, catalog: Catalog) -> HpcEstimate:
    """Memory and speed of ``job`` on ``job.count`` x ``gpu``."""
    plan = resolve(None, job, gpu)
    app, job = plan.app, plan.job
    cal = calibration(app, gpu)
    per_run = gpus_per_run(app, job, gpu)
    memory = hpc_memory(app, job, gpu, per_run)
    step = step_time(app, job, gpu, cal, gpus_per_run=per_run, host_bytes_per_s=host_link_bytes_per_s(gpu, catalog))
    perf = _perf(app, job, cal, step, per_run) if step is not None and memory.fits else None
    price = hourly_price(gpu, job.count, catalog)
    cost = None
    if price is not None:
        cost = CostFigures(price[0], price[1], usd_per_job=price[0] * perf.job_hours if perf is not None else None)
    estimate = HpcEstimate(app, gpu, job, cal, memory, perf, cost, (), (), plan)
    return HpcEstimate(app, gpu, job, cal, memory, perf, cost, _warnings(estimate, step), _assumptions(estimate), plan)


def _perf(app: HpcApp, job: HpcJob, cal: AppCalibration, step: StepTime, per_run: int) -> HpcPerf:
    at_once = max(1, min(job.runs, job.count // per_run))
    rounds = math.ceil(job.runs / at_once)
    value = value_of(app, job, step.seconds)
    band = None
    if cal.band is not None:
        low, high = min(cal.band[0], 1.0), max(cal.band[1], 1.0)
        band = (value * low, value * high) if app.unit != "s/iteration" else (value / high, value / low)
    hours = rounds * steps_per_run(app, job) * step.seconds / 3600
    return HpcPerf(value, app.unit, band, step, per_run, at_once, rounds, hours)


def _warnings(est: HpcEstimate, step: StepTime | None) -> tuple[str, ...]:
    app, gpu, job = est.app, est.gpu, est.job
    notes: list[str] = []
    if gpu.software.stack not in app.stacks:
        notes.append(f"{app.name} has no GPU port for {gpu.software.stack} ({app.stacks_basis}): it would run on the "
                     "CPU")
    if step is None:
        notes.append(f"{gpu.id} has {fp64_ratio_text(gpu)}: {app.id} needs FP64, so no speed is estimated")
    elif uses_fp64(app, kernels_of(app, job)) and fp64_cut(gpu):
        notes.append(_fp64_note(est, step))
    if app.caveat:
        notes.append(app.caveat)
    if app.ecc and not gpu.ecc:
        notes.append(f"no ECC memory on {gpu.id}: {app.ecc}")
    if not est.memory.fits:
        need = est.memory.per_gpu_bytes / 2**30
        how = ("it runs one simulation per GPU" if app.multi_gpu.mode == "independent" else
               "give more GPUs (--count) to split it")
        notes.append(f"one run needs {need:,.1f} GiB per GPU, more than {gpu.id}'s "
                     f"{est.memory.capacity_bytes / 2**30:,.0f} GiB: {how}")
    idle = job.count - (est.perf.gpus_per_run * est.perf.runs_at_once if est.perf else job.count)
    if idle > 0:
        notes.append(f"{idle} of {job.count} GPUs idle: {app.multi_gpu.note.split(';')[0]}; give --runs to use them")
    if est.perf is not None and est.perf.gpus_per_run > 1 and not gpu.p2p:
        notes.append(f"no GPU peer-to-peer on {gpu.id}: one run's GPUs exchange data through host memory, slower "
                     "than the measured scaling assumes")
    return tuple(notes)


def _fp64_note(est: HpcEstimate, step: StepTime) -> str:
    """The cut-down FP64 warning: what it costs this job now, and what it caps."""
    gpu, app = est.gpu, est.app
    share = step.compute_s / step.seconds if step.seconds else 0.0
    now = (f"{share:.0%} of this step waits on FP64 arithmetic" if share >= 0.1 else
           "this step is bandwidth-bound, so the cut costs little at this size, but every FP64-heavy part of the code "
           "(assembly, dense solves) runs at that rate")
    tail = "; recommend leaves such cards out for this job" if est.fp64_dominant else ""
    return (f"cut-down FP64: {gpu.id} runs FP64 at {fp64_ratio_text(gpu)}, where A100/H100-class cards run it at half "
            f"their FP32 rate; {app.id} computes in FP64 and {now}{tail}")


def _assumptions(est: HpcEstimate) -> tuple[str, ...]:
    app, job = est.app, est.job
    kernels = "; ".join(f"{k.name}: {k.precision}, {k.flops:,.4g} FLOP and {k.bytes:,.4g} B per item"
                        for k in kernels_of(app, job))
    lines = [f"precision: {app.precision}", f"work per step: {kernels}" if kernels else "",
             f"calibration: {est.calibration.basis}"]
    if est.perf is not None:
        p = est.perf
        lines.append(f"{p.gpus_per_run} GPU(s) per run, {p.runs_at_once} run(s) side by side, {p.rounds} round(s) "
                     f"for {job.runs} run(s); multi-GPU: {app.multi_gpu.note}")
    lines.append(est.memory.assumptions[0])
    return tuple(line for line in lines if line)
