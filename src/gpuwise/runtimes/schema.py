"""The typed shape of a runtime profile: what an inference engine or a training framework does unless told otherwise.

One record per runtime (``runtimes/engines.py``, ``runtimes/frameworks.py``); every field that states a fact about the
runtime carries its source -- a file at a commit, or a documentation page -- in a :class:`Sourced`. Rules that depend
on the card (vLLM's batch defaults, SGLang's chunk size) are data too (:class:`CardRule`), read by the functions of
``runtimes/rules.py``; no code outside this package compares a runtime's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

from gpuwise.fitted import FittedConstant
from gpuwise.runtimes.memory_profiles import MemoryProfile, version_tuple

T = TypeVar("T")

KvPool = Literal["of_total", "static_with_weights", "of_free", "grows", "whole_context"]
"""How an engine sizes its KV cache:
    of_total             a fraction of the card's total memory, less the weights, the profiling peak and the rest
                         (vLLM gpu_memory_utilization)
    static_with_weights  weights and KV pool together take a static fraction; activations and graphs the rest
                         (SGLang mem_fraction_static)
    of_free              a fraction of what the loaded engine leaves free (TensorRT-LLM, LMDeploy)
    grows                no pool: the cache grows as sequences do, in what is left (transformers, exllamav2)
    whole_context        allocated for the whole context up front (llama.cpp), in what is left"""

Activations = Literal["profile_run", "token_budget_forward", "compute_buffer", "whole_prefill"]
"""What an engine's activation memory is sized by:
    profile_run           a forward of the token budget and the sampler over max_num_seqs rows (vLLM profile_run)
    token_budget_forward  a forward of the per-iteration token budget (SGLang chunked_prefill_size, TensorRT-LLM
                          max_num_tokens)
    compute_buffer        ggml's worst-case graph of one micro-batch (llama.cpp n_ubatch)
    whole_prefill         the prefill of the whole batch at once (transformers and other eager runtimes)"""

Overhead = Literal["measured_python_engine", "cuda_context"]
"""What a process holds besides tensors: vLLM's measured non-torch memory and CUDA-graph pools (SGLang's are
counted alike), or the CUDA context, cuBLAS workspace and NCCL buffers."""


KvEviction = Literal["lru", "slot"]
"""Which cached prefix an engine drops when it needs room:
    lru   the least recently used unreferenced blocks or tree nodes, a request's tail first (vLLM, SGLang, TensorRT-LLM)
    slot  a slot keeps the last prompt it served until another request takes the slot (llama.cpp server)"""


@dataclass(frozen=True)
class KvReuse:
    """How an engine reuses the KV cache of earlier prompts (automatic prefix caching, RadixAttention, block reuse).

    A prompt hits its longest cached prefix, in whole units of ``granularity_tokens`` (a block or a page), and at most
    all but its last token: that token is prefilled again, since its logits give the first output token. Cached
    blocks no running request references stay in the pool until ``eviction`` takes them for new work.
    ``offload`` names the engine's way of keeping evicted prefixes in host memory (None: it has none)."""

    granularity_tokens: int
    eviction: KvEviction
    offload: str | None = None


AdapterBytes = tuple[float, float, float, float]
"""Bytes a LoRA adapter moves per token beside its base linear, per element of the linear's input and output: forward
per input element, forward per output element, backward per input element, backward per output element."""


@dataclass(frozen=True)
class Sourced(Generic[T]):
    """A value and where it comes from (a file at a commit, a documentation page, or ``gpuwise:`` and why)."""

    value: T
    source: str


@dataclass(frozen=True)
class CardRule:
    """A default that depends on the card: it applies to cards with at least ``at_least_gib`` and less than
    ``below_gib`` GiB of memory whose name contains none of ``unless_named``; the first rule that applies wins."""

    below_gib: float = float("inf")
    at_least_gib: float = 0.0
    unless_named: tuple[str, ...] = ()
    max_num_seqs: int | None = None  # sequences a replica batches (None: no cap, the KV pool bounds it)
    max_batched_tokens: int | None = None  # tokens one iteration schedules (chunked prefill), None: no budget
    graph_max_batch: tuple[int, int] | None = None  # the largest captured decode batch at TP < 4 and TP >= 4


@dataclass(frozen=True)
class GraphCapture:
    """The decode batch sizes an engine captures as CUDA graphs by default.

    ``sizes``: explicit sizes and ``(start, stop, step)`` ranges, in ``unit`` (tokens: a size of T holds T / (1 + K)
    sequences of K speculative tokens). The largest captured size is the smallest of ``largest_cap``,
    ``largest_per_sequence`` x max_num_seqs x (1 + K), the token budget, and the card rule's ``graph_max_batch``,
    each where given. A batch between two captured sizes is padded up when ``pads``, else it runs without a graph,
    as does any batch above the largest."""

    sizes: tuple[int | tuple[int, int, int], ...]
    unit: Literal["tokens", "sequences"]
    pads: bool
    source: str
    largest_cap: int | None = None
    largest_per_sequence: int | None = None
    largest_from_card: bool = False


@dataclass(frozen=True)
class Kernels:
    """What the runtime's attention, MoE, norm and loss run as (names as its own code or docs give them)."""

    attention: Sourced[str]
    moe: Sourced[str] | None = None
    moe_call_s: Sourced[float] | None = None  # one MoE layer's grouped-GEMM call at decode, beyond the bytes it reads
    norm: Sourced[str] | None = None
    loss: Sourced[str] | None = None
    # the NVIDIA compute capability from which AWQ/GPTQ matmuls dequantize inside the GEMM (Marlin); below it, on
    # other vendors, and where None, a batched GEMM unpacks the 4-bit weights to 16-bit first (AutoAWQ's path)
    int4_fused_from: Sourced[float] | None = None
    # (format, below compute capability, intermediate multiple, hidden multiple): the MoE kernel the engine picks for
    # that format on those cards pads each expert matrix to whole tiles when it loads them (vLLM's MXFP4 Marlin)
    expert_padding: Sourced[tuple[str, float, int, int]] | None = None


@dataclass(frozen=True)
class HostOps:
    """The operators an eager runtime dispatches from Python, per module, as its own code runs them: aten operators
    including views, since each costs host time even when it launches no kernel (``benchmarks/host_ops.py`` traces
    them with a TorchDispatchMode; ``tests/test_host_ops.py`` checks the sums against that trace)."""

    norm: int  # one RMSNorm: pow, mean, add, rsqrt, mul, mul by the weight
    norm_casts: int  # its to(float32) and back when activations are 16-bit
    linear: int  # one nn.Linear on a 3-D input: t, mm and the views around them
    rotary: int  # apply_rotary_pos_emb on q and k (rotate_half's slices, neg and cat)
    attention: int  # the views and transposes of q, k, v, the cache update and the attention call
    residual: int  # the two residual adds
    gated_activation: int  # act(gate) * up
    moe: int  # a routed-expert block besides its router linear: top-k, sort, histogram, grouped GEMMs, scatter
    per_step: int  # what one decode step runs outside the layers: embedding, final norm, LM head, the generate loop
    per_forward: int  # what one plain forward runs outside the layers (an encoder's: embeddings, final norm, head)
    source: str
    layer_norm: int = 1  # torch.nn.LayerNorm: one native operator (native_layer_norm), no casts
    per_expert: int = 0  # a MoE block that loops over its experts in Python (transformers' "eager" experts): operators
    # per expert that received tokens -- index, the expert's linears, activation, weighting, index_add; ``moe`` is then
    # what the block runs around the loop. 0: one grouped kernel runs them all (its operators are all in ``moe``)


LossKernel = Literal["fp32_logits", "fused_linear", "in_place"]
"""What a stack's cross-entropy moves per logit (speed/stacks.py ``loss_op``):
    fp32_logits   the logits upcast to fp32 and log_softmax over them, forward and backward (torch's cross_entropy)
    fused_linear  the logits made a chunk at a time in 16 bits, the loss and its gradient computed in place in the
                  forward pass (Liger's fused linear cross-entropy): nothing left for backward
    in_place      one kernel reads the 16-bit logits forward; backward reads them and writes the gradient in place"""


@dataclass(frozen=True)
class Fusions:
    """Which memory-bound operators of a layer a stack runs as one fused kernel each; the others run as the model's
    own modules (op by op in transformers' RMSNorm, rotary and activation; one native kernel for a LayerNorm). The
    bytes each fused kernel moves are worked out beside it in speed/stacks.py ``_fused_parts``."""

    source: str
    norm: bool = False  # RMSNorm: one kernel reads x and writes y; backward reads dy and x, writes dx
    residual_in_norm: bool = False  # the residual add runs inside the next norm's kernel (writes sum and normed)
    activation: bool = False  # SwiGLU / GeGLU: one kernel reads gate and up, writes their product
    rotary: bool = False  # RoPE on q and k in one kernel, in place
    loss: LossKernel = "fp32_logits"  # the cross-entropy it runs for --loss fused
    dispatches: int | None = None  # operators Python dispatches for one fused module in place of the model's (views,
    # allocations and the kernel launch), where it swaps modules of an eager runtime; None: not counted
    library: str = ""  # whose kernels they are, as an estimate names them (Liger, Unsloth, Transformer Engine)


UNFUSED = Fusions(source="the model's own modules: transformers' RMSNorm, rotary and activation op by op, "
                         "torch.nn.functional.cross_entropy over fp32 logits")


@dataclass(frozen=True)
class Requirement:
    """A catalog feature the runtime needs of the card's stack (gpuwise.catalog.FEATURES), and the refusal."""

    feature: str
    message: str  # with {gpu} and {stack}


@dataclass(frozen=True)
class TiledDecode:
    """A VAE decode retried in tiles after an out-of-memory error: ``passes`` tilings of ``tile_latent`` latent pixels
    square (the others ``tile_latent // 2`` by ``2 * tile_latent``), each tile overlapping its neighbour by
    ``overlap_latent``, averaged."""

    tile_latent: int
    overlap_latent: int
    passes: int


@dataclass(frozen=True)
class ImageRuntime:
    """How an image runtime holds a pipeline: the offload modes it takes (the first its default, each with the
    runtime's own spelling), whether it streams what does not fit, and what it keeps free."""

    offload_modes: Sourced[Mapping[str, str]]  # --offload value -> the runtime's own setting
    streams_by_free_memory: Sourced[bool]  # loads what fits in free memory, streams the rest per forward
    kept_free_bytes: Sourced[float]  # memory it never fills (for the driver, the desktop, other programs)
    working_floor_bytes: Sourced[float]  # the least it keeps free for a forward's activations beside the weights
    copies_pinned_overlapped: Sourced[bool]  # streamed weights come from pinned memory on a stream of their own
    fp8_every_linear: Sourced[bool]  # fp8 weights for every linear layer (False: norms and modulation kept 16-bit)
    tiled_decode: Sourced[TiledDecode] | None = None  # None: a decode that does not fit fails


CLIENT_TURNAROUND = FittedConstant("client_turnaround_s", "s")  # one instance: a dataclass default


@dataclass(frozen=True)
class EngineProfile:
    """An inference engine: the formats it runs, how it takes memory, its batch defaults and how it launches work."""

    id: str
    name: str
    weight_formats: Sourced[frozenset[str] | None]  # None: every --quant format
    formats_instead: str  # what to do when a format is not in weight_formats
    kv_formats: Sourced[frozenset[str]]
    kv_pool: Sourced[KvPool]
    activations: Sourced[Activations]
    card_rules: Sourced[tuple[CardRule, ...]]
    kernels: Kernels
    memory_fraction: Sourced[float] | None = None  # the default share of memory the KV pool is sized from
    kv_block_tokens: Sourced[int] | None = None  # tokens per KV block; the pool holds whole blocks (None: 1)
    memory_profiles: tuple[MemoryProfile, ...] = ()  # by version, oldest first; the last one when none is named
    overhead: Overhead = "cuda_context"
    allocator_reserve: bool = True  # False: the engine sizes its pool exactly, no caching-allocator slack
    micro_batch_tokens: Sourced[int] | None = None  # compute_buffer: the micro-batch ggml plans for
    sampler_bytes_per_logit: Sourced[float] | None = None  # profile_run: bytes per vocabulary entry and row
    graphs: GraphCapture | None = None  # None: no CUDA graphs modelled (each step keeps its launch floor)
    eager: Sourced[bool] = Sourced(False, "a compiled engine: its kernels are not launched one by one from Python")
    absorbs_mla: Sourced[bool] = Sourced(True, "MLA runs with the absorbed (latent) weights")
    own_attention: Sourced[bool] = Sourced(True, "brings its own attention kernels (no FlashAttention-2 package)")
    needs: Requirement | None = None
    decode_scaled_off_cuda: Sourced[bool] = Sourced(False, "no published reference off CUDA applied")
    splits_layers: Sourced[str] | None = None  # its multi-GPU default splits by layers, as this flag says
    host_ops: HostOps | None = None  # eager runtimes: what each module dispatches from Python
    # host seconds per dispatched operator (eager runtimes)
    launch_cost_s: Sourced[float] | FittedConstant | None = None
    disaggregates: Sourced[bool] = Sourced(False, "no separate prefill and decode workers")
    image: ImageRuntime | None = None  # an image-pipeline runtime: how it holds the pipeline
    expert_offload: Sourced[str] | None = None  # keeps chosen layers' routed experts in host RAM (its flag)
    prefix_caching: Sourced[str] | None = None  # reuses cached prompt prefixes unless told not to (how, in words)
    kv_reuse: Sourced[KvReuse] | None = None  # how it reuses them (None: every prompt is prefilled whole)
    validate_runs: str | None = None  # what `gpuwise validate` runs of it for real (None: validate cannot run it)
    # one iteration carries the running sequences' next tokens and the prompt chunks together, all from the token
    # budget; False: an iteration with prompts to prefill runs them alone and the decoding sequences wait
    mixes_prefill: Sourced[bool] = Sourced(True, "continuous batching (Orca, OSDI 2022): each iteration runs the "
                                                 "decoding sequences and the admitted prompts together")
    # iterations the scheduler forms ahead of the GPU: a request that arrives while iteration N runs joins
    # N + 1 + schedules_ahead (0: the next one)
    schedules_ahead: Sourced[int] = Sourced(0, "the next iteration is formed after the last one finished")
    # mean seconds from a closed-loop request's last token to the client's next request reaching the scheduler
    # (streaming the answer, the client's turn, the request's parsing and tokenization), exponential around it
    # (a global parameter fitted by benchmarks/fit.py within 0 to 0.05 s; 0: clients that finish together send
    # together)
    client_turnaround_s: Sourced[float] | FittedConstant = CLIENT_TURNAROUND
    # seconds the engine's server adds to each request between the client and the scheduler (HTTP, chat template
    # and tokenizer, detokenizing and streaming the first token): None where the engine runs in the caller's process
    request_overhead_s: Sourced[float] | FittedConstant | None = None

    @property
    def server_overhead_s(self) -> float:
        """Seconds a request spends in the engine's server outside the GPU (0 where it runs in-process)."""
        return 0.0 if self.request_overhead_s is None else self.request_overhead_s.value

    def memory_profile(self, version: str | None) -> MemoryProfile | None:
        """The memory profile of ``version`` (\"0.6.4\", \"v0.11.0\"): the newest record not after it; the newest one
        when no version is named."""
        if not self.memory_profiles:
            return None
        if version is None:
            return self.memory_profiles[-1]
        wanted = version_tuple(version)
        fitting = [p for p in self.memory_profiles if p.since <= wanted]
        return fitting[-1] if fitting else self.memory_profiles[0]

    @property
    def pooled(self) -> bool:
        """Whether the engine sizes a KV pool from a share of memory (``--mem-fraction`` applies)."""
        return self.memory_fraction is not None


@dataclass(frozen=True)
class FrameworkProfile:
    """A training framework: the job fields it sets unless the user did, and what it runs differently."""

    id: str
    name: str
    fills: Sourced[Mapping[str, object]]  # always
    kernels: Kernels
    fills_one_gpu_full: Sourced[Mapping[str, object]] | None = None  # a full fine-tune on one GPU, no accumulation
    fills_while_checkpointing: Sourced[Mapping[str, object]] | None = None  # unless checkpointing was turned off
    zero_when_data_parallel: Sourced[int] | None = None  # the ZeRO stage it runs on several data-parallel GPUs
    fused_kernels: Sourced[bool] = Sourced(False, "runs the model's own norm and rotary modules, op by op")
    fp32_residual_under_autocast: Sourced[bool] = Sourced(
        True, "torch.autocast over fp32 parameters: the residual stream stays fp32 (PyTorch autocast docs)")
    persistent_gradients: Sourced[bool] = Sourced(False, "gradients are freed after each optimizer step")
    tensor_parallel: Sourced[bool] = Sourced(False, "data parallel (DDP, FSDP, ZeRO) over whole model copies: no "
                                                    "tensor-parallel layout is searched for it")
    adapter_bytes: Sourced[AdapterBytes] = Sourced(
        (14.0, 12.0, 22.0, 6.0),
        "huggingface/peft@v0.21.2 src/peft/tuners/lora/layer.py Linear.forward: the adapters are fp32 "
        "(get_peft_model autocast_adapter_dtype=True), so x.to(float32) (read 2, write 4 per input element), "
        "autocast's cast back for lora_A (read 4, write 2) and lora_A's read (2); lora_B's output (write 2), "
        "* scaling (read 2, write 2), result + (read 4, write 2). Backward: the two casts' gradients and the "
        "add into x's gradient (22 per input element), * scaling's and lora_B's gradient reads (6 per output)")
    adapter_kernels: int = 8  # launches per adapted linear in forward (two casts, two matmuls, weight casts, mul, add)
    merges_fused_experts: Sourced[bool] = Sourced(
        True, "huggingface/peft@v0.21.2 src/peft/tuners/lora/layer.py ParamWrapper._activate_lora: LoRA on a fused "
              "3-D expert parameter registers a parametrization that returns torch.baddbmm(W, lhs, rhs) on every "
              "forward, so the whole expert stack is merged anew, and its gradient reaches the factors through the "
              "merged weight: backward computes the full weight gradient of the experts")
    host_ops: HostOps | None = None  # the eager modules it runs, when traced (transformers' through the HF stacks)
    # host seconds per operator its forward dispatches from Python
    launch_cost_s: Sourced[float] | FittedConstant | None = None
    adapter_dispatches: int = 12  # operators PEFT dispatches around one adapted linear in forward: traced, LoRA on
    # all seven linears of a Llama layer adds 84 (peft 0.18, transformers 5.25, tests/test_host_ops.py)
    fusions: Fusions = UNFUSED  # the operators it runs as fused kernels
    fused_loss_fusions: Fusions | None = None  # what it runs under --loss fused, where that swaps in a kernel library
    # (transformers' use_liger_kernel); None: its own fusions, with whatever loss they name
    notes: tuple[str, ...] = field(default_factory=tuple)
    sharding: Sourced[str] | None = None  # the data-parallel runtime it shards with (runtimes/sharding.py)


GatheredParts = Literal["none", "head", "embedding+head"]
"""What a ZeRO-3 runtime keeps gathered from forward to backward besides the running layers: nothing, the output
head with the final norm, or the root module's embedding and head."""

ComputeParams = Literal["fp32_autocast", "16bit"]
"""What the forward's matmuls read under mixed precision:
    fp32_autocast  fp32 parameters that torch.autocast casts per operator (DDP + torch.amp): the 16-bit copies are
                   autograd's saved casts, which activation checkpointing frees with the layer
    16bit          16-bit parameters the runtime holds (DeepSpeed's and Megatron's bf16 model) or gathers (FSDP's
                   MixedPrecision param_dtype): whole as long as the runtime keeps them, whatever checkpointing does"""


@dataclass(frozen=True)
class ShardingProfile:
    """How a data-parallel runtime holds a model's states: the ZeRO stages it runs (by its own names), the bytes of
    what it keeps, what it gathers and for how long, and its communication buffers.

    Stage k shards over the sharding ranks what the ZeRO paper's P_os (k >= 1: optimizer states and the fp32
    master copy), P_os+g (k >= 2: gradients too) and P_os+g+p (k = 3: the 16-bit parameters) say (Rajbhandari et
    al. 2020, arXiv 1910.02054, sec. 5)."""

    id: str
    name: str
    stages: Sourced[Mapping[int, str]]  # the stages it runs -> its own name for each
    compute_params: Sourced[ComputeParams]
    gradient_bytes: Sourced[int]  # bytes per gradient element it keeps from backward to the step (mixed precision)
    shard_is_master: Sourced[bool] = Sourced(False, "the sharded parameter is the 16-bit model's own shard")
    step_fp32_gradients: Sourced[bool] = Sourced(False, "the optimizer steps on the gradients as kept")
    step_group_elements: Sourced[int] | None = None  # ZeRO-3 steps its partition in groups of this many elements
    reduce_bucket_elements: Sourced[int] | None = None  # a gradient bucket of this many 16-bit elements, always
    buckets_copy_gradients: Sourced[bool] = Sourced(False, "no copy of the gradients for communication")
    gathered_layers: Sourced[int] = Sourced(2, "ZeRO-3: the layer running and the one prefetched")
    gather_unit: Sourced[Literal["layer", "module"]] = Sourced("layer", "gathers a decoder layer at a time")
    stays_gathered: Sourced[GatheredParts] = Sourced("none", "the embedding and head are gathered like any layer")
    reduce_scatter_layer: Sourced[bool] = Sourced(False, "gradients are reduced in place, bucket by bucket")
    gradients_kept: Sourced[frozenset[int]] = Sourced(frozenset(), "zero_grad(set_to_none=True) frees the "
                                                                  "gradients after each step")
    buckets_kept: Sourced[frozenset[int]] = Sourced(frozenset(), "its buckets live only while backward reduces")
    pipeline_below_stage: Sourced[int] | None = None  # with --pp, only stages below this run
    hybrid: Sourced[bool] = Sourced(False, "shards over every data-parallel rank")
    offloads: Sourced[frozenset[str]] = Sourced(frozenset(), "keeps every state on the GPU")  # --offload values
    one_rank_name: str | None = None  # what runs when it has a single rank (DDP: autocast alone, no wrapper)


@dataclass(frozen=True)
class BenchTool:
    """A benchmark tool whose export ``gpuwise calibrate --from`` reads: the engine its runs measured, what one of
    its runs is, and how it names the devices and the model."""

    id: str  # as the calibration record writes it ("tool")
    engine: Sourced[str]  # the engine its runs measured (an id of runtimes.ENGINE_IDS), unless --engine says
    single_stream: Sourced[bool]  # per-device tests of one prompt (pp) or one generation (tg) at batch 1, in
    # tokens/s, rather than a serving load of many requests
    lists_devices: Sourced[bool]  # its GPU name lists every device a test spread over: as many cards as names
    names_model: Sourced[bool]  # its model field is the served model's id (a preset, hub id); False: a description
    backends: frozenset[str] = frozenset()  # the result's "backend" values that mark its serving export
