"""One estimate: a workload on a GPU type, with its memory breakdown, assumptions and warnings."""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuwise.catalog import GPU, Catalog
from gpuwise.errors import ConfigError, NotEstimable
from gpuwise.estimate.compat import describe, unmet
from gpuwise.estimate.memory import MemoryEstimate, training_memory
from gpuwise.estimate.perf import InferPerf, TrainPerf, infer_perf, train_perf
from gpuwise.estimate.roofline import Calibration
from gpuwise.estimate.serving_memory import inference_memory, weight_bytes
from gpuwise.workload.architecture import Architecture
from gpuwise.workload.job import InferJob, Job, TrainJob
from gpuwise.workload.vision import for_encoder, for_images


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
        return self.job.task


def _require_modelled(arch: Architecture) -> None:
    if arch.kind == "unet":
        weights_gb = weight_bytes(arch, "fp16") / 1e9
        raise NotEstimable(
            f"{arch.name} is a UNET model: gpuwise models transformers and ResNets only "
            f"({arch.total_params:,} parameters, {weights_gb:.2f} GB of fp16 weights)"
        )


def require_training_knobs(arch: Architecture, job: TrainJob) -> None:
    """Refuse training flags that would change nothing for this model."""
    if job.decoder_seq is not None and arch.kind != "encoder-decoder":
        raise ConfigError(f"--decoder-seq is an encoder-decoder's label length (T5, BART); {arch.name} is not an "
                          "encoder-decoder: leave it out")
    if arch.kind == "cnn" and (job.activation_offload or job.framework is not None or job.packed or job.compile):
        raise ConfigError("--cpu-activations, --framework, --packed and --compile model transformer fine-tuning "
                          "stacks, not a CNN")
    if job.loss != "standard" and not arch.lm_head and "loss" not in job.framework_filled:
        raise ConfigError(f"--loss {job.loss} changes a language-model head's cross-entropy; {arch.name} has none")


def tp_divides(arch: Architecture, tp: int) -> bool:
    """Tensor parallelism splits the attention heads (and KV heads, replicated when fewer) evenly over the GPUs."""
    return tp == 1 or not arch.heads or arch.heads % tp == 0


def require_tp(arch: Architecture, tp: int) -> None:
    if not tp_divides(arch, tp):
        fits = [t for t in (1, 2, 4, 8, 16) if tp_divides(arch, t)]
        raise ConfigError(f"--tp {tp} does not divide {arch.name}'s {arch.heads} attention heads; "
                          f"use one of {', '.join(map(str, fits))}")


def compatibility_warnings(arch: Architecture, job: Job, gpu: GPU) -> tuple[str, ...]:
    """What the hardware or stack cannot do as asked (the compatibility table, estimate/compat.py), and limits of the
    model itself; the estimate still runs."""
    notes = [describe(r, gpu) for r in unmet(job, gpu)]
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
             calibration: Calibration | None = None) -> Estimate:
    """Memory of ``job`` on ``job.count`` GPUs of type ``gpu``; with ``catalog`` (for the links) also speed."""
    _require_modelled(arch)
    job = for_encoder(arch, for_images(arch, job))  # a ViT's sequence is its patches; an encoder generates nothing
    require_tp(arch, job.tp)
    if isinstance(job, TrainJob):
        require_training_knobs(arch, job)
    if isinstance(job, InferJob) and job.ep > 1 and not arch.experts:
        raise ConfigError(f"--ep {job.ep} spreads routed experts over GPUs; {arch.name} has none (use --tp)")
    if isinstance(job, InferJob):
        job = job.for_checkpoint(arch.checkpoint)  # the checkpoint's weight format unless --quant says otherwise
    if isinstance(job, TrainJob):
        memory = training_memory(arch, job, capacity_bytes=gpu.usable_memory_bytes)
    else:
        memory = inference_memory(arch, job, capacity_bytes=gpu.usable_memory_bytes, gpu_id=gpu.id)
    perf: TrainPerf | InferPerf | None = None
    cost: CostFigures | None = None
    if catalog is not None:
        perf = (train_perf(arch, job, gpu, catalog, calibration=calibration) if isinstance(job, TrainJob)
                else replace(infer_perf(arch, job, gpu, catalog, calibration=calibration),
                             replicas=job.count // job.replica_gpus))
    cost = costs(gpu, job, perf, catalog) if catalog is not None else None
    return Estimate(model=arch, gpu=gpu, job=job, memory=memory, perf=perf, cost=cost,
                    warnings=memory.warnings + compatibility_warnings(arch, job, gpu) + _feeding(arch, job, perf))


def _feeding(arch: Architecture, job: Job, perf: TrainPerf | InferPerf | None) -> tuple[str, ...]:
    """A vision model fast enough to outrun the CPU's JPEG decoding (estimate/dataloader.py)."""
    if arch.kind not in ("cnn", "vision") or perf is None or not perf.samples_per_s:
        return ()
    from gpuwise.estimate.cnn import image_side
    from gpuwise.estimate.dataloader import dataloader_warning

    gpus = job.count if isinstance(job, TrainJob) else job.replica_gpus
    side = job.image_size or (image_side(arch.config, None) if arch.kind == "cnn" else
                              int(arch.config.get("image_size", 224)))
    warning = dataloader_warning(perf.samples_per_s / gpus, side)
    return (warning,) if warning else ()


def hourly_price(gpu: GPU, count: int, catalog: Catalog) -> tuple[float, str] | None:
    """What ``count`` of the card cost by the hour: the cheapest whole-instance offer, else owning them at 8 h/day
    for 3 years (TCO spread over the hours); None when the catalog has neither."""
    from gpuwise.estimate import cost as tco

    offers = [o for o in catalog.offers_for(gpu.id) if count % o.gpus == 0]
    if offers:
        best = offers[0]
        return (best.usd_per_gpu_hour * count,
                f"rent {best.provider} {best.instance} ({best.as_of}, {best.tier}), the cheapest offer")
    if gpu.price is not None and (gpu.price.street_usd or gpu.price.msrp_usd):
        usage = tco.Usage()
        buy = tco.buy_cost(gpu, count, gpu.price.street_usd or gpu.price.msrp_usd or 0.0, usage,
                           host_usd=tco.host_cost(gpu, count, catalog.systems.values()))
        return tco.owned_usd_per_hour(buy, usage), "owned: 3-year TCO spread over 8 h/day"
    return None


def costs(gpu: GPU, job: Job, perf: TrainPerf | InferPerf | None, catalog: Catalog) -> CostFigures | None:
    """Hourly price (cheapest whole-instance offer, else owning at 8 h/day for 3 years) and per-job figures."""
    price = hourly_price(gpu, job.count, catalog)
    if price is None:
        return None
    per_hour, basis = price
    per_job = per_million = None
    if isinstance(perf, TrainPerf) and perf.epoch_time_s is not None:
        per_job = per_hour * perf.epoch_time_s / 3600
    if isinstance(perf, InferPerf) and perf.output_tokens_per_s:
        # perf is one replica's; every replica serves the same batch in parallel
        replicas = job.count // (job.replica_gpus if isinstance(job, InferJob) else 1)
        per_million = per_hour / (perf.output_tokens_per_s * replicas * 3600) * 1e6
    return CostFigures(per_hour, basis, per_job, per_million)
