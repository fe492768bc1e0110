"""Latency under load: a discrete-event simulation of continuous batching (Orca/vLLM-style iteration scheduling).

Requests arrive as a Poisson process at ``qps`` (open loop), or from ``concurrency`` clients that each send the next
request when the last one finished (closed loop: `vllm bench serve --max-concurrency`, genai-perf and aiperf
measure this way). Input and output lengths are fixed or exponential around the job's values. Each engine
iteration admits waiting requests while the KV cache has room (capacity from the memory model) and the batch limit
allows, runs their prefill together with one decode step of the running
batch, and retires finished sequences. Step times come from the roofline (``perf.decode_step_s`` and
``perf.prefill_s``). The same seed gives the same answer.

Degenerate check: with a batch limit of 1, exponential output lengths and negligible prefill the system is an
M/M/1 queue, whose mean wait is rho / (mu - lambda) (tested).
"""

from __future__ import annotations

import bisect
import heapq
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
    ttft_mean_ms: float = math.nan
    tpot_ms: tuple[float, float, float] = (math.nan, math.nan, math.nan)  # P50, P90, P99 of each request's mean
    tpot_mean_ms: float = math.nan  # time per output token after the first: (end - first token) / (output - 1)
    requests_per_s: float = 0.0
    concurrency: int | None = None  # closed loop: the clients in flight

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


def _lengths(rng: random.Random, input_len: int, output_len: int, exponential: bool) -> tuple[int, int]:
    """(input, output) tokens of one request: the job's, or exponential around them (output drawn first)."""
    if not exponential:
        return input_len, output_len
    n_out = max(1, round(rng.expovariate(1 / output_len)))
    return max(1, round(rng.expovariate(1 / input_len))), n_out


def poisson_requests(qps: float, count: int, input_len: int, output_len: int, *, seed: int,
                     exponential_lengths: bool = False) -> list[Request]:
    if qps <= 0:
        raise ConfigError(f"--qps must be > 0, got {qps}")
    rng = random.Random(seed)
    t = 0.0
    out = []
    for _ in range(count):
        t += rng.expovariate(qps)
        out.append(Request(t, *_lengths(rng, input_len, output_len, exponential_lengths)))
    return out


STEADY_FACTOR = 4.0
# A closed-loop client's next request reaches the scheduler after its answer was streamed back and the new request
# sent, parsed and tokenized; the engine starts its next iteration as soon as the last one ends, without waiting.
# So the next request misses the iteration under way and joins the one after. Any delay shorter than an iteration
# has that effect; a microsecond stands for "after the iteration started" without claiming a latency.
CLIENT_TURNAROUND_S = 1e-6

StepTime = Callable[[int, float], float]  # (batch, mean context) -> seconds of one decode step
PrefillTime = Callable[[int], float]  # (prompt tokens) -> seconds


def closed_loop_requests(count: int, input_len: int, output_len: int, *, seed: int,
                         exponential_lengths: bool = False) -> list[Request]:
    """``count`` requests for a closed loop: their arrival times are set by the clients as the run goes."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        out.append(Request(math.inf, *_lengths(rng, input_len, output_len, exponential_lengths)))
    return out


def simulate(requests: Sequence[Request], *, decode_step: StepTime, prefill: PrefillTime,
             max_batch: int, kv_capacity_tokens: float, concurrency: int | None = None,
             max_batched_tokens: int | None = None, prefix_hit: float = 0.0) -> LoadResult:
    """Run the scheduler over ``requests`` (sorted by arrival); measures TTFT, TPOT, end-to-end latency, queueing.

    With ``concurrency`` the arrivals are a closed loop: the first ``concurrency`` requests arrive at once and each
    finished one lets the next pending request in (no think time), after the engine started its next iteration
    (CLIENT_TURNAROUND_S). With ``max_batched_tokens`` the
    scheduler chunks prefills (vLLM V1 and SGLang): each iteration spends its token budget on one token per running
    sequence first, then on prompt chunks of admitted requests in arrival order; a request's first token comes with
    the iteration that finishes its prompt. ``prefix_hit`` of each prompt is already cached: only the rest is
    prefilled, at least the last token (whose logits give the first output token)."""
    arrival = [r.arrival_s for r in requests]
    if concurrency is not None:
        arrival = [0.0 if i < concurrency else math.inf for i in range(len(requests))]
    sim = _Scheduler(requests, arrival, max_batch, kv_capacity_tokens, max_batched_tokens, prefix_hit)
    released = min(concurrency, len(requests)) if concurrency is not None else len(requests)
    while sim.busy():
        if sim.steps % 4096 == 0:
            budget.checkpoint()
        chunks = sim.schedule()
        if not chunks and not sim.running:
            continue
        if not chunks and sim.coast(decode_step):
            continue
        step = prefill(sum(chunks.values())) if chunks else 0.0
        if sim.running:
            step += decode_step(sim.running, sim.mean_context())
        done_now = sim.advance(step, chunks)
        if concurrency is not None:  # each client that got its answer sends its next request: it misses the
            for _ in range(min(done_now, len(requests) - released)):  # iteration the engine starts meanwhile
                arrival[released] = sim.clock + CLIENT_TURNAROUND_S
                released += 1
    return _summarise(requests, arrival, (sim.first_token, sim.finished, sim.started),
                      (sim.clock, sim.batches, sim.steps, sim.generated), concurrency)


class _Scheduler:
    """The engine's queues and clock: waiting (arrived, not admitted), prefilling (admitted, prompt not done) and
    running (decoding) requests. Every running sequence gains one token per iteration, so each one's last
    iteration is known when it starts decoding: a heap of those makes an iteration cost O(log n), not O(n)."""

    def __init__(self, requests: Sequence[Request], arrival: list[float], max_batch: int, kv_capacity: float,
                 token_budget: int | None, prefix_hit: float = 0.0) -> None:
        self.requests, self.arrival, self.max_batch, self.kv_capacity = requests, arrival, max_batch, kv_capacity
        self.token_budget, self.prefix_hit = token_budget, prefix_hit
        self.waiting: deque[int] = deque()
        self.prefilling: dict[int, int] = {}  # request -> prompt tokens still to prefill (insertion = arrival order)
        self.ends: list[tuple[int, int]] = []  # heap of (the iteration a running request finishes in, request)
        self.context_sum = 0  # tokens held by the running sequences (prompt + generated)
        n = len(requests)
        self.first_token, self.finished, self.started = [math.nan] * n, [math.nan] * n, [math.nan] * n
        self.clock, self.next_arrival, self.batches, self.steps, self.generated = 0.0, 0, 0, 0, 0

    @property
    def running(self) -> int:
        return len(self.ends)

    def busy(self) -> bool:
        return self.next_arrival < len(self.requests) or bool(self.waiting or self.prefilling or self.ends)

    def mean_context(self) -> float:
        return self.context_sum / len(self.ends)

    def schedule(self) -> dict[int, int]:
        """This iteration's prompt chunks: request -> tokens."""
        if not self.waiting and not self.prefilling and not self.ends:
            self.clock = max(self.clock, self.arrival[self.next_arrival])
        while self.next_arrival < len(self.requests) and self.arrival[self.next_arrival] <= self.clock:
            self.waiting.append(self.next_arrival)
            self.next_arrival += 1
        self._admit()
        room = math.inf if self.token_budget is None else max(self.token_budget - self.running, 0)
        chunks: dict[int, int] = {}
        for i, left in self.prefilling.items():
            if room <= 0:
                break
            take = int(min(left, room))
            chunks[i] = take
            room -= take
        return chunks

    def _admit(self) -> None:
        used = self.context_sum + sum(self.requests[i].input_len + self.requests[i].output_len
                                      for i in self.prefilling)
        while self.waiting and self.running + len(self.prefilling) < self.max_batch:
            i = self.waiting[0]
            need = self.requests[i].input_len + self.requests[i].output_len
            if used + need > self.kv_capacity and (self.ends or self.prefilling):
                break
            self.waiting.popleft()
            prompt = self.requests[i].input_len
            self.prefilling[i] = max(1, prompt - math.floor(prompt * self.prefix_hit))  # the cached prefix is reused
            self.started[i] = self.clock
            used += need

    def coast(self, decode_step: StepTime) -> bool:
        """Run at once the decode-only iterations before the next sequence finishes and before the next arrival,
        when nothing waits (an O(1) jump instead of one loop turn per token). The context grows by one token a
        step, so the k steps cost k x the step at their middle context (exact where the step is linear in the
        context, as the step table is between its grid points). An arrival joins the first iteration that starts at
        or after it, so the jump ends before it: the iterations the loop would have run one by one, none of which
        admits anything. False when there is nothing to jump over."""
        k = self.ends[0][0] - self.steps - 1
        if k < 2 or self.waiting or self.prefilling:
            return False
        context = self.mean_context()
        seconds = k * decode_step(self.running, context + (k - 1) / 2)
        if self.next_arrival < len(self.requests):
            room = self.arrival[self.next_arrival] - self.clock
            while k >= 2 and seconds >= room:  # fewer steps, each no longer than the k steps' middle one
                k = min(k - 1, math.floor(room / (seconds / k)))
                seconds = k * decode_step(self.running, context + (k - 1) / 2)
            if k < 2:
                return False
        self.clock += seconds
        self.steps += k
        self.batches += self.running * k
        self.generated += self.running * k
        self.context_sum += self.running * k
        return True

    def advance(self, step: float, chunks: dict[int, int]) -> int:
        """Run the iteration; returns how many requests finished."""
        self.clock += step
        self.steps += 1
        self.batches += self.running
        self.generated += self.running
        self.context_sum += self.running
        done = 0
        while self.ends and self.ends[0][0] <= self.steps:
            _, i = heapq.heappop(self.ends)
            self.finished[i] = self.clock
            self.context_sum -= self.requests[i].input_len + self.requests[i].output_len
            done += 1
        for i, take in chunks.items():
            self.prefilling[i] -= take
            if self.prefilling[i] > 0:
                continue
            del self.prefilling[i]
            self.first_token[i] = self.clock  # the prompt's last chunk yields the first token
            self.generated += 1
            if self.requests[i].output_len <= 1:
                self.finished[i] = self.clock
                done += 1
            else:  # one token now; the rest one per iteration, the last in iteration steps + output_len - 1
                heapq.heappush(self.ends, (self.steps + self.requests[i].output_len - 1, i))
                self.context_sum += self.requests[i].input_len + 1
        return done


Times = tuple[list[float], list[float], list[float]]  # first token, finished, admitted: per request, in seconds


def _summarise(requests: Sequence[Request], arrival: list[float], times: Times,
               counters: tuple[float, int, int, int], concurrency: int | None) -> LoadResult:
    (first, done, started), (clock, batches, steps, generated) = times, counters
    warm = len(requests) // 10  # drop the first 10% as warm-up; a closed loop's first burst of clients too
    if concurrency is not None and len(requests) > 2 * concurrency:
        warm = max(warm, concurrency)
    kept = range(warm, len(requests))
    ttft = [(first[i] - arrival[i]) * 1e3 for i in kept]
    e2e = [(done[i] - arrival[i]) * 1e3 for i in kept]
    queue = [(started[i] - arrival[i]) * 1e3 for i in kept]
    tpot = [(done[i] - first[i]) * 1e3 / (requests[i].output_len - 1) for i in kept if requests[i].output_len > 1]
    span = clock - arrival[0] if requests else 1.0
    offered = len(requests) / max(arrival[-1], 1e-9) if concurrency is None and requests else (
        len(requests) / span if span > 0 else 0.0)
    saturated = concurrency is None and _growing(queue, [d - q for d, q in zip(e2e, queue, strict=True)])
    return LoadResult(
        qps=offered, requests=len(requests),
        ttft_ms=(percentile(ttft, 0.5), percentile(ttft, 0.9), percentile(ttft, 0.99)),
        e2e_ms=(percentile(e2e, 0.5), percentile(e2e, 0.9), percentile(e2e, 0.99)),
        mean_queue_ms=sum(queue) / len(queue) if queue else 0.0,
        mean_batch=batches / steps if steps else 0.0,
        throughput_tokens_per_s=generated / span if span > 0 else 0.0, saturated=saturated,
        ttft_mean_ms=sum(ttft) / len(ttft) if ttft else math.nan,
        tpot_ms=(percentile(tpot, 0.5), percentile(tpot, 0.9), percentile(tpot, 0.99)),
        tpot_mean_ms=sum(tpot) / len(tpot) if tpot else math.nan,
        requests_per_s=len(kept) / max(clock - arrival[warm], 1e-9) if requests else 0.0, concurrency=concurrency,
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
    """Largest QPS whose P99 (``key``: "e2e" or "ttft") meets the SLO, by bisection on a log scale of [low, high];
    the bracket is widened (by 8x, up to 3 times each way) while the SLO holds at its top or misses at its bottom."""
    def ok(result: LoadResult) -> bool:
        p99 = result.e2e_ms[2] if key == "e2e" else result.ttft_ms[2]
        return p99 <= p99_ms and not result.saturated and result.steady

    for _ in range(3):  # the bracket came from the closed form: widen it if the simulation does worse
        first = run(low)
        if ok(first):
            break
        low, high = low / 8, low
    else:
        return 0.0, None
    best: tuple[float, LoadResult | None] = (low, first)
    for _ in range(3):  # ... or better
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
    segments: dict[tuple[float, int], tuple[float, float, float, float]] = {}

    def at(batch: int, ctx: float) -> float:
        if (batch, ctx) not in table:
            table[(batch, ctx)] = step(batch, ctx)
        return table[(batch, ctx)]

    def segment(batch: float, j: int) -> tuple[float, float, float, float]:
        """The step at ``batch`` (between its grid points) at the contexts j - 1 and j: linear between them."""
        b0, b1, wb = _bracket(grid, batch)
        c0, c1 = contexts[j - 1], contexts[j]
        return (at(int(b0), c0) * (1 - wb) + at(int(b1), c0) * wb,
                at(int(b0), c1) * (1 - wb) + at(int(b1), c1) * wb, c0, c1)

    def lookup(batch: float, ctx: float) -> float:
        j = min(max(bisect.bisect_left(contexts, ctx), 1), len(contexts) - 1)
        found = segments.get((batch, j))
        if found is None:  # each batch's segment once: the simulation asks for the same batches again and again
            found = segments[(batch, j)] = segment(batch, j)
        v0, v1, c0, c1 = found
        return v0 + (v1 - v0) * min(max((ctx - c0) / (c1 - c0), 0.0), 1.0)

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
    at_rate: LoadResult | None  # None when only --concurrency was asked
    slo_p99_ms: float | None
    slo_key: str
    max_qps: float | None
    at_max: LoadResult | None
    max_batch: int
    kv_capacity_tokens: float
    planned_qps: float  # the closed-form capacity the recommender plans with (estimate/serving/capacity.py)
    planned_p99_ms: float | None  # the closed form's P99 at the simulated rate (None: unstable there)
    replicas: int = 1  # --count / --tp replicas behind a load balancer; rates and throughputs are their sum
    at_concurrency: LoadResult | None = None  # the closed loop of --concurrency clients
    layout: str = ""  # how the replicas split the work, when not alike (--disagg)
    per_gpu_bytes: float | None = None  # a replica's memory on each of its GPUs at batch 1 (weights, context ...)
    capacity_bytes: float | None = None  # what each GPU gives (the memory model's capacity)
