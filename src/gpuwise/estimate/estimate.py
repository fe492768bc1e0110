"""One estimate: a workload on a GPU type, with its memory breakdown, assumptions and warnings.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuwise.catalog import GPU, Catalog
from gpuwise.estimate.calibration import Calibration
from gpuwise.estimate.compat import describe, unmet
from gpuwise.estimate.cost.energy import Energy, estimate_energy
from gpuwise.estimate.cost.price import CostFigures, costs
from gpuwise.estimate.cost.tco import Usage
from gpuwise.estimate.memory.breakdown import MemoryEstimate, for_card
from gpuwise.estimate.memory.inference import inference_memory
from gpuwise.estimate.memory.training import training_memory
from gpuwise.estimate.plan import InferPlan, TrainPlan, resolve
from gpuwise.estimate.speed.inference import InferPerf, infer_perf
from gpuwise.estimate.speed.training import TrainPerf, train_perf
from gpuwise.workload.jobs.job import Job, TrainJob
from gpuwise.workload.model.architecture import Architecture


@dataclass(frozen=True)
class Estimate:
    model: Architecture
    gpu: GPU
    job: Job
    memory: MemoryEstimate
    warnings: tuple[str, ...]
    plan: TrainPlan | InferPlan  # the job as resolved on the card: what every figure was computed from
    perf: TrainPerf | InferPerf | None = None
    cost: CostFigures | None = None
    energy: Energy | None = None  # inference: joules per output token at the batch's load (estimate/cost/energy.py)

    @property
    def task(self) -> str:
        return self.job.task


def compatibility_warnings(plan: TrainPlan | InferPlan) -> tuple[str, ...]:
    """What the hardware or stack cannot do as asked (the compatibility table, estimate/compat.py), and limits of the
    model itself; the estimate still runs."""
    arch, job, gpu = plan.arch, plan.job, plan.gpu
    notes = [describe(r, gpu) for r in unmet(job, gpu, plan.engine if isinstance(plan, InferPlan) else None)]
    length = job.seq if isinstance(job, TrainJob) else job.context
    if arch.max_positions and length > arch.max_positions:
        notes.append(f"sequence {length} exceeds {arch.name}'s {arch.max_positions} positions")
    if job.count > 1 and not gpu.p2p:
        notes.append(f"{gpu.id} has no GPU peer-to-peer: multi-GPU traffic goes through host memory")
    if gpu.unified_memory is not None:
        notes.append(f"unified memory: the GPU may use {gpu.usable_memory_bytes / 2**30:,.0f} of "
                     f"{gpu.memory_bytes / 2**30:,.0f} GiB by default; to raise it: {gpu.unified_memory.raise_with} "
                     f"(`gpuwise catalog show {gpu.id}` says why)")
    return tuple(notes)


def estimate(arch: Architecture, job: Job, gpu: GPU, catalog: Catalog | None = None, *,
             calibration: Calibration | None = None, usage: Usage | None = None) -> Estimate:
    """Memory of ``job`` on ``job.count`` GPUs of type ``gpu``; with ``catalog`` (for the links) also speed, and for
    inference the energy per output token at ``usage``'s electricity price and PUE (default: ``Usage()``'s)."""
    plan = resolve(arch, job, gpu, calibration)
    job = plan.job
    memory = for_card(training_memory(plan) if isinstance(plan, TrainPlan) else inference_memory(plan), gpu)
    perf: TrainPerf | InferPerf | None = None
    cost: CostFigures | None = None
    if catalog is not None:
        paged = float(memory.details.get("paged_out_bytes", 0.0))
        perf = (train_perf(plan, catalog, paged_out_bytes=paged) if isinstance(plan, TrainPlan)
                else replace(infer_perf(plan, catalog),
                             replicas=plan.job.count // plan.job.replica_gpus))
    if perf is not None and calibration is not None and calibration.source:
        calibrated = f"calibrated by {calibration.source}: {calibration.replaced}"
        perf = replace(perf, assumptions=(*perf.assumptions, calibrated))
    cost = costs(gpu, job, perf, catalog) if catalog is not None else None
    energy = estimate_energy(gpu, job, perf, usage or Usage(), cost.usd_per_million_tokens if cost else None)
    return Estimate(model=arch, gpu=gpu, job=job, memory=memory, perf=perf, cost=cost, plan=plan, energy=energy,
                    warnings=memory.warnings + compatibility_warnings(plan) + _feeding(arch, job, perf))


def _feeding(arch: Architecture, job: Job, perf: TrainPerf | InferPerf | None) -> tuple[str, ...]:
    """A vision model fast enough to outrun the CPU's JPEG decoding (estimate/speed/dataloader.py)."""
    if arch.kind not in ("cnn", "vision") or perf is None or not perf.samples_per_s:
        return ()
    from gpuwise.estimate.speed.dataloader import dataloader_warning
    from gpuwise.workload.model.convnets import image_side

    gpus = job.count if isinstance(job, TrainJob) else job.replica_gpus
    side = job.image_size or (image_side(arch.config, None) if arch.kind == "cnn" else
                              int(arch.config.get("image_size", 224)))
    warning = dataloader_warning(perf.samples_per_s / gpus, side)
    return (warning,) if warning else ()
