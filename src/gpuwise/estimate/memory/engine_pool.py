"""The KV pool a serving engine makes at start-up, as its own arithmetic sizes it, and what it prints about it.

vLLM (the profile's ``memory_profiles``, by version)::

    pool   = total x gpu_memory_utilization - weights - activation peak - non-torch [- CUDA graphs, from v0.21]
    blocks = floor(pool / (block_size x KV bytes per token over all layers))     # kv_cache_utils get_num_blocks
    tokens = blocks x block_size                                                 # "GPU KV cache size: N tokens"

``total`` is what cudaMemGetInfo reports, a little less than the datasheet's memory (the driver's share, and a
sixteenth more on GDDR cards with ECC on). The activation peak is the profiling forward: the token budget in V1;
max(max_model_len, 2048) in V0 unless chunked prefill turned on for a context over 32K. Worked example (vLLM 0.6.4,
RTX 3090, Llama-3.1-8B, max_model_len 20,000): 23.58 x 0.9 - 17.06 (weights 14.99 + activations) - 0.35 = 3.81 GiB;
a block of 16 tokens x 131,072 B = 2 MiB, so 1,952 blocks, 31,232 tokens.

SGLang (``static_with_weights``): pool = free memory at start x mem_fraction_static - weights
(model_runner.py profile_max_num_token); max_total_num_tokens = pool / KV bytes per token (page size 1).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuwise.catalog import GPU
from gpuwise.estimate import constants as C
from gpuwise.estimate.memory.engine import forward_peak_bytes
from gpuwise.estimate.memory.kv_cache import kv_bytes_per_token
from gpuwise.estimate.memory.kv_layout import KvLayout, kv_layout
from gpuwise.estimate.plan import InferPlan
from gpuwise.runtimes import rules
from gpuwise.runtimes.memory_profiles import MemoryProfile

GIB = 2**30


@dataclass(frozen=True)
class EnginePool:
    """One GPU's memory as the engine accounts it at start-up, in bytes."""

    total_bytes: float  # what CUDA reports as the card's memory
    activation_bytes: float  # the profiling peak beside the weights
    non_torch_bytes: float  # CUDA context, NCCL and all-reduce buffers
    graph_bytes: float  # the CUDA graphs' memory (0 when eager)
    graphs_in_pool: bool  # the graphs were taken before the pool was sized
    pool_bytes: float  # the KV pool the engine makes
    block_tokens: int
    blocks: int  # whole blocks of the pool
    note: str
    tokens: int = 0  # the token count the engine prints: blocks // layer groups x block size
    fraction: float | None = None  # the share of memory the pool was sized from (--mem-fraction or the default)
    blocks_per_request: int = 0  # blocks one request of the job's context takes (0: tokens / context)


def cuda_total_bytes(gpu: GPU) -> float:
    """The memory cudaMemGetInfo (hipMemGetInfo) reports: the datasheet's, less ECC's sixteenth on GDDR cards with
    ECC, less the driver's share."""
    memory = gpu.memory_bytes
    if gpu.ecc and gpu.memory_type.upper().startswith("GDDR"):
        memory *= 1 - C.GDDR_ECC_SHARE.value
    reserved = C.CUDA_RESERVED_SHARE_AMD if gpu.vendor == "amd" else C.CUDA_RESERVED_SHARE_NVIDIA
    return memory * (1 - reserved.value)


def _profiled_tokens(plan: InferPlan, profile: MemoryProfile) -> int:
    """Tokens of the profiling forward."""
    given = plan.job.max_num_batched_tokens
    if profile.profile_tokens == "budget" or given:
        return given or plan.max_batched_tokens or 2048
    long = profile.chunked_above_len is not None and plan.job.context > profile.chunked_above_len
    if long and profile.chunk_tokens and plan.gpu.vendor == "nvidia":
        return profile.chunk_tokens
    return max(plan.job.context, 2048)


def max_num_seqs(plan: InferPlan, profile: MemoryProfile | None) -> int:
    """The batch cap these versions take: --max-num-seqs, else the version's, else the card rule's."""
    if plan.job.max_num_seqs:
        return plan.job.max_num_seqs
    return profile.max_num_seqs if profile and profile.max_num_seqs else plan.max_num_seqs


def activation_bytes(plan: InferPlan, profile: MemoryProfile) -> tuple[float, str]:
    """The profiling peak: max(the forward of the profiled tokens, the sampler over max_num_seqs rows)."""
    arch, job, engine = plan.arch, plan.job, plan.engine
    tokens = _profiled_tokens(plan, profile)
    forward = forward_peak_bytes(arch, tokens, plan.act_bytes, job.tp)
    own = engine.sampler_bytes_per_logit.value if engine.sampler_bytes_per_logit else 4.0
    per_logit = profile.sampler_bytes_per_logit or own
    rows = min(max_num_seqs(plan, profile), tokens)
    sampler = rows * (arch.vocab if arch.lm_head else 0.0) * per_logit  # gathered whole on every rank
    return max(forward, sampler), (f"profiling peak max(forward of {tokens:,} tokens {forward / GIB:.2f} GiB, "
                                   f"sampler over {rows:,} rows {sampler / GIB:.2f} GiB)")


def non_torch_bytes(plan: InferPlan) -> float:
    """Memory outside PyTorch's allocator: the CUDA runtime; under tensor parallelism over an NVLink switch fabric
    also NCCL's NVLS and the custom all-reduce's registered buffers (the llm-d measurement at TP 2-4 on H100).
    Over PCIe (or a two-card bridge) NCCL keeps its small ring buffers and vLLM's custom all-reduce a few MiB."""
    if plan.gpu.vendor == "amd":
        return C.ROCM_NON_TORCH.value
    link = plan.gpu.scale_up_link or ""
    if plan.job.tp > 1 and link.startswith("nvlink") and not link.endswith("bridge"):
        return C.VLLM_NON_TORCH_TP.value
    return C.VLLM_NON_TORCH.value


def graph_bytes(plan: InferPlan, profile: MemoryProfile | None) -> float:
    """CUDA graph memory: one graph per captured size and piece (decoder layers + 1 pieces, the attention ops
    splitting them), each holding its kernels' nodes and parameters."""
    if plan.job.enforce_eager or plan.engine.graphs is None:
        return 0.0
    sizes = rules.captured_sizes(plan.engine.graphs, plan.rule, tp=plan.job.tp,
                                 max_num_seqs=max_num_seqs(plan, profile)) or ()
    return len(sizes) * (plan.arch.decoder_layers + 1) * C.VLLM_GRAPH_BYTES_PER_PIECE.value


def pool_fraction(plan: InferPlan, profile: MemoryProfile | None) -> float | None:
    """The share the pool is sized from: --mem-fraction, else the version's default for this card and TP, else
    the engine's."""
    if plan.job.memory_fraction is not None or profile is None:
        return plan.memory_fraction
    tp = plan.job.tp
    for least_tp, fraction in profile.fraction_by_tp:
        if tp >= least_tp:
            return fraction
    rule = profile.fraction_reserve
    if rule is None:
        return plan.memory_fraction
    card_mib = plan.gpu.memory_bytes / 2**20
    graph_seqs = plan.rule.graph_max_batch[1 if tp >= 4 else 0] if plan.rule.graph_max_batch else 0
    reserve = (rule.base_mib + max(plan.max_batched_tokens or 0, 2048) * rule.per_token_mib + tp * rule.per_rank_mib
               + graph_seqs * rule.per_graph_seq_mib)
    if card_mib > rule.floor_above_gib * 1024:
        reserve = max(reserve, rule.floor_mib)
    return round((card_mib - reserve) / card_mib, 3)


def engine_pool(plan: InferPlan, weights_bytes: float) -> EnginePool | None:
    """The pool the plan's engine makes on one GPU; None for an engine that keeps no pool of its own rules."""
    engine = plan.engine
    profile = engine.memory_profile(plan.job.engine_version)
    fraction = pool_fraction(plan, profile)
    per_token = kv_bytes_per_token(plan)
    if fraction is None or per_token <= 0:
        return None
    block = engine.kv_block_tokens.value if engine.kv_block_tokens else 1
    layout = kv_layout(plan, block, grouped=bool(profile and profile.groups_layers))
    total = cuda_total_bytes(plan.gpu)
    if engine.kv_pool.value == "static_with_weights":
        start_free = total - C.CUDA_CONTEXT.value
        pool = static_pool_bytes(free_at_start=start_free, fraction=fraction, weights=weights_bytes)
        note = (f"{engine.name}: KV pool = free memory at start {start_free / GIB:.2f} GiB x {fraction:.2f} - weights "
                f"{weights_bytes / GIB:.2f} GiB")
        return _laid_out(plan, EnginePool(total, 0.0, 0.0, 0.0, False, pool, block, 0, note, fraction=fraction),
                        layout, None)
    if profile is None or engine.kv_pool.value != "of_total":
        return None
    activations, how = activation_bytes(plan, profile)
    non_torch = non_torch_bytes(plan)
    graphs = graph_bytes(plan, profile)
    taken = graphs if profile.graphs_before_pool else 0.0
    pool = profiled_pool_bytes(total=total, fraction=fraction, weights=weights_bytes, activations=activations,
                               non_torch=non_torch, graphs=taken)
    note = (f"{engine.name}: KV pool = {total / GIB:.2f} GiB x {fraction:.2f} - weights {weights_bytes / GIB:.2f} - "
            f"{how} - non-torch {non_torch / GIB:.2f}" + (f" - CUDA graphs {graphs / GIB:.2f}" if taken else "")
            + f" GiB ({'V0' if profile.since < (0, 8) else 'V1'} memory profile)")
    return _laid_out(plan, EnginePool(total, activations, non_torch, graphs, bool(taken), pool, block, 0, note,
                                      fraction=fraction), layout, profile)


def profiled_pool_bytes(*, total: float, fraction: float, weights: float, activations: float, non_torch: float,
                        graphs: float = 0.0) -> float:
    """vLLM: what gpu_memory_utilization of the card leaves once the profile's peak (weights and activations),
    non-torch memory and, from v0.21, the CUDA graphs' estimate are taken."""
    return total * fraction - weights - activations - non_torch - graphs


def static_pool_bytes(*, free_at_start: float, fraction: float, weights: float) -> float:
    """SGLang (model_executor/model_runner.py profile_max_num_token): the memory free after loading less what
    (1 - mem_fraction_static) of the memory free at start keeps back, i.e. free at start x fraction - weights."""
    return free_at_start * fraction - weights


def whole_blocks(pool_bytes: float, block_tokens: int, per_token_bytes: float) -> int:
    """Blocks of ``block_tokens`` tokens the pool holds (kv_cache_utils get_num_blocks floors)."""
    return int(max(pool_bytes, 0.0) // (block_tokens * per_token_bytes))


def _laid_out(plan: InferPlan, pool: EnginePool, layout: KvLayout, profile: MemoryProfile | None) -> EnginePool:
    """The pool in whole blocks, the tokens the engine prints, and (V1) the blocks a full-length request takes."""
    blocks = layout.blocks(pool.pool_bytes)
    per_request = 0
    if profile is not None and profile.since >= (0, 8):
        budget = plan.job.max_num_batched_tokens or plan.max_batched_tokens or 2048
        per_request = layout.blocks_per_request(plan.job.context, budget)
    return replace(pool, block_tokens=layout.block_tokens, blocks=blocks, tokens=layout.tokens(blocks),
                   blocks_per_request=per_request)


def concurrency_at_len(plan: InferPlan, pool: EnginePool) -> float:
    """'Maximum concurrency for N tokens per request': V1 divides the whole blocks by those one request of the
    job's context (max_model_len) takes in every layer group (kv_layout.py); V0 the tokens by the length."""
    if pool.blocks_per_request:
        return pool.blocks / pool.blocks_per_request
    context = plan.job.context
    return pool.tokens / context if context else 0.0
