"""Each simulated load point of a serve-sim with its energy per output token (estimate/cost/energy.py) at the engine's
busy fraction there."""

from __future__ import annotations

from dataclasses import replace

from gpuwise.catalog import GPU
from gpuwise.estimate.cost.energy import energy_at
from gpuwise.estimate.cost.tco import Usage
from gpuwise.estimate.serving.simulate import LoadResult, ServingReport


def _at_load(result: LoadResult | None, gpu: GPU, gpus: int, usage: Usage) -> LoadResult | None:
    if result is None or result.busy_fraction is None:
        return result
    found = energy_at(gpu, gpus, busy_fraction=result.busy_fraction, prefill_share=result.prefill_share or 0.0,
                      output_tokens_per_s=result.throughput_tokens_per_s, usage=usage)
    return replace(result, energy=found)


def serving_energy(report: ServingReport, gpu: GPU, gpus: int, usage: Usage) -> ServingReport:
    """The report with each load point's energy: ``gpus`` cards of ``gpu`` (all replicas) at the point's busy fraction
    and prefill share, making its output tokens; a disaggregated run, whose pools' busy times are not kept apart,
    has none."""
    return replace(report, at_rate=_at_load(report.at_rate, gpu, gpus, usage),
                   at_max=_at_load(report.at_max, gpu, gpus, usage),
                   at_concurrency=_at_load(report.at_concurrency, gpu, gpus, usage))
