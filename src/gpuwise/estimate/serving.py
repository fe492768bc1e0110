"""Latency under load: a discrete-event simulation of continuous batching (Orca/vLLM-style iteration scheduling).

Requests arrive as a Poisson process at ``qps``; input and output lengths are fixed or exponential around the
job's values. Each engine iteration admits waiting requests while the KV cache has room (capacity from the
memory model) and the batch limit allows, runs their prefill together with one decode step of the running
batch, and retires finished sequences. Step times come from the roofline (``perf.decode_step_s`` and
``perf.prefill_s``). The same seed gives the same answer.

Degenerate check: with a batch limit of 1, exponential output lengths and negligible prefill the system is an
M/M/1 queue, whose mean wait is rho / (mu - lambda) (tested).
"""

from __future__ import annotations

import bisect
import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpuwise import budget
from gpuwise.errors import ConfigError


@dataclass(frozen=True)
class Request:
    arrival_s: float
    input_len: int
    output_len: int


@dataclass(frozen=True)
class LoadResult:
    qps: float
    requests: int
    ttft_ms: tuple[float, float, float]  # P50, P90, P99
    e2e_ms: tuple[float, float, float]
    mean_queue_ms: float
    mean_batch: float
    throughput_tokens_per_s: float
    saturated: bool  # the queue kept growing: the offered load exceeds capacity

    @property
    def steady(self) -> bool:
        """Long enough to stand for steady state: at least STEADY_FACTOR x as many requests as are in flight at once
        (Little's law: a run of few more requests than the batch holds is one burst, filling and draining)."""
        return self.requests >= STEADY_FACTOR * max(self.mean_batch, 1.0)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = q * (len(ordered) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def poisson_requests(qps: float, count: int, input_len: int, output_len: int, *, seed: int,
                     exponential_lengths: bool = False) -> list[Request]:
    if qps <= 0:
        raise ConfigError(f"--qps must be > 0, got {qps}")
    rng = random.Random(seed)
    t = 0.0
    out = []
    for _ in range(count):
        t += rng.expovariate(qps)
        n_out = max(1, round(rng.expovariate(1 / output_len))) if exponential_lengths else output_len
        n_in = max(1, round(rng.expovariate(1 / input_len))) if exponential_lengths else input_len
        out.append(Request(t, n_in, n_out))
    return out


STEADY_FACTOR = 4.0

StepTime = Callable[[int, float], float]  # (batch, mean context) -> seconds of one decode step
PrefillTime = Callable[[int], float]  # (prompt tokens) -> seconds


def simulate(requests: Sequence[Request], *, decode_step: StepTime, prefill: PrefillTime,
             max_batch: int, kv_capacity_tokens: float) -> LoadResult:
    """Run the scheduler over ``requests`` (sorted by arrival); measures TTFT, end-to-end latency, queueing."""
    waiting: deque[int] = deque()
    running: list[tuple[int, int]] = []  # (request index, tokens generated)
    first_token = [math.nan] * len(requests)
    finished = [math.nan] * len(requests)
    started = [math.nan] * len(requests)
    clock, next_arrival, batches, steps, generated = 0.0, 0, 0, 0, 0
    while next_arrival < len(requests) or waiting or running:
        if steps % 4096 == 0:
            budget.checkpoint()
        if not waiting and not running:
            clock = max(clock, requests[next_arrival].arrival_s)
        while next_arrival < len(requests) and requests[next_arrival].arrival_s <= clock:
            waiting.append(next_arrival)
            next_arrival += 1
        used = sum(requests[i].input_len + n for i, n in running)
        admitted: list[int] = []
        while waiting and len(running) + len(admitted) < max_batch:
            i = waiting[0]
            need = requests[i].input_len + requests[i].output_len
            if used + need > kv_capacity_tokens and (running or admitted):
                break
            waiting.popleft()
            admitted.append(i)
            used += need
        step = 0.0
        if admitted:
            step += prefill(sum(requests[i].input_len for i in admitted))
            for i in admitted:
                started[i] = clock
        if running:
            context = sum(requests[i].input_len + n for i, n in running) / len(running)
            step += decode_step(len(running), context)
        if not admitted and not running:
            continue
        clock += step
        steps += 1
        batches += len(running)
        still: list[tuple[int, int]] = []
        for i, n in running:
            generated += 1
            if n + 1 >= requests[i].output_len:
                finished[i] = clock
            else:
                still.append((i, n + 1))
        for i in admitted:  # the prefill yields each admitted request's first token
            first_token[i] = clock
            generated += 1
            if requests[i].output_len <= 1:
                finished[i] = clock
            else:
                still.append((i, 1))
        running = still
    return _summarise(requests, first_token, finished, started, clock, batches, steps, generated)


def _summarise(requests: Sequence[Request], first: list[float], done: list[float], started: list[float],
               clock: float, batches: int, steps: int, generated: int) -> LoadResult:
    warm = len(requests) // 10  # drop the first 10% as warm-up
    ttft = [(first[i] - r.arrival_s) * 1e3 for i, r in enumerate(requests) if i >= warm]
    e2e = [(done[i] - r.arrival_s) * 1e3 for i, r in enumerate(requests) if i >= warm]
    queue = [(started[i] - r.arrival_s) * 1e3 for i, r in enumerate(requests) if i >= warm]
    span = clock - requests[0].arrival_s if requests else 1.0
    offered = len(requests) / max(requests[-1].arrival_s, 1e-9) if requests else 0.0
    saturated = _growing(queue, [d - q for d, q in zip(e2e, queue, strict=True)])
    return LoadResult(
        qps=offered, requests=len(requests),
        ttft_ms=(percentile(ttft, 0.5), percentile(ttft, 0.9), percentile(ttft, 0.99)),
        e2e_ms=(percentile(e2e, 0.5), percentile(e2e, 0.9), percentile(e2e, 0.99)),
        mean_queue_ms=sum(queue) / len(queue) if queue else 0.0,
        mean_batch=batches / steps if steps else 0.0,
        throughput_tokens_per_s=generated / span if span > 0 else 0.0, saturated=saturated,
    )


def _growing(queue_ms: list[float], service_ms: list[float]) -> bool:
    """The queue kept growing: under an offered load above capacity the wait for admission rises with time, so the
    last quarter waits much longer than the second, and longer than a request takes once admitted; a stable
    queue's wait stays level (about one engine iteration)."""
    if len(queue_ms) < 8:
        return False
    quarter = len(queue_ms) // 4
    second, last = percentile(queue_ms[quarter:2 * quarter], 0.5), percentile(queue_ms[3 * quarter:], 0.5)
    return last > 1.5 * max(second, 1.0) and last > percentile(service_ms, 0.5)


def highest_rate(run: Callable[[float], LoadResult], *, p99_ms: float, key: str = "e2e",
                 low: float = 0.01, high: float = 1000.0, iterations: int = 14) -> tuple[float, LoadResult | None]:
    """Largest QPS whose P99 (``key``: "e2e" or "ttft") meets the SLO, by bisection on a log scale."""
    def ok(result: LoadResult) -> bool:
        p99 = result.e2e_ms[2] if key == "e2e" else result.ttft_ms[2]
        return p99 <= p99_ms and not result.saturated and result.steady

    best: tuple[float, LoadResult | None] = (0.0, None)
    first = run(low)
    if not ok(first):
        return best
    best = (low, first)
    for _ in range(3):  # the bracket came from the closed form: widen it if the simulation does better
        top = run(high)
        if not ok(top):
            break
        low, high, best = high, high * 8, (high, top)
    lo, hi = math.log(low), math.log(high)
    for _ in range(iterations):
        mid = (lo + hi) / 2
        result = run(math.exp(mid))
        if ok(result):
            lo, best = mid, (math.exp(mid), result)
        else:
            hi = mid
    return best


def step_table(step: StepTime, max_batch: int, context: float) -> StepTime:
    """Decode step times on a grid of batch sizes (powers of two) and contexts, each computed once when first
    needed, linear between grid points (the roofline's weight, KV and activation traffic is linear in both)."""
    grid = sorted({1, max_batch, *[2 ** k for k in range(int(math.log2(max(max_batch, 1))) + 1)]})
    contexts = [context * f for f in (0.25, 0.5, 1.0, 2.0, 4.0)]
    table: dict[tuple[int, float], float] = {}

    def at(batch: int, ctx: float) -> float:
        if (batch, ctx) not in table:
            table[(batch, ctx)] = step(batch, ctx)
        return table[(batch, ctx)]

    def lookup(batch: float, ctx: float) -> float:
        (b0, b1, wb), (c0, c1, wc) = _bracket(grid, batch), _bracket(contexts, ctx)
        low = at(int(b0), c0) * (1 - wc) + at(int(b0), c1) * wc
        high = at(int(b1), c0) * (1 - wc) + at(int(b1), c1) * wc
        return low * (1 - wb) + high * wb

    return lookup


def _bracket(points: Sequence[float], value: float) -> tuple[float, float, float]:
    """The grid points around ``value`` and its weight towards the upper one (clamped to the grid)."""
    i = min(max(bisect.bisect_left(points, value), 1), len(points) - 1)
    low, high = points[i - 1], points[i]
    if len(points) == 1 or high == low:
        return high, high, 0.0
    return low, high, min(max((value - low) / (high - low), 0.0), 1.0)



@dataclass(frozen=True)
class ServingReport:
    at_rate: LoadResult
    slo_p99_ms: float | None
    slo_key: str
    max_qps: float | None
    at_max: LoadResult | None
    max_batch: int
    kv_capacity_tokens: float
    planned_qps: float  # the closed-form capacity the recommender plans with (estimate/serving_capacity.py)
    planned_p99_ms: float | None  # the closed form's P99 at the simulated rate (None: unstable there)
    replicas: int = 1  # --count / --tp replicas behind a load balancer; rates and throughputs are their sum
