"""What a job costs: the hourly price of its GPUs (the cheapest whole-instance offer, else owning them) and what
that makes per job and per million output tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.catalog import GPU, Catalog
from gpuwise.estimate.speed.inference import InferPerf
from gpuwise.estimate.speed.training import TrainPerf
from gpuwise.workload.jobs.job import InferJob, Job


@dataclass(frozen=True)
class CostFigures:
    """What the job costs by the hour: the cheapest offer (any tier but spot) for this many GPUs, else owning
    them."""

    usd_per_hour: float
    basis: str
    usd_per_job: float | None = None  # training: one --tokens epoch
    usd_per_million_tokens: float | None = None  # inference: output tokens of all replicas at the batch's throughput


def hourly_price(gpu: GPU, count: int, catalog: Catalog) -> tuple[float, str] | None:
    """What ``count`` of the card cost by the hour: the cheapest whole-instance offer, else owning them at 8 h/day
    for 3 years (TCO spread over the hours); None when the catalog has neither."""
    from gpuwise.estimate.cost import tco

    offers = [o for o in catalog.offers_for(gpu.id) if count % o.gpus == 0 and o.tier != "spot"]
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
