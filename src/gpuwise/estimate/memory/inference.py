"""Inference memory per GPU: weights by storage format, KV cache, activation workspace, engine overhead.

``per_gpu`` is the minimum the job needs; a serving engine that pre-reserves a fraction of the card
(vLLM's gpu_memory_utilization ...) holds more, reported as ``engine_reserved_bytes``. The KV cache of
one token is 2 (K and V) x decoder layers x KV heads x head dim x bytes per element.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuwise.estimate import constants as C
from gpuwise.estimate.memory.breakdown import COMPONENTS, MemoryEstimate
from gpuwise.estimate.memory.engine import (
    engine_activations,
    engine_overhead_bytes,
    engine_reserved_bytes,
    kv_budget_bytes,
)
from gpuwise.estimate.memory.engine_pool import EnginePool, concurrency_at_len, engine_pool
from gpuwise.estimate.memory.kv_cache import describe_cache, kv_bytes_per_token, sequence_cache_bytes
from gpuwise.estimate.plan import InferPlan
from gpuwise.estimate.speed.expert_offload import host_expert_bytes, offload_note
from gpuwise.estimate.weights import weights
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.architecture import Architecture
from gpuwise.workload.model.convnets import network


def workspace_bytes(plan: InferPlan) -> float:
    """Live activations of the prefill of the whole batch: residual, MLP tensors, scores without FlashAttention,
    and fp32 logits of the last position of each sequence."""
    arch, job, e = plan.arch, plan.job, plan.act_bytes
    if arch.kind == "cnn":
        return 2.0 * job.batch * largest_map_elements(arch.config, job.image_size) * e
    tokens = job.local_batch * job.input_len
    width = (arch.intermediate * max(arch.experts_per_token, 1) + arch.shared_expert_intermediate) / job.tp
    live = e * tokens * (2 * arch.hidden + 3 * width)
    if not job.flash_attn:
        live += e * job.local_batch * arch.heads / job.tp * job.input_len ** 2
    return live + 4 * job.local_batch * arch.vocab


def inference_memory(plan: InferPlan) -> MemoryEstimate:
    arch, job, capacity_bytes = plan.arch, plan.job, plan.gpu.usable_memory_bytes
    parts: dict[str, float] = dict.fromkeys(COMPONENTS, 0.0)
    stored = plan.stored
    # --ep keeps a whole copy of attention, dense and shared weights on every GPU and 1/ep of the routed experts
    # the dense part sharded over --tp; routed experts over --ep GPUs when set, else TP-sharded with the rest
    experts_per_gpu = stored.expert_bytes / (job.ep if job.ep > 1 else job.tp)
    parts["weights"] = (stored.bytes - stored.expert_bytes) / job.tp + experts_per_gpu - host_expert_bytes(plan)
    per_sequence = sequence_cache_bytes(plan, job.context)
    if job.mtp and arch.params.mtp:  # the MTP layers: stored like the model's average weight, one more cache layer
        parts["weights"] += arch.params.mtp * stored.bytes / arch.total_params / job.tp
        per_sequence *= 1 + 1 / max(arch.decoder_layers, 1)
    parts["kv_cache"] = per_sequence * job.local_batch
    engine = engine_activations(plan, workspace_bytes(plan))
    parts["activations"] = engine.bytes
    parts["framework_overhead"] = engine_overhead_bytes(plan)
    pool = engine_pool(plan, parts["weights"]) if arch.decoder_layers else None
    if pool is not None and pool.activation_bytes:  # vLLM: its profile's peak, non-torch memory and CUDA graphs
        parts["activations"] = pool.activation_bytes
        parts["framework_overhead"] = pool.non_torch_bytes + pool.graph_bytes
    if plan.engine.allocator_reserve:  # an engine that sizes its pool exactly keeps no allocator slack
        parts["allocator_reserve"] = (parts["weights"] + parts["kv_cache"] + parts["activations"]) * (
            C.ALLOCATOR_RESERVE.value)
    needed = sum(parts.values())
    reserved = engine_reserved_bytes(plan, parts["weights"], needed, pool.fraction if pool is not None else None)
    kv_budget = pool.pool_bytes if pool is not None else kv_budget_bytes(
        plan, parts["weights"], parts["activations"], needed - parts["kv_cache"] - parts["weights"] - parts[
            "activations"])
    max_concurrency = int(kv_budget // per_sequence) if per_sequence > 0 and kv_budget > 0 else 0
    per_token = kv_bytes_per_token(plan)
    max_context = int(kv_budget // (per_token * job.batch)) if per_token > 0 and kv_budget > 0 else 0
    details = {"kv_bytes_per_token": per_token, "kv_bytes_per_sequence": per_sequence}
    if pool is not None:
        details.update(_pool_details(plan, pool))
    if job.cpu_moe:
        details["host_ram_bytes"] = host_expert_bytes(plan)
    if job.weights_bytes is not None:
        details["weights_bytes"] = job.weights_bytes
    if arch.decoder_layers and per_token > 0 and pool is None:
        details["kv_tokens_per_gpu"] = max(kv_budget, 0.0) / per_token
    return MemoryEstimate(
        breakdown_bytes=parts, capacity_bytes=capacity_bytes, cuda_context_bytes=C.CUDA_CONTEXT.value,
        engine_reserved_bytes=reserved, kv_budget_bytes=kv_budget if arch.decoder_layers else None,
        max_concurrency=max_concurrency if arch.decoder_layers else None,
        max_context=max_context if arch.decoder_layers else None,
        assumptions=(*_assumptions(plan), *((engine.note,) if pool is None or not pool.activation_bytes else ()),
                     *((pool.note,) if pool else ())), warnings=_warnings(arch, job),
        details=details,
    )


def _pool_details(plan: InferPlan, pool: EnginePool) -> dict[str, float]:
    """The pool as the engine prints it: bytes, whole blocks, tokens, graph memory, and how many requests of
    max_model_len (the job's context) it holds."""
    return {"kv_pool_bytes": max(pool.pool_bytes, 0.0), "kv_tokens_per_gpu": float(pool.tokens),
            "kv_blocks": float(pool.blocks), "kv_block_tokens": float(pool.block_tokens),
            "cuda_graph_bytes": pool.graph_bytes, "max_concurrency_at_len": concurrency_at_len(plan, pool)}


def _assumptions(plan: InferPlan) -> tuple[str, ...]:
    arch, job = plan.arch, plan.job
    notes = [f"{arch.name}: {arch.total_params:,} parameters; {_weights_note(arch, job.weights)}",
             f"KV cache {job.kv_dtype}: {describe_cache(arch)}"]
    if job.mtp and arch.params.mtp:
        notes.append(f"--mtp: {arch.params.mtp:,} multi-token-prediction parameters loaded beside the model, with "
                     "their KV cache; the speed is plain decoding (speculative acceptance is not modelled)")
    if plan.memory_fraction is not None and job.memory_fraction is not None:
        notes.append(f"{job.engine} sizes its KV pool from {plan.memory_fraction:.0%} (--mem-fraction)")
    notes += [c.describe() for c in plan.choices if c.what != "weights"]
    if job.cpu_moe:
        notes.append(offload_note(plan))
    if job.weights_bytes is not None:
        # a scale of 0 (a header of no bytes, which the reader refuses) would leave the format's figure unknown
        formula = f"{plan.stored.bytes / plan.stored.scale:,.0f}" if plan.stored.scale > 0 else "an unknown number"
        notes.append(f"weights: {job.weights_bytes:,.0f} bytes as the checkpoint's header gives them (--weights), "
                     f"where {job.weights} would store {formula}; held, and read by each decode step, as the file "
                     "has them")
    return tuple(notes)


def _weights_note(arch: Architecture, quant: str) -> str:
    w = weights(arch, quant)
    if quant in ("bf16", "fp16", "fp32"):
        return f"weights as {quant}"
    covered = "the routed experts" if w.experts_only else "every block linear"
    own = arch.checkpoint is not None and arch.checkpoint.quant == quant
    origin = f" (as the checkpoint ships: {arch.checkpoint.source})" if own and arch.checkpoint else ""
    return f"{covered} as {quant} at {w.bits:.4g} bits per weight with its scales{origin}, the rest 16-bit"


def _warnings(arch: Architecture, job: InferJob) -> tuple[str, ...]:
    warnings = []
    if arch.max_positions and job.context > arch.max_positions:
        warnings.append(f"context {job.context} exceeds the model's {arch.max_positions} positions")
    if not arch.decoder_layers:
        warnings.append(f"{arch.name} is not a generative model: no KV cache, the workspace is one forward pass")
    if job.mtp and not arch.params.mtp:
        warnings.append(f"--mtp: {arch.name}'s checkpoint has no multi-token-prediction layers; nothing is added")
    return tuple(warnings)


def largest_map_elements(config: Mapping[str, Any], image: int | None = None) -> float:
    """The largest feature map of one image (inference keeps about two alive)."""
    return max(c.out_hw**2 * c.c_out for c in network(config, image).convs)
