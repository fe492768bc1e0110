"""serve-sim: the discrete-event simulation of one replica under Poisson load, wired to the shared replica model.

The replica (memory, KV room, batch limit, step times with calibration) is ``serving_capacity.replica``, the same
the recommender plans with; the closed-form capacity brackets the simulated search for the highest rate meeting
the SLO, and is reported beside it so the two derivations can be compared.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from gpuwise.catalog import GPU, Catalog
from gpuwise.errors import ConfigError, NotEstimable
from gpuwise.estimate.calibration import Calibration
from gpuwise.estimate.plan import InferPlan, require_tp, resolve
from gpuwise.estimate.serving import disagg
from gpuwise.estimate.serving.capacity import Replica, capacity, replica, require_room
from gpuwise.estimate.serving.disagg import pools
from gpuwise.estimate.serving.session_load import session_job, session_runs, session_serving, session_workload
from gpuwise.estimate.serving.simulate import (
    LoadResult,
    ServingReport,
    closed_loop_requests,
    poisson_requests,
    simulate,
)
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.jobs.load_test import LoadTest
from gpuwise.workload.jobs.slos import Slos
from gpuwise.workload.model.architecture import Architecture

MAX_SIMULATED_TOKENS = 1_000_000  # requests x output tokens: about a second per simulated rate on one core


MAX_CLOSED_LOOP_STEPS = 400_000  # engine iterations of one closed-loop run: about a second on one core
STEADY_ROUNDS = 4  # a closed loop of C clients runs 4 x C requests by default: the first C (the opening burst) are
# dropped, the rest are steady state


def closed_loop_count(load: LoadTest, output: int) -> int:
    """Requests of a closed-loop run: --requests if given, else STEADY_ROUNDS x the clients (at least 400)."""
    assert load.concurrency is not None
    if "requests" in load.model_fields_set:
        return load.requests
    wanted = max(load.requests, STEADY_ROUNDS * load.concurrency)
    return max(20, min(wanted, MAX_CLOSED_LOOP_STEPS * load.concurrency // output))


def _closed_loop_bounds(load: LoadTest, output: int) -> None:
    assert load.concurrency is not None
    steps = closed_loop_count(load, output) * output / load.concurrency
    if steps > MAX_CLOSED_LOOP_STEPS:
        raise ConfigError(f"--requests {load.requests:,} x --output-len {output:,} over {load.concurrency} clients is "
                          f"more than the {MAX_CLOSED_LOOP_STEPS:,} engine steps serve-sim simulates; use at most "
                          f"{MAX_CLOSED_LOOP_STEPS * load.concurrency // output:,} requests")


def p99_ms(result: LoadResult) -> dict[str, float]:
    """A simulated run's P99s by SLO name (workload/jobs/slos.py), in ms."""
    return {"ttft": result.ttft_ms[2], "tpot": result.tpot_ms[2], "e2e": result.e2e_ms[2]}


@dataclass(frozen=True)
class SloReport(ServingReport):
    """serve-sim's report with the SLOs it searched for: the P99s at the highest rate meeting them all (or, where
    none does, at the trickle of requests that already misses one), and the SLO with the least headroom there."""

    slos: Slos = field(default_factory=Slos)
    binding_slo: str | None = None
    p99_at_capacity_ms: tuple[tuple[str, float], ...] = ()  # (SLO name, P99 ms) for each SLO given
    planned_binding: str | None = None  # the SLO that binds the closed form's rate


def highest_rate(run: Callable[[float], LoadResult], *, slos: Slos, low: float = 0.01, high: float = 1000.0,
                 iterations: int = 14) -> tuple[float, LoadResult | None]:
    """Largest QPS whose P99s meet every SLO in ``slos`` at once, by bisection on a log scale of [low, high]; the
    bracket is widened (by 8x, up to 3 times each way) while they hold at its top or one misses at its bottom.
    Where no rate meets them: 0 and the run at the lowest rate tried (what names the SLO missed)."""
    def ok(result: LoadResult) -> bool:
        return slos.met(p99_ms(result)) and not result.saturated and result.steady

    for _ in range(3):  # the bracket came from the closed form: widen it if the simulation does worse
        first = run(low)
        if ok(first):
            break
        low, high = low / 8, low
    else:
        return 0.0, first
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


def serving_report(arch: Architecture, job: InferJob, gpu: GPU, catalog: Catalog, load: LoadTest, *,
                   calibration: Calibration | None = None) -> SloReport:
    if not arch.decoder_layers:
        raise NotEstimable(f"{arch.name} does not generate tokens; serve-sim models decoder LLMs")
    require_tp(arch, job.tp)
    output = max(job.output_len, 1)
    if load.concurrency is not None and "qps" not in load.model_fields_set:
        _closed_loop_bounds(load, output)
    elif load.requests * output > MAX_SIMULATED_TOKENS:
        raise ConfigError(f"--requests {load.requests:,} x --output-len {output:,} is more than the "
                          f"{MAX_SIMULATED_TOKENS:,} tokens serve-sim simulates; use at most "
                          f"{MAX_SIMULATED_TOKENS // output:,} requests")
    # --turns: sessions, planned on a turn's mean prompt
    work = session_workload(load.turns, load.think_time_s, load.system_prompt_len, job)
    plan = resolve(arch, session_job(arch, job, work) if work is not None else job, gpu, calibration)
    assert isinstance(plan, InferPlan)
    rep = replica(plan, catalog)
    require_room(rep, arch, gpu)
    sessions = (session_serving(plan, rep, gpu, catalog, work, kv_offload_gib=load.kv_offload_gib)
                if work is not None else None)
    replicas = job.count // job.replica_gpus  # a load balancer splits Poisson arrivals into Poisson ones per replica

    def closed_requests(clients: int) -> LoadResult:
        per_replica = max(1, round(clients / replicas))  # a round-robin balancer gives each replica its share
        stream = closed_loop_requests(closed_loop_count(load, output), job.input_len, output, seed=load.seed,
                                      exponential_lengths=load.length_dist == "exponential")
        one = simulate(stream, decode_step=rep.decode_step, prefill=rep.prefill, max_batch=rep.max_num_seqs,
                       kv_capacity_tokens=rep.kv_capacity_tokens, concurrency=per_replica,
                       max_batched_tokens=rep.max_batched_tokens, prefix_hit=load.prefix_hit, policy=rep.policy,
                       mixed_step=rep.mixed_step, seed=load.seed)
        return replace(one, qps=one.qps * replicas, throughput_tokens_per_s=one.throughput_tokens_per_s * replicas,
                       requests_per_s=one.requests_per_s * replicas, concurrency=clients)

    def poisson(rate: float) -> LoadResult:
        stream = poisson_requests(rate / replicas, load.requests, job.input_len, output, seed=load.seed,
                                  exponential_lengths=load.length_dist == "exponential")
        one = simulate(stream, decode_step=rep.decode_step, prefill=rep.prefill, max_batch=rep.max_num_seqs,
                       kv_capacity_tokens=rep.kv_capacity_tokens, max_batched_tokens=rep.max_batched_tokens,
                       prefix_hit=load.prefix_hit, policy=rep.policy, mixed_step=rep.mixed_step)
        return replace(one, qps=one.qps * replicas, throughput_tokens_per_s=one.throughput_tokens_per_s * replicas)

    run: Callable[[float], LoadResult] = poisson
    closed: Callable[[int], LoadResult] = closed_requests
    turns = 1  # requests per session: the closed form counts requests, --qps sessions
    if sessions is not None:
        if load.disagg is not None:
            raise ConfigError("--disagg simulates independent requests; leave out --turns")
        count = closed_loop_count(load, output) if load.concurrency is not None else load.requests
        run, closed = session_runs(sessions, load, count, replicas)
        turns = sessions.work.turns
    if load.disagg is not None:
        return _disaggregated(plan, rep, catalog, load, replicas)
    slos = load.slos
    planned = (capacity(sessions.rep, slos=slos, cached_share=sessions.cached_share) if sessions
               else capacity(rep, slos=slos))
    planned = replace(planned, rate_qps=planned.rate_qps / turns)  # per replica; sessions/s with --turns
    best_rate, at_best, binding, at_capacity = None, None, None, {}
    if slos:
        total = planned.rate_qps * replicas
        # within a factor of 2 of the closed form (measured 0.8-1.25x), to about 0.5 %: 2 + 8 simulated rates
        bracket = dict(low=total / 2, high=total * 2, iterations=8) if total > 0 else {}
        best_rate, at_best = highest_rate(run, slos=slos, **bracket)  # type: ignore[arg-type]
        at_capacity = p99_ms(at_best) if at_best is not None else {}
        binding = slos.binding(at_capacity) if at_best is not None else None
        at_best = at_best if best_rate else None
    at_rate_p99 = planned.p99_s(load.qps / replicas * turns)
    rate_asked = load.concurrency is None or "qps" in load.model_fields_set
    target = slos.targets_ms.get(binding or "", None)
    return SloReport(run(load.qps) if rate_asked else None, target, binding or "e2e", best_rate, at_best,
                     rep.max_num_seqs, rep.kv_capacity_tokens, planned.rate_qps * replicas,
                     at_rate_p99 * 1e3 if math.isfinite(at_rate_p99) else None, replicas,
                     closed(load.concurrency) if load.concurrency is not None else None,
                     per_gpu_bytes=rep.memory.per_gpu_bytes, capacity_bytes=rep.memory.capacity_bytes,
                     turns=turns if sessions is not None else None,
                     expected_hit_rate=sessions.cached_share(planned.rate_qps * turns) if sessions else None,
                     slos=slos, binding_slo=binding, planned_binding=planned.binding,
                     p99_at_capacity_ms=tuple((k, at_capacity[k]) for k in slos.targets_ms if k in at_capacity))


def _disaggregated(plan: InferPlan, rep: Replica, catalog: Catalog, load: LoadTest, replicas: int) -> SloReport:
    """``--disagg XPYD`` (estimate/serving/disagg.py): X prefill and Y decode replicas of the job's layout."""
    job = plan.job
    split = pools(str(load.disagg))
    if not plan.engine.disaggregates.value:
        raise ConfigError(f"--disagg: {plan.engine.name} has no separate prefill and decode workers; use --engine "
                          "vllm, sglang or trtllm")
    if load.concurrency is None or "qps" in load.model_fields_set:
        raise ConfigError("--disagg simulates a closed loop: give --concurrency (not --qps)")
    if split.replicas != replicas:
        raise ConfigError(f"--disagg {load.disagg} needs {split.replicas} replicas of {job.replica_gpus} GPU(s): "
                          f"--count {split.replicas * job.replica_gpus}, not {job.count}")
    transfer_s = disagg.kv_transfer_s(plan, catalog)
    one = disagg.closed_loop(rep, split, load.concurrency, kv_transfer_s=transfer_s, requests=max(load.requests, 20),
                             seed=load.seed)
    layout = (f"disaggregated {load.disagg}: {split.prefill} prefill and {split.decode} decode replica(s) of "
              f"{job.replica_gpus} GPU(s); the mean batch is a decode replica's; each prompt's KV cache moves in "
              f"{transfer_s * 1e3:,.1f} ms")
    return SloReport(None, None, "e2e", None, None, rep.max_num_seqs, rep.kv_capacity_tokens,
                     0.0, None, replicas, one, layout, per_gpu_bytes=rep.memory.per_gpu_bytes,
                     capacity_bytes=rep.memory.capacity_bytes, slos=load.slos)
