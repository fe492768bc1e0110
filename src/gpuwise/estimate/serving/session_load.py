"""serve-sim and the closed form for a session workload (``--turns``): the replica's prefix cache from the engine's
profile, the host tier from ``--kv-offload-gib`` and the card's host link, and the runs at a session rate or with
closed-loop users (serving/sessions.py, serving/prefix_cache.py)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from gpuwise.catalog import GPU, Catalog
from gpuwise.errors import ConfigError, NotEstimable
from gpuwise.estimate.memory.kv_cache import kv_bytes_per_token
from gpuwise.estimate.plan import InferPlan
from gpuwise.estimate.serving.capacity import Replica
from gpuwise.estimate.serving.prefix_cache import PrefixCache
from gpuwise.estimate.serving.sessions import SessionWorkload, check_context, expected_hit_rate, session_stream
from gpuwise.estimate.serving.simulate import SESSION_STEADY_FACTOR, LoadResult, Sessions, simulate
from gpuwise.estimate.speed.inference import prefill_attention_pair_s
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.jobs.load_test import LoadTest
from gpuwise.workload.model.architecture import Architecture

MAX_SESSION_TOKENS = 500_000  # output tokens of one session run grown for steady state: about two seconds on one core


def session_workload(turns: int | None, think_time_s: float | None, system_prompt_len: int,
                     job: InferJob) -> SessionWorkload | None:
    """The sessions of ``--turns`` (None for a stream of independent requests), each turn of the job's lengths."""
    if turns is None:
        return None
    return SessionWorkload(turns, think_time_s or 0.0, system_prompt_len, job.input_len, max(job.output_len, 1))


def session_job(arch: Architecture, job: InferJob, work: SessionWorkload) -> InferJob:
    """The job the replica is planned on: a turn's mean prompt (the step table's and the closed form's centre)."""
    check_context(work, arch.max_positions, arch.name)
    return job.model_copy(update={"input_len": max(1, round(work.mean_prompt_len))})


@dataclass(frozen=True)
class SessionServing:
    """What serve-sim runs a session workload with: the replica, its cache's settings, and the workload."""

    work: SessionWorkload
    rep: Replica
    granularity: int  # 0: the engine reuses no prefix
    host_tokens: float  # tokens of KV the host tier keeps per GPU
    link_bytes_per_s: float
    kv_bytes_per_token: float  # on each GPU of the replica
    attention_pair_s: float = 0.0  # prefill attention per (query, key) pair (speed/inference.py)

    def cache(self) -> PrefixCache:
        return PrefixCache(granularity=self.granularity, shared_tokens=self.work.system_prompt_len if self.granularity
                           else 0, host_tokens=self.host_tokens, reload_s=self.reload_s, recompute_s=self.recompute_s)

    def reload_s(self, tokens: int) -> float:
        """Seconds to copy ``tokens`` tokens' KV from host memory over the card's host link."""
        return tokens * self.kv_bytes_per_token / self.link_bytes_per_s if self.link_bytes_per_s > 0 else math.inf

    def recompute_s(self, tokens: int, after: int) -> float:
        """Seconds the prefill of ``tokens`` more prompt tokens adds to a chunk of ``after``."""
        return self.rep.prefill(after + tokens) - self.rep.prefill(after) if after > 0 else self.rep.prefill(tokens)

    def cached_share(self, rate: float) -> float:
        """The closed form's hit rate at ``rate`` turns per second: the sessions live at once by Little's law
        (session rate x a session's length, its turns at an idle replica's latency plus the think time), and the
        pool less what the running turns hold."""
        job = self.rep.job
        turn_s = self.rep.prefill(job.input_len) + (job.output_len - 1) * self.rep.step_at(1)
        live = rate / self.work.turns * self.work.session_s(turn_s)
        running = rate * turn_s * (job.input_len + job.output_len)
        return expected_hit_rate(self.work, concurrent_sessions=live, granularity=self.granularity,
                                 pool_tokens=max(self.rep.kv_capacity_tokens - running, 0.0))


def session_serving(plan: InferPlan, rep: Replica, gpu: GPU, catalog: Catalog, work: SessionWorkload, *,
                    kv_offload_gib: float) -> SessionServing:
    """The replica's prefix cache for ``work``: the engine's reuse, and ``kv_offload_gib`` of host memory per
    replica where the engine offloads; a one-line error where the last turn cannot fit or offload cannot be had."""
    if rep.kv_capacity_tokens < work.last_context:
        raise NotEstimable(f"the last turn's context ({work.last_context:,} tokens) does not fit the KV pool of "
                           f"{rep.kv_capacity_tokens:,.0f} tokens on {gpu.id}; use fewer --turns or a larger card")
    reuse = plan.engine.kv_reuse
    per_token = kv_bytes_per_token(plan.with_job(batch=1, count=plan.job.replica_gpus, nodes=1))
    link = catalog.interconnects.get(gpu.native_link)
    host_tokens = 0.0
    if kv_offload_gib > 0:
        if reuse is None or reuse.value.offload is None:
            raise ConfigError(f"--kv-offload-gib: {plan.engine.name} keeps no evicted prefixes in host memory; use "
                              "--engine vllm, sglang or trtllm, or leave it out")
        if link is None:
            raise ConfigError(f"--kv-offload-gib: {gpu.id} has no host link of its own in the catalog; leave it out")
        host_tokens = kv_offload_gib * 2**30 / plan.job.replica_gpus / per_token if per_token > 0 else 0.0
    granularity = reuse.value.granularity_tokens if reuse is not None else 0
    if granularity:  # the running turns share one copy of the system prompt: more of them fit the pool
        shared = work.system_prompt_len
        own = max(rep.job.input_len + rep.job.output_len - shared, 1)
        rep = replace(rep, kv_sequences=max(1, int((rep.kv_capacity_tokens - shared) // own)))
    one = plan.with_job(batch=1, count=plan.job.replica_gpus, nodes=1)
    return SessionServing(work, rep, granularity, host_tokens, link.achieved_bytes_per_s if link is not None else 0.0,
                          per_token, prefill_attention_pair_s(one, catalog))


def session_runs(serving: SessionServing, load: LoadTest, count: int,
                 replicas: int) -> tuple[Callable[[float], LoadResult], Callable[[int], LoadResult]]:
    """(run at a rate of sessions per second, run with closed-loop users), over ``replicas`` replicas. Unless
    --requests was given, a run too short for steady state (fewer than SESSION_STEADY_FACTOR x the sessions live at
    once) runs again with enough sessions, within MAX_SESSION_TOKENS."""
    rep, work = serving.rep, serving.work
    given = "requests" in load.model_fields_set
    most = max(2, MAX_SESSION_TOKENS // (work.turns * work.output_len))

    def once(sessions: int, qps: float | None, users: int | None) -> LoadResult:
        stream = session_stream(work, sessions, qps=qps, users=users, seed=load.seed)
        one = simulate(stream.requests, decode_step=rep.decode_step, prefill=rep.prefill,
                       max_batch=rep.max_num_seqs, kv_capacity_tokens=rep.kv_capacity_tokens,
                       max_batched_tokens=rep.max_batched_tokens, policy=rep.policy, mixed_step=rep.mixed_step,
                       seed=load.seed, follow=stream.follow,
                       sessions=Sessions(stream.session_of, serving.cache(), serving.attention_pair_s,
                                         planned_keys=rep.job.input_len / 2))
        length_s = work.turns * (one.e2e_ms[0] / 1e3) + (work.turns - 1) * work.think_time_s
        live = users if users is not None else (qps or 0.0) * length_s
        return replace(one, sessions=sessions, live_sessions=live)

    def go(qps: float | None, users: int | None) -> LoadResult:
        sessions = max(2, -(-count // work.turns))
        one = once(sessions, qps, users)
        for _ in range(3):  # a longer run meets more load, so its sessions last longer: grow it again
            wanted = min(math.ceil(SESSION_STEADY_FACTOR * one.live_sessions * 1.25), most)
            if given or one.steady or one.saturated or wanted <= sessions:
                break
            sessions, one = wanted, once(wanted, qps, users)
        return one

    def run(rate: float) -> LoadResult:
        one = go(rate / replicas, None)
        return replace(one, qps=rate, throughput_tokens_per_s=one.throughput_tokens_per_s * replicas,
                       requests_per_s=one.requests_per_s * replicas)

    def closed(users: int) -> LoadResult:
        one = go(None, max(1, round(users / replicas)))
        return replace(one, qps=one.requests_per_s * replicas / work.turns, saturated=False, concurrency=users,
                       throughput_tokens_per_s=one.throughput_tokens_per_s * replicas,
                       requests_per_s=one.requests_per_s * replicas)

    return run, closed
