"""One serving replica and the request rate it sustains: the single capacity model behind serve-sim and recommend.

:func:`replica` sets up what both the discrete-event simulation (``serving.simulate``, used by ``serve-sim``) and
the closed form here (used by ``recommend``, and by ``serve-sim`` to bracket its search) run on: the memory of one
replica of ``job.tp`` GPUs, the KV-cache room it leaves (computed once, in ``memory/inference``), the engine's batch
limit, and the roofline's prefill and decode-step times (with the user's ``bench`` calibration the plan carries).

The closed form (continuous batching, Poisson arrivals at rate r; Orca/vLLM iteration-level scheduling):
    P   prefill of one request's prompt;  S(B)  one decode step of a batch of B;  O  output tokens
    mean end-to-end T:  T = (P + (O - 1) S(B)) / (1 - r P),   B = r T  (Little's law), unstable when r P >= 1
                        or B passes the batch limit -- every other request's prefill, r T of them on average
                        during a request's life, stalls its decoding for P (prefills run in the same iterations)
    P99 end-to-end:     S(B) (the iteration in flight at arrival; (1 + a) S(B) where the scheduler forms a
                        iterations ahead) + P + (O - 1) S(B) + D x q99(Poisson(r T))
    P99 TTFT:           S(B) + P + D x q99(Poisson(r (S(B) + P)))  (arrivals prefilled in the same iteration)
    P99 TPOT:           S(B) + D x q99(Poisson(r (T - P))) / (O - 1)  (each request's mean step after its first
                        token: the decode step at the batch the rate implies, and the prompts that stall it)
    D, the stall of one other prompt: what its I tokens add to a forward of the B decoding ones, P(I + B) - P(B),
    where the engine runs prompts and decodes in one forward (B from a first pass with D = P); P where its prompts
    run alone. r D replaces r P above.
The tail is the 99th percentile of the Poisson number of interfering arrivals: a property of the arrival process the
workload states, not a factor read off a simulator. tests/test_serving_capacity.py checks it against serve-sim.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from gpuwise import budget
from gpuwise.catalog import GPU, Catalog
from gpuwise.errors import NotEstimable
from gpuwise.estimate import constants as C
from gpuwise.estimate.memory.breakdown import MemoryEstimate
from gpuwise.estimate.memory.inference import inference_memory
from gpuwise.estimate.memory.kv_cache import kv_bytes_per_token
from gpuwise.estimate.plan import InferPlan
from gpuwise.estimate.serving.simulate import Policy
from gpuwise.estimate.serving.steps import step_table
from gpuwise.estimate.speed.inference import decode_step_s, prefill_s
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.jobs.slos import Slos
from gpuwise.workload.model.architecture import Architecture

QUANTILE = 0.99


@dataclass(frozen=True)
class Replica:
    """One serving replica (``job.tp`` GPUs): memory at batch 1, the KV cache room, and the engine's clock."""

    job: InferJob
    memory: MemoryEstimate
    kv_capacity_tokens: float  # tokens of K/V the cache holds on each GPU of the replica
    max_num_seqs: int  # the engine's batch limit
    kv_sequences: int  # whole sequences of the job's length the cache holds at once
    prefill: Callable[[int], float]  # prompt tokens prefilled together -> seconds
    decode_step: Callable[[int, float], float]  # (batch, mean context) -> seconds
    max_batched_tokens: int | None = None  # the scheduler's token budget per iteration (chunked prefill)
    policy: Policy = field(default_factory=Policy)  # how the engine's scheduler forms iterations (its profile's)
    _steps: dict[int, float] = field(default_factory=dict, compare=False, repr=False)

    def step_at(self, batch: int) -> float:
        """One decode step of ``batch`` sequences at the job's mean context (half the output generated)."""
        if batch not in self._steps:
            self._steps[batch] = self.decode_step(batch, self.job.input_len + self.job.output_len / 2)
        return self._steps[batch]

    def mixed_step(self, tokens: int, batch: int, context: float) -> float:
        """An iteration that prefills ``tokens`` prompt tokens beside ``batch`` decoding sequences: one forward over
        both (vLLM's and TensorRT-LLM's mixed batches), so the weights are read and the kernels launched once; the
        decode step plus what the prompt tokens add to a forward that already holds the batch's tokens."""
        added = self.prefill(tokens + batch) - self.prefill(batch)
        return self.decode_step(batch, context) + max(added, 0.0)

    @property
    def batch_limit(self) -> int:
        return max(1, min(self.max_num_seqs, self.kv_sequences))

    @property
    def holds_a_sequence(self) -> bool:
        """The weights fit and leave KV room for at least one whole sequence of the job's length."""
        return self.memory.fits and self.kv_capacity_tokens >= self.job.input_len + self.job.output_len


PREFILL_GRAIN = 64  # tokens: prefill times are computed once per 64-token step of chunk size (at most budget / 64)
def replica(plan: InferPlan, catalog: Catalog) -> Replica:
    """The replica the plan describes (its ``tp`` GPUs); see ``holds_a_sequence`` before using it."""
    job = plan.job
    one_plan = plan.with_job(batch=1, count=job.replica_gpus, nodes=1)
    one = one_plan.job
    memory = inference_memory(one_plan)
    room = max(memory.kv_budget_bytes or 0.0, 0.0)
    per_token = kv_bytes_per_token(one_plan)
    kv_tokens = room / per_token if per_token > 0 else math.inf
    max_seqs = plan.max_num_seqs
    step = step_table(lambda b, c: decode_step_s(one_plan, catalog, batch=b, context=c),
                      max_seqs, job.input_len + job.output_len / 2)
    prefills: dict[int, float] = {}

    def prefill(tokens: int) -> float:
        bucket = -(-max(tokens, 1) // PREFILL_GRAIN) * PREFILL_GRAIN  # chunks rounded up; whole prompts stay whole
        if bucket not in prefills:
            prefills[bucket] = prefill_s(one_plan, catalog, tokens=bucket)
        return prefills[bucket]

    engine = plan.engine
    policy = Policy(mixes_prefill=engine.mixes_prefill.value, ahead=engine.schedules_ahead.value,
                    turnaround_s=engine.client_turnaround_s.value, request_overhead_s=engine.server_overhead_s)
    return Replica(one, memory, kv_tokens, max_seqs, memory.max_concurrency or 1, prefill, step,
                   max_batched_tokens=plan.max_batched_tokens, policy=policy)


def require_room(rep: Replica, arch: Architecture, gpu: GPU) -> None:
    if not rep.holds_a_sequence:
        job = rep.job
        raise NotEstimable(f"{arch.name} leaves no room for one {job.input_len}+{job.output_len}-token sequence on "
                           f"{gpu.id} at TP {job.tp} (KV budget {(rep.memory.kv_budget_bytes or 0) / 2**30:.1f} GiB)")


def poisson_quantile(mean: float, q: float = QUANTILE) -> float:
    """Smallest n with P(N <= n) >= q for N ~ Poisson(mean); the normal approximation (continuity-corrected) above
    a mean of 500, where the series' first term underflows. ``poisson_quantile(1.0) == 4``."""
    if mean <= 0:
        return 0.0
    if mean > 500:
        return float(math.ceil(mean + statistics.NormalDist().inv_cdf(q) * math.sqrt(mean) - 0.5))
    term = cdf = math.exp(-mean)
    n = 0
    while cdf < q and n < 10_000:
        n += 1
        term *= mean / n
        cdf += term
    return float(n)


@dataclass(frozen=True)
class Latency:
    mean_e2e_s: float
    p99_e2e_s: float
    p99_ttft_s: float
    mean_batch: float
    p99_tpot_s: float = 0.0

    @property
    def p99_ms(self) -> dict[str, float]:
        """The P99s by SLO name (workload/jobs/slos.py), in ms."""
        return {"ttft": self.p99_ttft_s * 1e3, "tpot": self.p99_tpot_s * 1e3, "e2e": self.p99_e2e_s * 1e3}


def time_in_system(rep: Replica, rate: float, *, fixed_s: float = 0.0, stretch: float = 1.0) -> float | None:
    """A request's time T in a replica whose decoding sequences arrive at ``rate``/s: the fixed point, damped, of
    T = (fixed_s + (O - 1) S(rate T)) x stretch, the decode step S taken at the batch Little's law gives; None when
    that batch passes the replica's limit (unstable)."""
    steps = max(rep.job.output_len - 1, 0)
    mean = fixed_s + steps * rep.step_at(1)
    for _ in range(60):
        batch = rate * mean
        if batch > rep.batch_limit:
            return None
        new = (fixed_s + steps * rep.step_at(max(1, round(batch)))) * stretch
        converged = abs(new - mean) <= 1e-4 * max(mean, 1e-12)
        mean = new if converged else (mean + new) / 2
        if converged:
            break
    return mean


def latency_at(rep: Replica, rate: float, *, cached: float = 0.0) -> Latency | None:
    """The closed form's latencies at ``rate`` requests/s (module docstring); None where the replica is unstable.
    ``cached``: the share of each prompt the prefix cache serves (serving/sessions.py); only the rest is prefilled."""
    job = rep.job
    prompt = max(1, round(job.input_len * (1 - cached)))
    first = rep.prefill(prompt)
    steps = max(job.output_len - 1, 0)
    stall, mean = first, 0.0
    for attempt in range(1 + rep.policy.mixes_prefill):
        if attempt:  # one forward: what the prompt adds to the batch the first pass found
            joined = max(1, round(rate * mean))
            stall = rep.prefill(prompt + joined) - rep.prefill(joined)
        if rate * stall >= 1:
            return None
        found = time_in_system(rep, rate, fixed_s=first, stretch=1 / (1 - rate * stall))
        if found is None:
            return None
        mean = found
    batch = max(1.0, rate * mean)
    step = rep.step_at(round(batch))
    # the iteration in flight at arrival, and those the scheduler formed ahead of it; an idle engine has none
    in_flight = step * (1 + rep.policy.ahead) if rate * mean > 0.01 else 0.0
    server = rep.policy.request_overhead_s  # the engine's server, outside the GPU: every latency a client sees has it
    p99 = server + in_flight + first + steps * step + stall * poisson_quantile(rate * mean)
    ttft = server + in_flight + first + stall * poisson_quantile(rate * (step + first))
    decoding_s = max(mean - first, 0.0)  # a request's time from its first token to its last
    tpot = step + stall * poisson_quantile(rate * decoding_s) / steps if steps else 0.0
    return Latency(server + mean, p99, ttft, batch, tpot)


@dataclass(frozen=True)
class Capacity:
    """What one replica sustains: ``rate_qps`` to plan with (the highest rate meeting every SLO, or the planning
    utilisation of the stable maximum when there is none), the SLO that binds there, and the P99s at any rate."""

    rate_qps: float
    stable_qps: float
    slos: Slos
    binding: str | None  # the SLO with the least headroom at rate_qps; where none is met, the one missed most idle
    idle_p99_ms: dict[str, float]
    p99s_ms: Callable[[float], dict[str, float]]  # the P99s by SLO name at a rate (inf where unstable)

    def p99_s(self, rate: float) -> float:
        """The P99 of the binding SLO's kind (end-to-end without SLOs) at ``rate``, in seconds."""
        return self.p99s_ms(rate)[self.binding or "e2e"] / 1e3


UNSTABLE = {"ttft": math.inf, "tpot": math.inf, "e2e": math.inf}


def capacity(rep: Replica, *, slos: Slos = Slos(), cached_share: Callable[[float], float] | None = None) -> Capacity:
    """Highest rate whose P99s meet every SLO in ``slos`` at once, by bisection on a log scale of the conjunction;
    0 when even an idle replica misses one of them. ``cached_share(rate)``: the prefix cache's hit rate at that rate
    (sessions)."""
    def p99s(rate: float) -> dict[str, float]:
        found = latency_at(rep, rate, cached=cached_share(rate) if cached_share is not None else 0.0)
        return dict(UNSTABLE) if found is None else found.p99_ms

    stable = largest_rate(lambda r: math.isfinite(p99s(r)["e2e"]))
    idle = p99s(0.0)
    if not slos:
        return Capacity(stable * C.SERVING_PLANNING_UTILISATION.value, stable, slos, None, idle, p99s)
    rate = largest_rate(lambda r: slos.met(p99s(r))) if slos.met(idle) else 0.0
    return Capacity(rate, stable, slos, slos.binding(p99s(rate) if rate > 0 else idle), idle, p99s)


def largest_rate(ok: Callable[[float], bool], low: float = 1e-4, high: float = 1e5) -> float:
    """Largest rate in [low, high] where ``ok`` holds (monotone: true below, false above), 0 when none does."""
    if not ok(low):
        return 0.0
    for _ in range(40):
        budget.checkpoint()
        mid = math.sqrt(low * high)
        low, high = (mid, high) if ok(mid) else (low, mid)
    return low


def batch_capacity(*, seconds_per_batch: float, batch: int,
                   slo_s: float | None) -> tuple[float, Callable[[float], float]]:
    """A replica that serves requests in batches of ``batch`` (encoders, CNNs, ViTs), each taking
    ``seconds_per_batch``: (planned rate, P99 latency at a rate).

    An arrival waits for the batch in flight, then for the requests queued ahead of it -- at most
    q99(Poisson(r D)) of them arrived during the last batch -- served ``batch`` at a time:
    P99 = D x (1 + ceil((q99 + 1) / batch)). Stable below batch / D."""
    def p99(rate: float) -> float:
        if rate * seconds_per_batch >= batch:
            return math.inf
        ahead = poisson_quantile(rate * seconds_per_batch)
        return seconds_per_batch * (1 + math.ceil((ahead + 1) / batch))

    stable = batch / seconds_per_batch
    if slo_s is None:
        return stable * C.SERVING_PLANNING_UTILISATION.value, p99
    if p99(0.0) > slo_s:
        return 0.0, p99
    return largest_rate(lambda r: p99(r) <= slo_s, high=stable), p99
