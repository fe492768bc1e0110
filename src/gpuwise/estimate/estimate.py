"""One estimate: a workload on a GPU type, with its memory breakdown, assumptions and warnings."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.catalog import GPU, Catalog
from gpuwise.errors import ConfigError, NotEstimable
from gpuwise.estimate.memory import MemoryEstimate, training_memory
from gpuwise.estimate.perf import InferPerf, TrainPerf, infer_perf, train_perf
from gpuwise.estimate.roofline import Calibration
from gpuwise.estimate.serving_memory import inference_memory, weight_bytes
from gpuwise.workload.architecture import Architecture
from gpuwise.workload.job import InferJob, TrainJob

Job = TrainJob | InferJob


@dataclass(frozen=True)
class CostFigures:
    """What the job costs by the hour: the cheapest offer (any tier) for this many GPUs, else owning them."""

    usd_per_hour: float
    basis: str
    usd_per_job: float | None = None  # training: one --tokens epoch
    usd_per_million_tokens: float | None = None  # inference: output tokens of all replicas at the batch's throughput


@dataclass(frozen=True)
class Estimate:
    model: Architecture
    gpu: GPU
    job: Job
    memory: MemoryEstimate
    warnings: tuple[str, ...]
    perf: TrainPerf | InferPerf | None = None
    cost: CostFigures | None = None

    @property
    def task(self) -> str:
        return "train" if isinstance(self.job, TrainJob) else "infer"


def _require_modelled(arch: Architecture) -> None:
    if arch.kind == "unet":
        weights_gb = weight_bytes(arch, "fp16") / 1e9
        raise NotEstimable(
            f"{arch.name} is a UNET model: gpuwise models transformers and ResNets only "
            f"({arch.total_params:,} parameters, {weights_gb:.2f} GB of fp16 weights)"
        )


def tp_divides(arch: Architecture, tp: int) -> bool:
    """Tensor parallelism splits the attention heads (and KV heads, replicated when fewer) evenly over the GPUs."""
    return tp == 1 or not arch.heads or arch.heads % tp == 0


def require_tp(arch: Architecture, tp: int) -> None:
    if not tp_divides(arch, tp):
        fits = [t for t in (1, 2, 4, 8, 16) if tp_divides(arch, t)]
        raise ConfigError(f"--tp {tp} does not divide {arch.name}'s {arch.heads} attention heads; "
                          f"use one of {', '.join(map(str, fits))}")


def compatibility_warnings(arch: Architecture, job: Job, gpu: GPU) -> tuple[str, ...]:
    """What the hardware or stack cannot do as asked; the estimate still runs."""
    notes: list[str] = []
    if isinstance(job, TrainJob):
        if job.precision in ("bf16", "pure-bf16") and not (gpu.software.bf16 and gpu.bf16_dense_tflops):
            notes.append(f"{gpu.id} has no BF16 tensor math; use --precision fp16")
        if job.precision == "fp8" and not gpu.software.fp8:
            notes.append(f"{gpu.id} has no FP8 tensor cores; --precision fp8 needs Ada, Hopper or newer")
        if job.method == "qlora" and not gpu.software.bitsandbytes:
            notes.append(f"QLoRA needs bitsandbytes, which has no {gpu.software.stack} build for {gpu.id}")
        if job.optimizer in ("adamw-8bit", "paged-adamw-8bit") and not gpu.software.bitsandbytes:
            notes.append(f"8-bit optimizers need bitsandbytes, which has no {gpu.software.stack} build for {gpu.id}")
        length = job.seq
    else:
        if job.quant == "fp8" and not gpu.software.fp8:
            notes.append(f"{gpu.id} has no FP8 support; fp8 weights would be upcast (or rejected by the engine)")
        length = job.context
    if job.flash_attn and not gpu.software.flash_attention_2:
        notes.append(f"FlashAttention-2 does not support {gpu.id}; PyTorch SDPA (memory-efficient) is the fallback")
    if arch.max_positions and length > arch.max_positions:
        notes.append(f"sequence {length} exceeds {arch.name}'s {arch.max_positions} positions")
    if job.count > 1 and not gpu.p2p and (job.tp > 1 or job.count > 1):
        notes.append(f"{gpu.id} has no GPU peer-to-peer: multi-GPU traffic goes through host memory")
    return tuple(notes)


def estimate(arch: Architecture, job: Job, gpu: GPU, catalog: Catalog | None = None, *,
             calibration: Calibration | None = None) -> Estimate:
    """Memory of ``job`` on ``job.count`` GPUs of type ``gpu``; with ``catalog`` (for the links) also speed."""
    _require_modelled(arch)
    require_tp(arch, job.tp)
    if isinstance(job, TrainJob):
        memory = training_memory(arch, job, capacity_bytes=gpu.memory_bytes)
    else:
        memory = inference_memory(arch, job, capacity_bytes=gpu.memory_bytes)
    perf: TrainPerf | InferPerf | None = None
    cost: CostFigures | None = None
    if catalog is not None:
        perf = (train_perf(arch, job, gpu, catalog, calibration=calibration) if isinstance(job, TrainJob)
                else infer_perf(arch, job, gpu, catalog, calibration=calibration))
    cost = costs(gpu, job, perf, catalog) if catalog is not None else None
    return Estimate(model=arch, gpu=gpu, job=job, memory=memory,
                    warnings=memory.warnings + compatibility_warnings(arch, job, gpu), perf=perf, cost=cost)


def costs(gpu: GPU, job: Job, perf: TrainPerf | InferPerf | None, catalog: Catalog) -> CostFigures | None:
    """Hourly price (cheapest whole-instance offer, else owning at 8 h/day for 3 years) and per-job figures."""
    from gpuwise.estimate import cost as tco

    offers = [o for o in catalog.offers_for(gpu.id) if job.count % o.gpus == 0]
    if offers:
        best = offers[0]
        per_hour = best.usd_per_gpu_hour * job.count
        basis = f"rent {best.provider} {best.instance} ({best.as_of}, {best.tier}), the cheapest offer"
    elif gpu.price is not None and (gpu.price.street_usd or gpu.price.msrp_usd):
        usage = tco.Usage()
        buy = tco.buy_cost(gpu, job.count, gpu.price.street_usd or gpu.price.msrp_usd or 0.0, usage)
        per_hour = tco.owned_usd_per_hour(buy, usage)
        basis = "owned: 3-year TCO spread over 8 h/day"
    else:
        return None
    per_job = per_million = None
    if isinstance(perf, TrainPerf) and perf.epoch_time_s is not None:
        per_job = per_hour * perf.epoch_time_s / 3600
    if isinstance(perf, InferPerf) and perf.output_tokens_per_s:
        replicas = job.count // job.tp  # perf is one replica's; every replica serves the same batch in parallel
        per_million = per_hour / (perf.output_tokens_per_s * replicas * 3600) * 1e6
    return CostFigures(per_hour, basis, per_job, per_million)
