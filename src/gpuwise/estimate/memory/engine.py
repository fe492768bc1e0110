"""What each serving engine holds besides weights and KV cache, and how it sizes its KV pool, from its code.

vLLM (worker/gpu_worker.py determine_available_memory, v1/worker/gpu_model_runner.py profile_run): the KV pool is
``gpu_memory_utilization`` x total memory minus the weights, the peak of a profiling run and non-torch memory. The
profiling run is one forward pass of ``max_num_batched_tokens`` tokens, then the sampler on ``max_num_seqs`` rows:
bf16 logits, their fp32 copy, the fp32 probabilities and the exponential noise random sampling divides them by
(v1/sample/ops/topk_topp_sampler.py random_sample), 14 bytes per vocabulary entry. Its defaults
(engine/arg_utils.py get_batch_defaults, OpenAI server): 8,192 tokens and 1,024 sequences on cards of 70 GiB or more
that are not A100s, else 2,048 and 256.
SGLang (srt/server_args.py, mem_fraction_static): weights and the KV pool share a static fraction of the card; the
activations and CUDA graphs live in the rest, sized by chunked_prefill_size.
TensorRT-LLM (KvCacheConfig.free_gpu_memory_fraction): the KV pool is that fraction of what is free once the engine
(weights and activation buffers for max_num_tokens) is loaded.
llama.cpp (llama-context.cpp graph_reserve): the compute buffer is the worst-case graph of one micro-batch
(n_ubatch 512) with ggml's allocator reusing memory, so its peak is the largest fp32 tensor set of one op -- the
logits of the micro-batch, or without flash attention the K.Q scores over the whole context; the KV cache is
allocated for the full context up front.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.estimate import constants as C
from gpuwise.estimate.dtypes import activation_bytes
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.architecture import Architecture

GIB = 2**30
VLLM_LARGE_CARD_BYTES = 70 * GIB  # vLLM get_batch_defaults: device_memory >= 70 GiB and "a100" not in the name
SAMPLER_BYTES_PER_LOGIT = 2 + 4 + 4 + 4  # bf16 logits, fp32 copy, probabilities, exponential noise
SGLANG_CHUNKED_PREFILL = 8192  # SGLang server_args chunked_prefill_size default on large cards
TRTLLM_MAX_NUM_TOKENS = 8192  # TensorRT-LLM BuildConfig max_num_tokens default
LLAMACPP_UBATCH = 512  # llama.cpp n_ubatch default


@dataclass(frozen=True)
class EngineActivations:
    bytes: float  # the engine's activation peak (or compute buffer)
    note: str  # how it was sized, for the estimate's assumptions


def vllm_batch_defaults(capacity_bytes: float, gpu_id: str) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) vLLM's OpenAI server picks on this card."""
    if capacity_bytes >= VLLM_LARGE_CARD_BYTES and "a100" not in gpu_id.lower():
        return 8192, 1024
    return 2048, 256


def forward_peak_bytes(arch: Architecture, tokens: int, job: InferJob) -> float:
    """The live tensors of a no-grad forward pass over ``tokens`` tokens at its widest op: the residual and hidden
    states, then the MLP's gate/up output and its activation (fused MoE: per routed token, vLLM's shared
    intermediate cache of max(2i, h) plus i), or attention's q, k, v and output."""
    e = activation_bytes(job.weights)
    tp = job.tp
    stream = 2 * tokens * arch.hidden * e
    qkv = (2 * arch.heads + 2 * arch.kv_heads) * arch.head_dim / tp
    attention = tokens * qkv * e
    if arch.experts:
        routed = tokens * arch.experts_per_token * (max(2 * arch.intermediate, arch.hidden) + arch.intermediate)
        mlp = (routed + 3 * tokens * arch.shared_expert_intermediate) * e / tp
    else:
        mlp = 3 * tokens * arch.intermediate * e / tp
    return stream + max(attention, mlp)


def engine_activations(arch: Architecture, job: InferJob, capacity_bytes: float, gpu_id: str,
                       hf_workspace: float) -> EngineActivations:
    """The activation memory ``job.engine`` holds on one GPU of the replica."""
    vocab = arch.vocab / job.tp if arch.lm_head else 0.0
    if job.engine == "vllm":
        tokens, seqs = vllm_batch_defaults(capacity_bytes, gpu_id)
        seqs = min(job.max_num_seqs or seqs, tokens)
        forward, sampler = forward_peak_bytes(arch, tokens, job), seqs * vocab * SAMPLER_BYTES_PER_LOGIT
        return EngineActivations(max(forward, sampler), (
            f"vLLM profiling peak: max(forward of max_num_batched_tokens {tokens:,} = {forward / GIB:.2f} GiB, sampler "
            f"over max_num_seqs {seqs:,} = {sampler / GIB:.2f} GiB) (vLLM get_batch_defaults, profile_run)"))
    if job.engine in ("sglang", "trtllm"):
        tokens = SGLANG_CHUNKED_PREFILL if job.engine == "sglang" else TRTLLM_MAX_NUM_TOKENS
        forward = forward_peak_bytes(arch, tokens, job)
        what = "chunked_prefill_size" if job.engine == "sglang" else "max_num_tokens"
        return EngineActivations(forward, f"{job.engine} activations: a forward of {what} {tokens:,} tokens")
    if job.engine == "llamacpp":
        ubatch = LLAMACPP_UBATCH
        ops = [ubatch * vocab * 4, ubatch * (3 * arch.intermediate + 2 * arch.hidden) * 4 / job.tp]
        if not job.flash_attn:
            ops.append(job.context * ubatch * arch.heads / job.tp * 4)
        return EngineActivations(max(ops), f"llama.cpp compute buffer: the widest op of a {ubatch}-token "
                                           "micro-batch (n_ubatch), fp32")
    return EngineActivations(hf_workspace, "transformers: the prefill of the whole batch at once")


def kv_budget_bytes(job: InferJob, capacity_bytes: float, weights: float, activations: float, overheads: float,
                    fraction: float | None) -> float:
    """The KV pool the engine makes on one GPU."""
    if fraction is None:  # transformers, llama.cpp: the cache grows (or is allocated for the context) in what is left
        return capacity_bytes - weights - activations - overheads
    if job.engine == "sglang":  # weights + KV pool = the static fraction; activations and graphs in the rest
        return capacity_bytes * fraction - weights
    if job.engine in ("trtllm", "lmdeploy"):  # a fraction of what the loaded engine leaves free
        return (capacity_bytes - weights - activations - overheads) * fraction
    graphs = C.VLLM_CUDA_GRAPHS.value  # vLLM captures its graphs after sizing the pool, from the rest
    return capacity_bytes * fraction - weights - activations - (overheads - graphs)
