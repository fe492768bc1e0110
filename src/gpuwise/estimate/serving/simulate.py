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

import heapq
import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from gpuwise import budget
from gpuwise.errors import ConfigError
from gpuwise.estimate.cost.energy import Energy


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
    busy_fraction: float | None = None  # the engine's iterations over the simulated time (energy.py's utilisation)
    prefill_share: float | None = None  # of that busy time, prefilling (a mixed iteration: its prompt tokens' share)
    energy: Energy | None = None  # joules per output token at this load (estimate/cost/energy.py), set by its caller

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
MixedStep = Callable[[int, int, float], float]  # (prompt tokens, decoding sequences, their mean context) -> seconds


def closed_loop_requests(count: int, input_len: int, output_len: int, *, seed: int,
                         exponential_lengths: bool = False) -> list[Request]:
    """``count`` requests for a closed loop: their arrival times are set by the clients as the run goes."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        out.append(Request(math.inf, *_lengths(rng, input_len, output_len, exponential_lengths)))
    return out


@dataclass(frozen=True)
class Policy:
    """How the engine's scheduler forms an iteration (the engine profile's ``mixes_prefill``, ``schedules_ahead``
    and ``client_turnaround_s``, runtimes/schema.py): whether decodes and prompt chunks share an iteration and its
    token budget, how many iterations it forms ahead of the GPU, and how long a closed-loop client's next request
    takes to reach it."""

    mixes_prefill: bool = True
    ahead: int = 0
    turnaround_s: float = 0.0  # mean of the exponential time from a closed-loop request's last token to the
    # client's next request reaching the scheduler (beside CLIENT_TURNAROUND_S): what lets clients drift apart
    request_overhead_s: float = 0.0  # the engine's server between the client and the scheduler (HTTP, the chat
    # template and tokenizer, detokenizing and streaming the first token back): a request reaches the scheduler
    # this long after the client sent it, and every latency the client measures includes it


def steady_phases(clients: int, cycle_s: float, *, seed: int) -> list[float]:
    """First-request times of ``clients`` closed-loop clients that have drifted apart: each at an independent,
    uniformly distributed point (seeded) of its cycle of about ``cycle_s``, the earliest at 0 -- the phase of a
    stationary renewal process. serve-sim does not assume it: clients started together with equal lengths finish
    together and send together again, round after round (the engine is deterministic), and a measured run agrees:
    vllm bench serve, 32 clients of 128 + 128 tokens on an H100 (../shared/data/exports/vllm/massedcompute-h100-r1-
    distill-llama8b-c32.json): mean TTFT 97 ms, median 98, about what 32 prompts prefilled together take (serve-sim:
    126 ms); spread phases give 32 ms."""
    rng = random.Random(seed)
    phases = sorted(rng.uniform(0.0, max(cycle_s, 0.0)) for _ in range(clients))
    return [p - phases[0] for p in phases] if phases else []


def simulate(requests: Sequence[Request], *, decode_step: StepTime, prefill: PrefillTime,
             max_batch: int, kv_capacity_tokens: float, concurrency: int | None = None,
             max_batched_tokens: int | None = None, prefix_hit: float = 0.0, policy: Policy = Policy(),
             phases_s: Sequence[float] | None = None, mixed_step: MixedStep | None = None,
             seed: int = 0) -> LoadResult:
    """Run the scheduler over ``requests`` (sorted by arrival); measures TTFT, TPOT, end-to-end latency, queueing.

    With ``concurrency`` the arrivals are a closed loop: the first ``concurrency`` requests arrive at ``phases_s``
    (all at 0, as a benchmark starts its clients, unless given; see ``steady_phases``) and each finished one lets the
    next pending request in (no think time), after the engine started its next iteration (CLIENT_TURNAROUND_S),
    and ``policy.turnaround_s`` later on average (exponential, drawn with ``seed``): clients that finished in the
    same iteration then reach the scheduler at different times, and drift apart round after round.
    With ``max_batched_tokens`` the scheduler chunks prefills (vLLM V1 and SGLang): each iteration spends its token
    budget on one token per running sequence first (when ``policy.mixes_prefill``; otherwise an iteration with
    prompts to prefill runs them alone, on the whole budget, and the decodes wait), then on prompt chunks of
    admitted requests in arrival order; a request's first token comes with the iteration that finishes its prompt.
    An arrival joins the iteration after the one running, or ``policy.ahead`` later where the scheduler forms
    iterations ahead of the GPU. ``prefix_hit`` of each prompt is already cached: only the rest is prefilled, at
    least the last token (whose logits give the first output token). An iteration that decodes and prefills costs
    ``mixed_step`` (prompt tokens, batch, mean context) -- one forward over both, see ``Replica.mixed_step`` -- or,
    without it, the prefill plus the decode step."""
    arrival = [r.arrival_s for r in requests]
    if concurrency is not None:
        starts = sorted(phases_s) if phases_s is not None else [0.0] * concurrency
        arrival = [starts[i] if i < concurrency else math.inf for i in range(len(requests))]
    sim = _Scheduler(requests, arrival, max_batch, kv_capacity_tokens, max_batched_tokens, prefix_hit, policy)
    released = min(concurrency, len(requests)) if concurrency is not None else len(requests)
    rng = random.Random(seed)
    busy_s = prefill_s = 0.0  # time the engine runs iterations, and the prefill part of it
    while sim.busy():
        if sim.steps % 4096 == 0:
            budget.checkpoint()
        chunks = sim.schedule()
        if not chunks and not sim.running:
            continue
        before = sim.clock
        if not chunks and sim.coast(decode_step):
            busy_s += sim.clock - before
            continue
        tokens = sum(chunks.values())
        decoding = sim.running > 0 and (policy.mixes_prefill or not chunks)
        if not decoding:
            step = prefilling = prefill(tokens)
        elif tokens and mixed_step is not None:
            step = mixed_step(tokens, sim.running, sim.mean_context())
            prefilling = step * tokens / (tokens + sim.running)  # constants.MIXED_STEP_PREFILL_SHARE
        else:
            step = (prefilling := prefill(tokens) if tokens else 0.0) + decode_step(sim.running, sim.mean_context())
        busy_s, prefill_s = busy_s + step, prefill_s + prefilling
        done_now = sim.advance(step, chunks, decoding)
        if concurrency is not None:  # each client that got its answer sends its next request: it misses the
            for _ in range(min(done_now, len(requests) - released)):  # iteration the engine starts meanwhile
                late = rng.expovariate(1 / policy.turnaround_s) if policy.turnaround_s > 0 else 0.0
                sim.arrive(released, sim.clock + CLIENT_TURNAROUND_S + late)
                released += 1
    result = _summarise(requests, arrival, (sim.first_token, sim.finished, sim.started),
                        (sim.clock, sim.batches, sim.steps, sim.generated), concurrency)
    span = sim.clock - arrival[0] if requests else 0.0
    return replace(result, busy_fraction=min(busy_s / span, 1.0) if span > 0 else None,
                   prefill_share=prefill_s / busy_s if busy_s > 0 else None)


class _Scheduler:
    """The engine's queues and clock: pending (not arrived yet, a heap by time), waiting (arrived, not admitted),
    prefilling (admitted, prompt not done) and running (decoding) requests. Every running sequence gains one token
    per decoding iteration, so each one's last decoding iteration is known when it starts decoding: a heap of those
    makes an iteration cost O(log n), not O(n)."""

    def __init__(self, requests: Sequence[Request], arrival: list[float], max_batch: int, kv_capacity: float,
                 token_budget: int | None, prefix_hit: float, policy: Policy) -> None:
        self.requests, self.arrival, self.max_batch, self.kv_capacity = requests, arrival, max_batch, kv_capacity
        self.token_budget, self.prefix_hit, self.policy = token_budget, prefix_hit, policy
        self.pending = [(t + policy.request_overhead_s, i) for i, t in enumerate(arrival) if t < math.inf]
        heapq.heapify(self.pending)
        self.waiting: deque[int] = deque()
        self.prefilling: dict[int, int] = {}  # request -> prompt tokens still to prefill (insertion = arrival order)
        self.ends: list[tuple[int, int]] = []  # heap of (the decoding iteration a request finishes in, request)
        self.context_sum = 0  # tokens held by the running sequences (prompt + generated)
        n = len(requests)
        self.first_token, self.finished, self.started = [math.nan] * n, [math.nan] * n, [math.nan] * n
        self.clock, self.batches, self.steps, self.generated = 0.0, 0, 0, 0
        self.decode_steps = 0  # iterations that decoded (all of them, unless prefills run alone)
        self.starts: deque[float] = deque(maxlen=policy.ahead + 1)  # when the last iterations started

    @property
    def running(self) -> int:
        return len(self.ends)

    def busy(self) -> bool:
        return bool(self.pending or self.waiting or self.prefilling or self.ends)

    def arrive(self, i: int, t: float) -> None:
        """The client sends request ``i`` at ``t``; the scheduler sees it after the server's overhead."""
        self.arrival[i] = t
        heapq.heappush(self.pending, (t + self.policy.request_overhead_s, i))

    def mean_context(self) -> float:
        return self.context_sum / len(self.ends)

    def schedule(self) -> dict[int, int]:
        """This iteration's prompt chunks: request -> tokens. It takes the arrivals before the start of the
        iteration ``policy.ahead`` back (the one it was formed during), or before now when the engine was idle."""
        idle = not self.waiting and not self.prefilling and not self.ends
        if idle:
            self.clock = max(self.clock, self.pending[0][0])
            self.starts.clear()
        self.starts.append(self.clock)
        cutoff = self.starts[0]
        while self.pending and self.pending[0][0] <= cutoff:
            self.waiting.append(heapq.heappop(self.pending)[1])
        self._admit()
        used = self.running if self.policy.mixes_prefill else 0  # decodes share the budget only when mixed
        room = math.inf if self.token_budget is None else max(self.token_budget - used, 0)
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
        k = self.ends[0][0] - self.decode_steps - 1
        if k < 2 or self.waiting or self.prefilling:
            return False
        context = self.mean_context()
        seconds = k * decode_step(self.running, context + (k - 1) / 2)
        if self.pending:
            room = self.pending[0][0] - self.clock
            while k >= 2 and seconds >= room:  # fewer steps, each no longer than the k steps' middle one
                k = min(k - 1, math.floor(room / (seconds / k)))
                seconds = k * decode_step(self.running, context + (k - 1) / 2)
            if k < 2:
                return False
        self.clock += seconds
        self.starts.append(self.clock - seconds / k)  # the last jumped iteration's start
        self.steps += k
        self.decode_steps += k
        self.batches += self.running * k
        self.generated += self.running * k
        self.context_sum += self.running * k
        return True

    def advance(self, step: float, chunks: dict[int, int], decoded: bool = True) -> int:
        """Run the iteration (``decoded``: the running sequences gain a token in it); returns how many requests
        finished."""
        self.clock += step
        self.steps += 1
        if decoded:
            self.decode_steps += 1
            self.batches += self.running
            self.generated += self.running
            self.context_sum += self.running
        done = 0
        while self.ends and self.ends[0][0] <= self.decode_steps:
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
            else:  # one token now; the rest one per decoding iteration, the last output_len - 1 of them later
                heapq.heappush(self.ends, (self.decode_steps + self.requests[i].output_len - 1, i))
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
