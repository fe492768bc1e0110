"""Serving answers with their energy per output token (estimate/cost/energy.py): each simulated load point of a
serve-sim at the engine's busy fraction there, and one user on a layer split, whose cards take turns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gpuwise.catalog import GPU
from gpuwise.estimate.cost.energy import cards_energy, energy_at
from gpuwise.estimate.cost.tco import Usage, host_w
from gpuwise.estimate.serving.layer_split import LayerSplit
from gpuwise.estimate.serving.simulate import LoadResult, ServingReport


def _at_load(result: LoadResult | None, gpu: GPU, gpus: int, usage: Usage) -> LoadResult | None:
    if result is None or result.busy_fraction is None:
        return result
    found = energy_at(gpu, gpus, busy_fraction=result.busy_fraction, prefill_share=result.prefill_share or 0.0,
                      output_tokens_per_s=result.throughput_tokens_per_s, usage=usage)
    return replace(result, energy=found)


def serving_energy(report: ServingReport, gpu: GPU, gpus: int, usage: Usage) -> ServingReport:
    """The report with each load point's energy: ``gpus`` cards of ``gpu`` (all replicas) at the point's busy fraction
    and prefill share (a disaggregated run's: its pools' mean, exact since a card's draw is linear in both), making
    its output tokens."""
    return replace(report, at_rate=_at_load(report.at_rate, gpu, gpus, usage),
                   at_max=_at_load(report.at_max, gpu, gpus, usage),
                   at_concurrency=_at_load(report.at_concurrency, gpu, gpus, usage))


def split_energy(split: LayerSplit, gpus: Sequence[GPU], output_len: int, usage: Usage) -> LayerSplit:
    """One user's request on a layer split: TTFT + (output - 1) x TPOT end to end, each card busy for its own part of
    the prefill and of every decode step (the rest of the time the other cards run its token), in one machine whose
    host the most demanding card's rule sizes (tco.host_w)."""
    steps = max(output_len - 1, 0)
    e2e_ms = split.ttft_ms + steps * split.tpot_ms
    if e2e_ms <= 0:
        return split
    cards = []
    for gpu, card in zip(gpus, split.cards, strict=True):
        busy_ms = card.ttft_ms + steps * card.tpot_ms
        cards.append((gpu, busy_ms / e2e_ms, card.ttft_ms / busy_ms if busy_ms > 0 else 0.0))
    found = cards_energy(cards, host_w=max(host_w(g, len(gpus)) for g in gpus),
                         output_tokens_per_s=max(output_len, 1) / e2e_ms * 1e3, usage=usage)
    return replace(split, energy=found)
