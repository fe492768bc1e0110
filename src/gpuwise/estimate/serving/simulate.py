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

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from gpuwise import budget
from gpuwise.errors import ConfigError
from gpuwise.estimate.cost.energy import Energy
from gpuwise.estimate.serving.prefix_cache import CacheStats
from gpuwise.estimate.serving.scheduler import Policy, Request, Scheduler, Sessions

__all__ = ["LoadResult", "Policy", "Request", "Sessions", "simulate"]


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
    prefix_cache: CacheStats | None = None  # a session workload's hits, reloads and evictions
    ttft_by_turn_ms: tuple[float, ...] = ()  # a session workload: the mean TTFT of each turn, first turn first
    sessions: int = 0  # a session workload: the sessions simulated, and those live at once (Little's law: their
    live_sessions: float = 0.0  # rate x a session's mean length, think time included)

    @property
    def steady(self) -> bool:
        """Long enough to stand for steady state: at least STEADY_FACTOR x as many requests as are in flight at once
        (Little's law: a run of few more requests than the batch holds is one burst, filling and draining); of a
        session workload, at least SESSION_STEADY_FACTOR x as many sessions as are live at once, in think time too
        (the working set is full once the first session's lifetime has passed: from then on, half the run)."""
        return (self.requests >= STEADY_FACTOR * max(self.mean_batch, 1.0)
                and self.sessions >= SESSION_STEADY_FACTOR * self.live_sessions)


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
SESSION_STEADY_FACTOR = 2.0
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
             seed: int = 0, sessions: Sessions | None = None,
             follow: Mapping[int, tuple[int, float]] | None = None) -> LoadResult:
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
    without it, the prefill plus the decode step.

    A session workload (``sessions``, serving/sessions.py) takes each prompt's cached tokens from the prefix cache
    instead, and ``follow`` sends request j once request i finished and ``follow[i] = (j, delay_s)`` passed (the
    session's next turn after the think time, or a closed-loop user's next session); an iteration that prefills a
    prompt whose prefix comes back from host memory also waits for that copy."""
    arrival = [r.arrival_s for r in requests]
    if concurrency is not None:
        starts = sorted(phases_s) if phases_s is not None else [0.0] * concurrency
        arrival = [starts[i] if i < concurrency else math.inf for i in range(len(requests))]
    sim = Scheduler(requests, arrival, max_batch, kv_capacity_tokens, max_batched_tokens, prefix_hit, policy,
                    sessions)
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
        step += sum(sim.loading.pop(i, 0.0) for i in chunks) if sim.loading else 0.0  # host reloads: busy, not prefill
        busy_s, prefill_s = busy_s + step, prefill_s + prefilling
        done_now = sim.advance(step, chunks, decoding)
        for i in done_now:  # a session's next turn, after the think time and the client's turnaround
            nxt = follow.get(i) if follow is not None else None
            if nxt is not None:
                late = rng.expovariate(1 / policy.turnaround_s) if policy.turnaround_s > 0 else 0.0
                sim.arrive(nxt[0], sim.clock + CLIENT_TURNAROUND_S + late + nxt[1])
        if concurrency is not None and not follow:  # each client that got its answer sends its next request: it
            for _ in range(min(len(done_now), len(requests) - released)):  # misses the iteration under way
                late = rng.expovariate(1 / policy.turnaround_s) if policy.turnaround_s > 0 else 0.0
                sim.arrive(released, sim.clock + CLIENT_TURNAROUND_S + late)
                released += 1
    result = _summarise(requests, arrival, (sim.first_token, sim.finished, sim.started),
                        (sim.clock, sim.batches, sim.steps, sim.generated), concurrency)
    span = sim.clock - arrival[0] if requests else 0.0
    result = replace(result, busy_fraction=min(busy_s / span, 1.0) if span > 0 else None,
                     prefill_share=prefill_s / busy_s if busy_s > 0 else None)
    if sessions is None:
        return result
    return replace(result, prefix_cache=sessions.cache.stats,
                   ttft_by_turn_ms=_by_turn(sessions.session_of, arrival, sim.first_token))


def _by_turn(session_of: Sequence[int], arrival: Sequence[float], first: Sequence[float]) -> tuple[float, ...]:
    """Mean TTFT (ms) of each turn of a session, first turn first, over the sessions after the first 10 %."""
    turn_of: dict[int, int] = {}
    sums: list[list[float]] = []
    skip = max(session_of, default=0) // 10
    for i, s in enumerate(session_of):
        k = turn_of[s] = turn_of.get(s, -1) + 1
        if k == len(sums):
            sums.append([0.0, 0.0])
        if s >= skip and math.isfinite(first[i]):
            sums[k][0] += (first[i] - arrival[i]) * 1e3
            sums[k][1] += 1
    return tuple(total / n if n else math.nan for total, n in sums)


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
    turns: int | None = None  # a session workload: its turns per session; rates are sessions per second
    expected_hit_rate: float | None = None  # the closed form's prefix-cache hit rate at its planned rate
