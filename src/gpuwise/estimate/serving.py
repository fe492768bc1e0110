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
    half = len(queue) // 2
    saturated = bool(queue) and percentile(queue[half:], 0.5) > 4 * max(percentile(queue[:half], 0.5), 1.0)
    return LoadResult(
        qps=offered, requests=len(requests),
        ttft_ms=(percentile(ttft, 0.5), percentile(ttft, 0.9), percentile(ttft, 0.99)),
        e2e_ms=(percentile(e2e, 0.5), percentile(e2e, 0.9), percentile(e2e, 0.99)),
        mean_queue_ms=sum(queue) / len(queue) if queue else 0.0,
        mean_batch=batches / steps if steps else 0.0,
        throughput_tokens_per_s=generated / span if span > 0 else 0.0, saturated=saturated,
    )


def highest_rate(run: Callable[[float], LoadResult], *, p99_ms: float, key: str = "e2e",
                 low: float = 0.01, high: float = 1000.0, iterations: int = 14) -> tuple[float, LoadResult | None]:
    """Largest QPS whose P99 (``key``: "e2e" or "ttft") meets the SLO, by bisection on a log scale."""
    def ok(result: LoadResult) -> bool:
        p99 = result.e2e_ms[2] if key == "e2e" else result.ttft_ms[2]
        return p99 <= p99_ms and not result.saturated

    best: tuple[float, LoadResult | None] = (0.0, None)
    first = run(low)
    if not ok(first):
        return best
    best = (low, first)
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
    """Memoise decode step times on a grid of batch sizes (the roofline is linear between them)."""
    grid = sorted({1, max_batch, *[2 ** k for k in range(int(math.log2(max(max_batch, 1))) + 1)]})
    contexts = [context * f for f in (0.25, 0.5, 1.0, 2.0, 4.0)]
    table = {(b, c): step(b, c) for b in grid for c in contexts}

    def lookup(batch: int, ctx: float) -> float:
        b_hi = grid[min(bisect.bisect_left(grid, batch), len(grid) - 1)]
        c_hi = contexts[min(bisect.bisect_left(contexts, ctx), len(contexts) - 1)]
        return table[(b_hi, c_hi)]

    return lookup



@dataclass(frozen=True)
class ServingReport:
    at_rate: LoadResult
    slo_p99_ms: float | None
    slo_key: str
    max_qps: float | None
    at_max: LoadResult | None
    max_batch: int
    kv_capacity_tokens: float
