"""How much a second, fourth or eighth GPU adds: the same training job over 1, 2, 4, 8 GPUs and nodes of 8."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise import budget
from gpuwise.catalog import GPU, Catalog
from gpuwise.estimate.estimate import estimate
from gpuwise.estimate.plan import TrainPlan
from gpuwise.estimate.speed.parallel import GPUS_PER_NODE
from gpuwise.estimate.speed.training import TrainPerf
from gpuwise.workload.jobs.job import TrainJob
from gpuwise.workload.model.architecture import Architecture

COUNTS = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class ScaleRow:
    count: int
    nodes: int
    per_gpu_gb: float
    fits: bool
    step_time_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    communication_share: float
    efficiency: float | None  # tokens/s per GPU relative to the smallest count that fits (None: unknown)
    epoch_time_s: float | None = None  # the job's --tokens at this count (None: no --tokens)
    runtime: str = ""  # the data-parallel runtime that runs this count (plain PyTorch on one GPU, FSDP2 on several)


def scaling(arch: Architecture, job: TrainJob, gpu: GPU, catalog: Catalog,
            counts: tuple[int, ...] = COUNTS) -> list[ScaleRow]:
    rows: list[ScaleRow] = []
    base: float | None = None
    for count in counts:
        if count % (job.tp * job.pp):
            continue
        nodes = max(1, -(-count // GPUS_PER_NODE))
        budget.checkpoint()
        # one GPU has nothing to shard or offload to; several use the job's ZeRO stage, else its framework's, else
        # ZeRO-3 (a stage left unset stays unset, so the plan fills the framework's for this count)
        cleared: dict[str, object] = {"zero": None, "offload": "none"} if count == 1 else {}
        shaped = job.updated(count=count, nodes=nodes, **cleared)
        result = estimate(arch, shaped, gpu, catalog)
        perf = result.perf
        assert isinstance(perf, TrainPerf)
        if base is None and result.memory.fits:
            base = perf.tokens_per_s_per_gpu
        rows.append(ScaleRow(
            count=count, nodes=nodes, per_gpu_gb=result.memory.per_gpu_bytes / 1e9, fits=result.memory.fits,
            step_time_s=perf.step_time_s, tokens_per_s=perf.tokens_per_s,
            tokens_per_s_per_gpu=perf.tokens_per_s_per_gpu,
            communication_share=perf.communication_s / perf.step_time_s,
            efficiency=perf.tokens_per_s_per_gpu / base if base else None, epoch_time_s=perf.epoch_time_s,
            runtime=result.plan.sharding.name if isinstance(result.plan, TrainPlan) else "",
        ))
    return rows
