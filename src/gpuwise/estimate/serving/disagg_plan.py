"""Planning disaggregated serving (``recommend --disagg auto``): how to split R replicas into X prefill and Y decode
ones, and the request rate the split sustains -- the closed form beside ``disagg.closed_loop``'s simulation, as
``capacity.py`` is beside ``simulate.py``.

With prompts and decoding on separate replicas (estimate/serving/disagg.py), at a total rate T:
    P   one prompt's prefill;  S(B)  a decode step of B sequences;  O  output tokens;  K  the KV cache's move
    prefill replica (rate T / X): stable while (T / X) P < 1; P99 TTFT = P (the prompt in flight) +
                                  P x (1 + q99(Poisson((T / X) P)))  -- the same queue as capacity.latency_at's
    decode replica:               B = (T / Y) (O - 1) S(B) sequences at once (Little's law), at most the batch
                                  limit; no prompt ever stalls their steps
    P99 end-to-end:               P99 TTFT + K + (O - 1) S(B)
    P99 TPOT:                     S(B), the decode replica's step (no prompt stalls it)
The split balances the pools' saturation rates, X / P against Y B_max / ((O - 1) S(B_max)), rounded both ways.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from gpuwise.estimate import constants as C
from gpuwise.estimate.serving.capacity import UNSTABLE, Replica, largest_rate, poisson_quantile, time_in_system
from gpuwise.estimate.serving.disagg import Pools
from gpuwise.workload.jobs.slos import Slos


@dataclass(frozen=True)
class PlannedSplit:
    """The split of a replica count into pools and what it sustains."""

    pools: Pools
    rate_qps: float  # within the SLOs, or the planning utilisation of the stable maximum when there are none
    p99s_ms: Callable[[float], dict[str, float]]  # the P99s by SLO name at a total rate (inf where unstable)
    binding: str | None = None  # the SLO with the least headroom at rate_qps


def _latencies(rep: Replica, split: Pools, kv_s: float, total: float) -> dict[str, float]:
    """The P99s by SLO name in ms at ``total`` requests/s over the two pools; inf where unstable."""
    first = rep.prefill(rep.job.input_len)
    busy = total / split.prefill * first
    if busy >= 1:
        return dict(UNSTABLE)
    in_flight = first if busy > 0.01 else 0.0  # an idle prefill replica has no prompt to wait for
    ttft = in_flight + first * (1 + poisson_quantile(busy))
    decode_s = time_in_system(rep, total / split.decode)  # no prompt stalls a decode replica's steps
    if decode_s is None:
        return dict(UNSTABLE)
    steps = max(rep.job.output_len - 1, 0)
    return {"ttft": ttft * 1e3, "tpot": decode_s / steps * 1e3 if steps else 0.0, "e2e": (ttft + kv_s + decode_s) * 1e3}


def _splits(rep: Replica, replicas: int) -> list[Pools]:
    """The splits to try: the one whose pools saturate at the same rate, rounded down and up (each pool >= 1)."""
    first = rep.prefill(rep.job.input_len)
    steps = max(rep.job.output_len - 1, 1)
    limit = rep.batch_limit
    prefill_rate, decode_rate = 1 / first, limit / (steps * rep.step_at(limit))
    ideal = replicas * decode_rate / (prefill_rate + decode_rate)
    chosen = {min(max(x, 1), replicas - 1) for x in (math.floor(ideal), math.ceil(ideal))}
    return [Pools(x, replicas - x) for x in sorted(chosen)]


def plan_split(rep: Replica, replicas: int, *, kv_s: float, slos: Slos = Slos()) -> PlannedSplit | None:
    """The best split of ``replicas`` (>= 2) replicas of ``rep`` into prefill and decode pools; None when no split
    is stable, or none meets every SLO even idle."""
    best: PlannedSplit | None = None
    for split in _splits(rep, replicas):
        def p99s(total: float, split: Pools = split) -> dict[str, float]:
            return _latencies(rep, split, kv_s, total)

        rate = _rate(p99s, slos)
        if rate > 0 and (best is None or rate > best.rate_qps):
            best = PlannedSplit(split, rate, p99s, slos.binding(p99s(rate)))
    return best


def _rate(p99s: Callable[[float], dict[str, float]], slos: Slos) -> float:
    """The total rate to plan with: within every SLO, or the planning share of the stable maximum."""
    if not slos:
        return largest_rate(lambda r: math.isfinite(p99s(r)["e2e"])) * C.SERVING_PLANNING_UTILISATION.value
    if not slos.met(p99s(0.0)):
        return 0.0
    return largest_rate(lambda r: slos.met(p99s(r)))
