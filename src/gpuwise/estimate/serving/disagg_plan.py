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
The split balances the pools' saturation rates, X / P against Y B_max / ((O - 1) S(B_max)), rounded both ways.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from gpuwise.estimate import constants as C
from gpuwise.estimate.serving.capacity import Replica, largest_rate, poisson_quantile, time_in_system
from gpuwise.estimate.serving.disagg import Pools


@dataclass(frozen=True)
class PlannedSplit:
    """The split of a replica count into pools and what it sustains."""

    pools: Pools
    rate_qps: float  # within the SLO, or the planning utilisation of the stable maximum when there is none
    p99_s: Callable[[float], float]  # P99 latency of the SLO's kind at a total rate (inf where unstable)


def _latencies(rep: Replica, split: Pools, kv_s: float, total: float) -> tuple[float, float] | None:
    """(P99 TTFT, P99 end-to-end) in seconds at ``total`` requests/s over the two pools; None where unstable."""
    first = rep.prefill(rep.job.input_len)
    busy = total / split.prefill * first
    if busy >= 1:
        return None
    in_flight = first if busy > 0.01 else 0.0  # an idle prefill replica has no prompt to wait for
    ttft = in_flight + first * (1 + poisson_quantile(busy))
    decode_s = time_in_system(rep, total / split.decode)  # no prompt stalls a decode replica's steps
    return None if decode_s is None else (ttft, ttft + kv_s + decode_s)


def _splits(rep: Replica, replicas: int) -> list[Pools]:
    """The splits to try: the one whose pools saturate at the same rate, rounded down and up (each pool >= 1)."""
    first = rep.prefill(rep.job.input_len)
    steps = max(rep.job.output_len - 1, 1)
    limit = rep.batch_limit
    prefill_rate, decode_rate = 1 / first, limit / (steps * rep.step_at(limit))
    ideal = replicas * decode_rate / (prefill_rate + decode_rate)
    chosen = {min(max(x, 1), replicas - 1) for x in (math.floor(ideal), math.ceil(ideal))}
    return [Pools(x, replicas - x) for x in sorted(chosen)]


def plan_split(rep: Replica, replicas: int, *, kv_s: float, slo_s: float | None, slo: str = "e2e"
               ) -> PlannedSplit | None:
    """The best split of ``replicas`` (>= 2) replicas of ``rep`` into prefill and decode pools; None when no split
    is stable, or none meets the SLO even idle."""
    best: PlannedSplit | None = None
    for split in _splits(rep, replicas):
        p99 = _p99(rep, split, kv_s, slo)
        rate = _rate(p99, slo_s)
        if rate > 0 and (best is None or rate > best.rate_qps):
            best = PlannedSplit(split, rate, p99)
    return best


def _rate(p99: Callable[[float], float], slo_s: float | None) -> float:
    """The total rate to plan with: within the SLO, or the planning share of the stable maximum."""
    if slo_s is None:
        return largest_rate(lambda r: math.isfinite(p99(r))) * C.SERVING_PLANNING_UTILISATION.value
    if p99(0.0) > slo_s:
        return 0.0
    return largest_rate(lambda r: p99(r) <= slo_s)


def _p99(rep: Replica, split: Pools, kv_s: float, slo: str) -> Callable[[float], float]:
    def p99(total: float) -> float:
        found = _latencies(rep, split, kv_s, total)
        if found is None:
            return math.inf
        return found[1] if slo == "e2e" else found[0]

    return p99
