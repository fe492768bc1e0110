"""What each serving engine holds besides weights and KV cache, and how it sizes its KV pool, by its profile's rules.

The engine's profile (gpuwise/runtimes/engines.py) says which rule applies and where it comes from:

- activations ``profile_run`` (vLLM, v1/worker/gpu_model_runner.py profile_run): one forward pass of
  ``max_num_batched_tokens`` tokens, then the sampler on ``max_num_seqs`` rows at ``sampler_bytes_per_logit``;
- ``token_budget_forward`` (SGLang chunked_prefill_size, TensorRT-LLM max_num_tokens): a forward of the card's
  per-iteration token budget;
- ``compute_buffer`` (llama.cpp llama-context.cpp graph_reserve): the worst-case graph of one micro-batch with ggml's
  allocator reusing memory, so its peak is the largest fp32 tensor set of one op -- the logits of the micro-batch,
  or without flash attention the K.Q scores over the whole context;
- ``whole_prefill`` (transformers and the other eager runtimes): the prefill of the whole batch at once.

The KV pool (``kv_pool``): a share of total memory less the weights, the profiling peak and non-torch memory (vLLM:
it captures its graphs after sizing the pool, from the rest); weights and pool in a static share (SGLang); a share
of what the loaded engine leaves free (TensorRT-LLM, LMDeploy); or whatever is left (the rest).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.estimate import constants as C
from gpuwise.estimate.memory.breakdown import framework_overhead
from gpuwise.estimate.plan import InferPlan
from gpuwise.workload.model.architecture import Architecture

GIB = 2**30


@dataclass(frozen=True)
class EngineActivations:
    bytes: float  # the engine's activation peak (or compute buffer)
    note: str  # how it was sized, for the estimate's assumptions


def forward_peak_bytes(arch: Architecture, tokens: int, act_bytes: int, tp: int) -> float:
    """The live tensors of a no-grad forward pass over ``tokens`` tokens at its widest op: three hidden-sized
    tensors -- the residual, the normed input the decoder layer still holds, and the down (or output) projection's
    result being written while its input lives (vllm-project/vllm model_executor/models/llama.py LlamaMLP.forward:
    ``gate_up`` stays bound until the down projection returns) -- beside the MLP's gate/up output and its
    activation (fused MoE: per routed token, vLLM's shared intermediate cache of max(2i, h) plus i), or attention's
    q, k, v and output."""
    stream = 3 * tokens * arch.hidden * act_bytes
    qkv = (2 * arch.heads + 2 * arch.kv_heads) * arch.head_dim / tp
    attention = tokens * qkv * act_bytes
    if arch.experts:
        routed = tokens * arch.experts_per_token * (max(2 * arch.intermediate, arch.hidden) + arch.intermediate)
        mlp = (routed + 3 * tokens * arch.shared_expert_intermediate) * act_bytes / tp
    else:
        mlp = 3 * tokens * arch.intermediate * act_bytes / tp
    return stream + max(attention, mlp)


def engine_activations(plan: InferPlan, whole_prefill_bytes: float) -> EngineActivations:
    """The activation memory the plan's engine holds on one GPU of the replica."""
    arch, job, engine = plan.arch, plan.job, plan.engine
    rule = engine.activations.value
    vocab = arch.vocab / job.tp if arch.lm_head else 0.0
    tokens = plan.max_batched_tokens or 0
    if rule == "profile_run" and engine.sampler_bytes_per_logit is not None:
        seqs = min(plan.max_num_seqs, tokens)
        forward = forward_peak_bytes(arch, tokens, plan.act_bytes, job.tp)
        sampler = seqs * vocab * engine.sampler_bytes_per_logit.value
        return EngineActivations(max(forward, sampler), (
            f"{engine.name} profiling peak: max(forward of max_num_batched_tokens {tokens:,} = {forward / GIB:.2f} "
            f"GiB, sampler over max_num_seqs {seqs:,} = {sampler / GIB:.2f} GiB) ({engine.activations.source})"))
    if rule == "token_budget_forward" and tokens:
        return EngineActivations(forward_peak_bytes(arch, tokens, plan.act_bytes, job.tp), (
            f"{engine.name} activations: a forward of its {tokens:,}-token iteration budget on this card "
            f"({engine.card_rules.source})"))
    if rule == "compute_buffer" and engine.micro_batch_tokens is not None:
        return _compute_buffer(plan, engine.micro_batch_tokens.value, vocab)
    return EngineActivations(whole_prefill_bytes, f"{engine.name}: the prefill of the whole batch at once")


def _compute_buffer(plan: InferPlan, ubatch: int, vocab: float) -> EngineActivations:
    arch, job = plan.arch, plan.job
    ops = [ubatch * vocab * 4, ubatch * (3 * arch.intermediate + 2 * arch.hidden) * 4 / job.tp]
    if not job.flash_attn:
        ops.append(job.context * ubatch * arch.heads / job.tp * 4)
    return EngineActivations(max(ops), f"{plan.engine.name} compute buffer: the widest op of a {ubatch}-token "
                                       f"micro-batch, fp32 ({plan.engine.activations.source})")


def engine_overhead_bytes(plan: InferPlan) -> float:
    """CUDA context and libraries, NCCL buffers, the engine's CUDA graphs: the Python engines as measured on vLLM
    v0.19 (llm-d-planner's report), the others the CUDA context, cuBLAS workspace and NCCL buffers."""
    overhead = plan.engine.overhead
    if overhead == "measured_python_engine":
        non_torch = C.VLLM_NON_TORCH_TP.value if plan.job.tp > 1 else C.VLLM_NON_TORCH.value
        return non_torch + C.VLLM_CUDA_GRAPHS.value
    return framework_overhead(plan.job.tp, plan.gpu)


def kv_budget_bytes(plan: InferPlan, weights: float, activations: float, overheads: float) -> float:
    """The KV pool the engine makes on one GPU."""
    capacity, fraction, pool = plan.gpu.usable_memory_bytes, plan.memory_fraction, plan.engine.kv_pool.value
    if fraction is None or pool in ("grows", "whole_context"):  # the cache takes what is left
        return capacity - weights - activations - overheads
    if pool == "static_with_weights":  # weights + KV pool = the static fraction; activations and graphs in the rest
        return capacity * fraction - weights
    if pool == "of_free":  # a fraction of what the loaded engine leaves free
        return (capacity - weights - activations - overheads) * fraction
    overhead = plan.engine.overhead
    graphs = C.VLLM_CUDA_GRAPHS.value if overhead == "measured_python_engine" else 0.0
    return capacity * fraction - weights - activations - (overheads - graphs)  # graphs come after, from the rest


def engine_reserved_bytes(plan: InferPlan, weights: float, needed: float, fraction: float | None = None
                          ) -> float | None:
    """What a pooling engine holds on the card: its share of memory (of what the weights leave, for of_free);
    ``fraction`` the share its pool was sized from where the engine's version derives one for the card."""
    fraction, capacity = fraction or plan.memory_fraction, plan.gpu.usable_memory_bytes
    if fraction is None:
        return None
    pool = plan.engine.kv_pool.value
    if pool == "of_free":
        return max(needed, weights + (capacity - weights) * fraction)
    return max(needed, capacity * fraction)
