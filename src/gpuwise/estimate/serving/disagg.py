"""Disaggregated prefill and decode (``serve-sim --disagg XPYD``): X replicas only prefill, Y only decode.

A prompt never shares an iteration with decoding sequences: a prefill replica runs prompts in chunks of its token
budget and produces the first token; the request's KV cache then moves to a decode replica (NVIDIA Dynamo, SGLang
``--disaggregation-mode``, vLLM's P/D connectors, TensorRT-LLM disaggregated serving), which generates the rest in
steps that hold only decoding sequences.

A closed loop of C clients settles where the rate through both pools agrees: each client's cycle is its TTFT, the
KV transfer and its (output - 1) decode steps, so the rate is C / cycle; the decode replicas hold the clients that
are decoding (C x decode time / cycle, split over Y); the prefill pool is simulated at that rate (the discrete-event
scheduler of ``simulate.py``, one-token requests). A few rounds of that fixed point converge, since TTFT grows with
the rate and the rate falls with TTFT.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from gpuwise.catalog import Catalog
from gpuwise.errors import ConfigError
from gpuwise.estimate import constants as C
from gpuwise.estimate.memory.kv_cache import kv_bytes_per_token
from gpuwise.estimate.plan import InferPlan
from gpuwise.estimate.serving.capacity import Replica
from gpuwise.estimate.serving.simulate import LoadResult, poisson_requests, simulate
from gpuwise.estimate.speed.parallel import GPUS_PER_NODE, links

FIXED_POINT_ROUNDS = 6  # the rate and TTFT settle within a few percent in three or four


@dataclass(frozen=True)
class Pools:
    prefill: int
    decode: int

    @property
    def replicas(self) -> int:
        return self.prefill + self.decode


def pools(text: str) -> Pools:
    """'1P3D' -> one prefill and three decode replicas (the LoadTest field validated the shape)."""
    found = re.fullmatch(r"(\d+)P(\d+)D", text)
    if found is None:
        raise ConfigError(f"--disagg {text[:20]!r} is not XPYD; use e.g. 1P3D (one prefill and three decode replicas)")
    return Pools(int(found.group(1)), int(found.group(2)))


def kv_transfer_s(plan: InferPlan, catalog: Catalog) -> float:
    """One prompt's KV cache from a prefill replica to a decode one: over the scale-up link inside a node, the
    network when the pools span nodes (the replica's GPUs send their shards in parallel)."""
    job = plan.job
    nodes = math.ceil(job.count / GPUS_PER_NODE)
    path = links(plan.gpu, catalog, network=job.network, nodes=nodes, slot_link=job.slot_link)
    link = path.inter if nodes > 1 and path.inter is not None else path.intra
    size = job.input_len * kv_bytes_per_token(plan)
    return size / link.achieved_bytes_per_s + C.COLLECTIVE_LATENCY.value


def _prefill_pool(rep: Replica, rate: float, pools_: Pools, requests: int, seed: int) -> LoadResult:
    stream = poisson_requests(rate / pools_.prefill, requests, rep.job.input_len, 1, seed=seed)
    return simulate(stream, decode_step=rep.decode_step, prefill=rep.prefill, max_batch=rep.max_num_seqs,
                    kv_capacity_tokens=rep.kv_capacity_tokens, max_batched_tokens=rep.max_batched_tokens,
                    policy=rep.policy)


def _decode_step_s(rep: Replica, pools_: Pools, clients: int, ttft_s: float, kv_transfer_s: float) -> float:
    """The decode step at the batch the decode replicas hold: the clients that are decoding, split over Y (their
    share of each cycle is the decode time over the whole cycle, and the step time sets the decode time)."""
    output = max(rep.job.output_len, 1)
    tpot_s = rep.step_at(1)
    for _ in range(FIXED_POINT_ROUNDS):
        decode_s = (output - 1) * tpot_s
        share = decode_s / max(ttft_s + kv_transfer_s + decode_s, 1e-12)
        tpot_s = rep.step_at(max(1, min(rep.batch_limit, round(clients * share / pools_.decode))))
    return tpot_s


def closed_loop(rep: Replica, pools_: Pools, clients: int, *, kv_transfer_s: float, requests: int,
                seed: int) -> LoadResult:
    """Steady state of ``clients`` closed-loop clients over the two pools."""
    output = max(rep.job.output_len, 1)
    ttft_s, tpot_s = rep.prefill(rep.job.input_len), rep.step_at(1)
    rate, prefilled = 0.0, None
    for _ in range(FIXED_POINT_ROUNDS):
        tpot_s = _decode_step_s(rep, pools_, clients, ttft_s, kv_transfer_s)
        rate = clients / (ttft_s + kv_transfer_s + (output - 1) * tpot_s)
        prefilled = _prefill_pool(rep, rate, pools_, requests, seed)
        ttft_s = prefilled.ttft_mean_ms / 1e3
    assert prefilled is not None
    after_first_s = kv_transfer_s + (output - 1) * tpot_s
    cycle = ttft_s + after_first_s
    p50, p90, p99 = (t + after_first_s * 1e3 for t in prefilled.ttft_ms)
    tpot_ms = tpot_s * 1e3
    batch = clients * (output - 1) * tpot_s / cycle / pools_.decode
    # busy GPUs for energy.py: the prefill pool as simulated, a decode replica whenever it holds a sequence (its
    # batch Poisson-like, empty e^-batch of the time); the pools' mean busy fraction and the prefill part of it
    busy_p, busy_d = (prefilled.busy_fraction or 0.0) * pools_.prefill, (1 - math.exp(-batch)) * pools_.decode
    return LoadResult(
        qps=rate, requests=prefilled.requests, ttft_ms=prefilled.ttft_ms, e2e_ms=(p50, p90, p99),
        mean_queue_ms=prefilled.mean_queue_ms, mean_batch=batch,
        throughput_tokens_per_s=rate * output, saturated=prefilled.saturated, ttft_mean_ms=ttft_s * 1e3,
        tpot_ms=(tpot_ms, tpot_ms, tpot_ms), tpot_mean_ms=tpot_ms, requests_per_s=rate, concurrency=clients,
        busy_fraction=(busy_p + busy_d) / pools_.replicas, prefill_share=busy_p / max(busy_p + busy_d, 1e-12))
