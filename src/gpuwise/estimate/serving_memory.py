"""Inference memory per GPU: weights by storage format, KV cache, activation workspace, engine overhead.

``per_gpu`` is the minimum the job needs; a serving engine that pre-reserves a fraction of the card
(vLLM's gpu_memory_utilization ...) holds more, reported as ``engine_reserved_bytes``. The KV cache of
one token is 2 (K and V) x decoder layers x KV heads x head dim x bytes per element.
"""

from __future__ import annotations

from gpuwise.estimate import constants as C
from gpuwise.estimate.dtypes import activation_bytes
from gpuwise.estimate.kv_cache import describe_cache, kv_bytes_per_token, sequence_cache_bytes
from gpuwise.estimate.memory import COMPONENTS, MemoryEstimate, framework_overhead
from gpuwise.estimate.weights import weights
from gpuwise.workload.architecture import Architecture
from gpuwise.workload.job import InferJob


def weight_bytes(arch: Architecture, quant: str) -> float:
    """Stored weights (estimate/weights.py): GGUF quantizes every tensor; the other formats the block linears they
    cover, keeping embeddings, head and norms 16-bit."""
    return weights(arch, quant).bytes


def workspace_bytes(arch: Architecture, job: InferJob) -> float:
    """Live activations of the prefill of the whole batch: residual, MLP tensors, scores without FlashAttention,
    and fp32 logits of the last position of each sequence."""
    e = activation_bytes(job.weights)
    if arch.kind == "cnn":
        from gpuwise.estimate.cnn import convolutions

        return 2.0 * job.batch * max(c.out_hw**2 * c.c_out for c in convolutions(arch.config)) * e
    tokens = job.local_batch * job.input_len
    width = (arch.intermediate * max(arch.experts_per_token, 1) + arch.shared_expert_intermediate) / job.tp
    live = e * tokens * (2 * arch.hidden + 3 * width)
    if not job.flash_attn:
        live += e * job.local_batch * arch.heads / job.tp * job.input_len ** 2
    return live + 4 * job.local_batch * arch.vocab


def inference_memory(arch: Architecture, job: InferJob, *, capacity_bytes: float) -> MemoryEstimate:
    parts: dict[str, float] = dict.fromkeys(COMPONENTS, 0.0)
    stored = weights(arch, job.weights)
    # --ep keeps a whole copy of attention, dense and shared weights on every GPU and 1/ep of the routed experts
    parts["weights"] = (stored.bytes - stored.expert_bytes * (1 - 1 / job.ep)) / job.tp
    per_sequence = sequence_cache_bytes(arch, job, job.context)
    if job.mtp and arch.params.mtp:  # the MTP layers: stored like the model's average weight, one more cache layer
        parts["weights"] += arch.params.mtp * weight_bytes(arch, job.weights) / arch.total_params / job.tp
        per_sequence *= 1 + 1 / max(arch.decoder_layers, 1)
    parts["kv_cache"] = per_sequence * job.local_batch
    parts["activations"] = workspace_bytes(arch, job)
    engine_overhead = C.VLLM_OVERHEAD.value if job.engine in ("vllm", "sglang") else 0.0
    parts["framework_overhead"] = framework_overhead(job.tp) + engine_overhead
    parts["allocator_reserve"] = (parts["weights"] + parts["kv_cache"] + parts["activations"]) * (
        C.ALLOCATOR_RESERVE.value)
    needed = sum(parts.values())
    reserved = _engine_reserved(job, capacity_bytes, parts["weights"], needed)
    kv_budget = (reserved if reserved is not None else capacity_bytes) - (needed - parts["kv_cache"])
    max_concurrency = int(kv_budget // per_sequence) if per_sequence > 0 and kv_budget > 0 else 0
    per_token_all = kv_bytes_per_token(arch, job) * job.batch
    max_context = int(kv_budget // per_token_all) if per_token_all > 0 and kv_budget > 0 else 0
    return MemoryEstimate(
        breakdown_bytes=parts, capacity_bytes=capacity_bytes, cuda_context_bytes=C.CUDA_CONTEXT.value,
        engine_reserved_bytes=reserved, kv_budget_bytes=kv_budget if arch.decoder_layers else None,
        max_concurrency=max_concurrency if arch.decoder_layers else None,
        max_context=max_context if arch.decoder_layers else None,
        assumptions=_assumptions(arch, job), warnings=_warnings(arch, job),
        details={"kv_bytes_per_token": kv_bytes_per_token(arch, job), "kv_bytes_per_sequence": per_sequence},
    )


def _engine_reserved(job: InferJob, capacity: float, weights: float, needed: float) -> float | None:
    fraction = C.ENGINE_RESERVE_FRACTION.get(job.engine)
    if fraction is None:
        return None
    if "free" in fraction.unit:
        return max(needed, weights + (capacity - weights) * fraction.value)
    return max(needed, capacity * fraction.value)


def _assumptions(arch: Architecture, job: InferJob) -> tuple[str, ...]:
    notes = [f"{arch.name}: {arch.total_params:,} parameters; {_weights_note(arch, job.weights)}",
             f"KV cache {job.kv_dtype}: {describe_cache(arch)}"]
    if job.mtp and arch.params.mtp:
        notes.append(f"--mtp: {arch.params.mtp:,} multi-token-prediction parameters loaded beside the model, with "
                     "their KV cache; the speed is plain decoding (speculative acceptance is not modelled)")
    fraction = C.ENGINE_RESERVE_FRACTION.get(job.engine)
    if fraction is not None:
        notes.append(f"{job.engine} pre-reserves {fraction.value:.0%} {fraction.unit} ({fraction.source})")
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
