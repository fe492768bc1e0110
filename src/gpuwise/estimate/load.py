"""Wiring the serving simulator to the memory and roofline models for one model, card and job."""

from __future__ import annotations

from gpuwise.catalog import GPU, Catalog
from gpuwise.errors import NotEstimable
from gpuwise.estimate import constants as C
from gpuwise.estimate.estimate import require_tp
from gpuwise.estimate.perf import decode_step_s, prefill_s
from gpuwise.estimate.serving import LoadResult, ServingReport, highest_rate, poisson_requests, simulate, step_table
from gpuwise.estimate.serving_memory import inference_memory, kv_bytes_per_token
from gpuwise.workload.architecture import Architecture
from gpuwise.workload.job import InferJob


def serving_report(arch: Architecture, job: InferJob, gpu: GPU, catalog: Catalog, *, qps: float,
                   p99_ms: float | None = None, slo_key: str = "e2e", requests: int = 400, seed: int = 0,
                   exponential_lengths: bool = False) -> ServingReport:
    if not arch.decoder_layers:
        raise NotEstimable(f"{arch.name} does not generate tokens; serve-sim models decoder LLMs")
    require_tp(arch, job.tp)
    memory = inference_memory(arch, job.model_copy(update={"batch": 1}), capacity_bytes=gpu.memory_bytes)
    budget = (memory.engine_reserved_bytes or gpu.memory_bytes) - (memory.per_gpu_bytes - memory.breakdown_bytes[
        "kv_cache"])
    kv_tokens = budget / kv_bytes_per_token(arch, job)
    if kv_tokens < job.input_len + job.output_len:
        raise NotEstimable(f"{arch.name} leaves no room for one {job.input_len}+{job.output_len}-token sequence "
                           f"on {gpu.id} (KV budget {max(budget, 0) / 1e9:.1f} GB)")
    max_batch = int(C.MAX_NUM_SEQS.value)
    step = step_table(lambda b, c: decode_step_s(arch, job, gpu, catalog, batch=b, context=c), max_batch,
                      job.input_len + job.output_len / 2)
    prefill_cache: dict[int, float] = {}

    def prefill(tokens: int) -> float:
        bucket = max(job.input_len, -(-tokens // job.input_len) * job.input_len)
        if bucket not in prefill_cache:
            prefill_cache[bucket] = prefill_s(arch, job, gpu, catalog, tokens=bucket)
        return prefill_cache[bucket]

    def run(rate: float) -> LoadResult:
        stream = poisson_requests(rate, requests, job.input_len, max(job.output_len, 1), seed=seed,
                                  exponential_lengths=exponential_lengths)
        return simulate(stream, decode_step=step, prefill=prefill, max_batch=max_batch, kv_capacity_tokens=kv_tokens)

    at_rate = run(qps)
    best_rate, at_best = (None, None)
    if p99_ms is not None:
        best_rate, at_best = highest_rate(run, p99_ms=p99_ms, key=slo_key)
    return ServingReport(at_rate, p99_ms, slo_key, best_rate, at_best, max_batch, kv_tokens)
