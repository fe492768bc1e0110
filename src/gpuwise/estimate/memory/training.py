"""Training memory per GPU, component by component.

    weights           the working copy the forward pass reads (16-bit; fp32 for --precision fp32; NF4 base for QLoRA)
    master_weights    fp32 copy of trainable weights in mixed precision
    gradients         of the trainable weights
    optimizer         optimizer states (AdamW: 2 per trainable parameter)
    activations       saved for the backward pass (Korthikanti et al. 2022, adapted below)
    logits            the b x s x V output, its fp32 upcast and log-softmax for the loss
    framework_overhead  CUDA context, cuBLAS workspace, NCCL buffers
    allocator_reserve   what the caching allocator holds beyond the peak it hands out

ZeRO stage k shards over the data-parallel ranks: optimizer (k >= 1), gradients (k >= 2), weights (k = 3).
Tensor parallelism splits attention heads, MLP width and the vocabulary; pipeline parallelism splits the layers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from gpuwise.estimate import constants as C
from gpuwise.estimate.dtypes import bytes_per_element
from gpuwise.estimate.memory.activations import CHUNKED_LOSS_CHUNKS, activation_moments
from gpuwise.estimate.memory.breakdown import COMPONENTS, MemoryEstimate, framework_overhead
from gpuwise.estimate.plan import TrainPlan
from gpuwise.workload.jobs.job import TrainJob
from gpuwise.workload.model.architecture import Architecture


def _optimizer_bytes_per_param(job: TrainJob, state_bytes: int) -> float:
    if job.optimizer in ("adamw", "paged-adamw"):
        return C.ADAMW_STATES.value * state_bytes
    if job.optimizer in ("adamw-8bit", "paged-adamw-8bit"):
        return C.ADAMW_STATES.value * C.EIGHT_BIT_STATE_BYTES.value
    if job.optimizer == "sgd":
        return state_bytes  # one momentum buffer
    return 0.0  # adafactor: factored second moment, counted separately


def _adafactor_bytes(arch: Architecture, state_bytes: int, trainable: int) -> float:
    """Adafactor keeps a row and a column vector per matrix (Shazeer & Stern 2018), about (d_in + d_out) each."""
    matrices = sum((x.d_in + x.d_out) * x.count * x.layers for x in arch.params.linears)
    share = trainable / max(arch.total_params, 1)
    return (matrices * share + arch.hidden + arch.vocab) * state_bytes


def model_states(plan: TrainPlan) -> dict[str, float]:
    """Weights, fp32 master copy, gradients and optimizer states on one GPU, sharded as ZeRO/TP/PP say."""
    arch, job = plan.arch, plan.job
    model_parallel = plan.model_parallel
    dp = job.data_parallel
    total = arch.total_params / model_parallel
    state_bytes = plan.state_bytes
    trainable = plan.trainable_params / model_parallel
    if job.trains_adapters:
        if job.method == "qlora":
            linear = arch.params.linear / model_parallel
            # PEFT's prepare_model_for_kbit_training upcasts the non-quantized parameters (embeddings,
            # head, norms) to fp32 under mixed precision; a pure-bf16 run keeps them in bf16
            weights = linear * bytes_per_element("nf4") + (total - linear) * state_bytes
        else:
            weights = total * plan.weight_bytes
        # PEFT keeps adapters, their gradients and states in fp32 unless the whole run is bf16
        weights += trainable * state_bytes
        master, grads = 0.0, trainable * state_bytes
    else:
        weights = total * plan.weight_bytes
        master = 0.0 if job.precision in ("fp32", "pure-bf16") else total * bytes_per_element("fp32")
        grads = total * state_bytes
        if job.optimizer_in_backward:
            # each parameter steps and frees its gradient as it arrives (torch.Tensor.register_post_accumulate_
            # grad_hook; torchtune training/memory.py register_optim_in_bwd_hooks): the largest one is alive at most
            grads = _largest_parameter(arch) / model_parallel * state_bytes
    if job.optimizer == "adafactor":
        optimizer = _adafactor_bytes(arch, state_bytes, int(plan.trainable_params)) / model_parallel
    else:
        optimizer = trainable * _optimizer_bytes_per_param(job, state_bytes)
    zero = job.zero_stage
    # --ep spreads the routed experts over data-parallel ranks: whatever ZeRO leaves whole holds 1/ep of them; what
    # ZeRO shards over all dp ranks is already split that finely (the experts' dp / ep replicas shard it)
    held = plan.expert_share_held
    weights *= held if zero < 3 else 1.0
    if zero < 2:
        grads *= held
    if zero >= 1:
        optimizer, master = optimizer / dp, master / dp
    else:
        optimizer, master = optimizer * held, master * held
    # with pipeline parallelism, ZeRO-2/3 cannot reshard between micro-batches: DeepSpeed refuses the
    # combination and torchtitan keeps FSDP parameters unsharded after forward (reshard_after_forward=False),
    # so gradients and weights stay whole on each rank; only optimizer states and master weights shard.
    sharded_pp = job.pp > 1
    if zero >= 2 and not sharded_pp:
        grads /= dp
    layer_weights = weights / max(plan.layers_per_stage, 1)  # one whole (gathered) layer of this stage
    if zero == 3 and not sharded_pp:
        # the shard + the gathered current and prefetched layer; never more than not sharding at all
        weights = min(weights, weights / dp + 2 * layer_weights)
    if job.offload != "none":
        optimizer, master = 0.0, 0.0
    if job.offload == "optimizer+params":
        # parameters live in host memory; the GPU holds the gathered current and prefetched layer
        weights = 2 * layer_weights
    return {"weights": weights, "master_weights": master, "gradients": grads, "optimizer": optimizer}


def _largest_parameter(arch: Architecture) -> float:
    """The largest single parameter tensor: the embedding (or untied head), else the widest linear."""
    linear = max((x.d_in * x.d_out for x in arch.params.linears if x.count == 1), default=0)
    return float(max(arch.params.embedding, arch.params.head, linear))


def logits(plan: TrainPlan) -> float:
    """Peak bytes of the b x s x V logits around the loss.

    transformers' ForCausalLMLoss upcasts the logits to fp32 and calls cross-entropy (log-softmax + NLL), which
    saves the fp32 log-probabilities; the caller (the HF Trainer's training_step, torchtune's recipes) drops the
    model's 16-bit logits before backward. The peak is log-softmax's backward: the saved log-probabilities, the
    incoming fp32 gradient and the fp32 gradient it makes, 12 bytes per element in any precision (the forward holds
    16-bit logits + fp32 copy + log-probabilities: 10).
    """
    arch, job = plan.arch, plan.job
    if not arch.lm_head:
        return 0.0
    e = plan.act_bytes
    tokens, vocab = job.batch * _label_seq(arch, job), arch.vocab / job.tp
    if job.compile and job.loss != "fused":
        # compiled, the upcast, log-softmax and NLL fuse into one kernel that keeps the 16-bit logits and a per-row
        # log-sum-exp, and backward writes a 16-bit gradient (transformers' loss inside the compiled forward;
        # torchtune training/_compile.py compile_loss compiles the chunked loss's per-chunk compute_cross_entropy)
        return tokens * vocab * e * (1 + (1 / CHUNKED_LOSS_CHUNKS if job.loss == "chunked" else 1))
    if job.loss == "chunked":
        # torchtune CEWithChunkedOutputLoss (modules/loss/ce_chunked_output_loss.py): the model returns its logits
        # in 8 chunks; each is upcast and cross-entropied alone, so in forward the fp32 log-probabilities autograd
        # saves (4 bytes) sit beside the 16-bit chunks and one chunk's fp32 copy; backward holds the log-probabilities
        # and one chunk's two fp32 gradients
        upcast = 4 if e < 4 else 0
        return tokens * vocab * max(e + 4 + upcast / CHUNKED_LOSS_CHUNKS, 4 + 8 / CHUNKED_LOSS_CHUNKS)
    if job.loss == "fused":
        return fused_loss_bytes(plan)
    return tokens * vocab * 12


def _label_seq(arch: Architecture, job: TrainJob) -> int:
    """Positions that get logits: the decoder's labels of an encoder-decoder, else the sequence."""
    return (job.decoder_seq or job.seq) if arch.kind == "encoder-decoder" else job.seq


def fused_loss_bytes(plan: TrainPlan) -> float:
    """Liger's fused linear cross-entropy (liger_kernel/ops/fused_linear_cross_entropy.py): the logits exist only
    for a chunk of next_pow2(ceil(BT / ceil(V / H))) tokens (16-bit, its fp32 upcast, the 16-bit gradient and its
    scaled copy: 10 bytes per element), and the gradient of the hidden states (BT x H) is computed in forward and kept
    for backward (the head's gradient, also made there, is the one ``gradients`` already counts)."""
    arch, job = plan.arch, plan.job
    tokens, vocab, hidden = job.batch * _label_seq(arch, job), arch.vocab / job.tp, arch.hidden
    growth = -(-arch.vocab // max(hidden, 1))
    chunk = min(tokens, 1 << max(0, math.ceil(math.log2(max(1, -(-tokens // growth))))))
    return chunk * vocab * 10 + tokens * hidden * plan.act_bytes


def training_memory(plan: TrainPlan) -> MemoryEstimate:
    """Per-GPU peak of one training step: model states + activations + logits + overheads, at the moment of the
    step that holds the most (``peak_moment``)."""
    job, capacity_bytes = plan.job, plan.gpu.usable_memory_bytes
    parts: dict[str, float] = dict.fromkeys(COMPONENTS, 0.0)
    parts.update(model_states(plan))
    moment, at_peak = peak_moment(plan, parts)
    gradients_total = parts["gradients"]
    parts.update(at_peak)
    paged_bytes, paged = _page_out(parts, job, capacity_bytes)
    allocated = sum(parts.values())
    parts["framework_overhead"] = framework_overhead(job.count)
    parts["allocator_reserve"] = allocated * C.ALLOCATOR_RESERVE.value
    return MemoryEstimate(
        breakdown_bytes=parts, capacity_bytes=capacity_bytes, cuda_context_bytes=C.CUDA_CONTEXT.value,
        assumptions=training_assumptions(plan) + _moment_note(moment, parts, gradients_total) + paged,
        details={"trainable_params": plan.trainable_params, "gradients_bytes": gradients_total,
                 # bitsandbytes' paged states sit in CUDA managed memory (cudaMallocManaged), which torch.cuda's
                 # memory statistics never see
                 "managed_bytes": parts["optimizer"] if job.optimizer in PAGED else 0.0,
                 "paged_out_bytes": paged_bytes},
    )


def peak_moment(plan: TrainPlan, states: Mapping[str, float]) -> tuple[str, dict[str, float]]:
    """The moment of the step with the most memory and what weights, activations, logits and gradients hold then:
    the loss (log-softmax's backward; all activations saved, gradients not yet made), the top of backward (the last
    layer recomputed) or the end of backward (every gradient, the first layer's activations)."""
    forward, top, last = activation_moments(plan)
    gradients = states["gradients"]
    early = gradients if plan.gradients_persist else 0.0
    held, one_layer = _autocast_copies(plan, states["weights"])
    moments = {
        "the loss": {"weights": held, "activations": forward, "logits": logits(plan), "gradients": early},
        "the top of backward": {"weights": held + one_layer, "activations": top, "logits": 0.0, "gradients": early},
        "the end of backward": {"weights": held + one_layer, "activations": last + _tied_gradient_bytes(plan),
                                "logits": 0.0, "gradients": gradients},
    }
    name = max(moments, key=lambda k: sum(moments[k].values()))
    return name, moments[name]


def _autocast_copies(plan: TrainPlan, weights: float) -> tuple[float, float]:
    """(16-bit weight copies alive between layers, those of one layer). Under autocast over fp32 weights the 16-bit
    ``weights`` are the casts each linear keeps for backward; a checkpointed layer keeps none (its forward ran without
    saving and its recompute casts again), so only the head's copy stays, and one layer's while it recomputes."""
    arch, job = plan.arch, plan.job
    mixed_copies = plan.autocast and not job.trains_adapters and job.zero_stage < 3
    if not mixed_copies or job.ckpt != "full" or job.offload != "none":
        return weights, 0.0
    head = 2.0 * arch.vocab * arch.hidden / job.tp if arch.lm_head else 0.0
    layer = 2.0 * arch.params.linear / max(arch.layers, 1) / job.tp / job.pp
    return min(weights, head), layer


def _tied_gradient_bytes(plan: TrainPlan) -> float:
    """A tied embedding and head get two gradients: autograd holds the head's in its input buffer while
    embedding_dense_backward makes a dense V x h one, then adds them into a third (a trained tied embedding only)."""
    arch, job = plan.arch, plan.job
    if job.trains_adapters or arch.params.head or not arch.lm_head:
        return 0.0
    return 2.0 * arch.vocab * arch.hidden * plan.state_bytes / job.tp


def _moment_note(moment: str, parts: Mapping[str, float], gradients: float) -> tuple[str, ...]:
    if parts["gradients"] >= gradients:
        return (f"peak at {moment}",)
    return (f"peak at {moment}, before backward makes the gradients ({gradients / 2**30:,.2f} GiB, counted at the "
            "end of backward, when the logits are gone): zero_grad(set_to_none=True) freed the last step's",)


PAGED = ("paged-adamw", "paged-adamw-8bit")


def _page_out(parts: dict[str, float], job: TrainJob, capacity_bytes: float) -> tuple[float, tuple[str, ...]]:
    """bitsandbytes' paged optimizers keep their states in CUDA unified memory, which the driver evicts to host RAM
    under pressure (bitsandbytes docs, 'Paged optimizers'): the states take only the room the rest leaves. Returns
    the bytes paged out and the note."""
    if job.optimizer not in PAGED or not parts["optimizer"]:
        return 0.0, ()
    rest = sum(parts.values()) - parts["optimizer"]
    room = capacity_bytes / (1 + C.ALLOCATOR_RESERVE.value) - rest - framework_overhead(job.count)
    if room >= parts["optimizer"]:
        return 0.0, ()
    paged = parts["optimizer"] - max(room, 0.0)
    parts["optimizer"] = max(room, 0.0)
    bits = "8-bit" if job.optimizer == "paged-adamw-8bit" else "32-bit"
    return paged, (f"paged {bits} optimizer: {paged / 2**30:,.2f} GiB of its states page out to host memory (each "
                   "step pages them in over PCIe for the update and out again for the next forward)",)


def _precision_note(job: TrainJob) -> str:
    if job.trains_adapters:
        adapters = "bf16" if job.precision == "pure-bf16" else "fp32"
        base = "NF4" if job.method == "qlora" else ("fp32" if job.precision == "fp32" else "16-bit")
        return f"frozen base in {base}; {job.method} adapters, their gradients and optimizer states in {adapters}"
    if job.precision in ("bf16", "fp16", "fp8"):
        return "mixed precision keeps fp32 weights, a 16-bit copy and fp32 gradients (HF docs, Model training anatomy)"
    return f"--precision {job.precision}: weights, gradients and optimizer states in " + (
        "bf16" if job.precision == "pure-bf16" else "fp32")


def training_assumptions(plan: TrainPlan) -> tuple[str, ...]:
    arch, job = plan.arch, plan.job
    notes = [
        f"{arch.name}: {arch.total_params:,} parameters ({arch.active_params:,} active per token)",
        _precision_note(job),
        "activations: Korthikanti et al. 2022 (arXiv 2205.05198) per-layer formula, generalised to GQA, gated MLPs"
        " and FlashAttention" + ("; full checkpointing keeps each layer's input" if job.ckpt == "full" else ""),
        f"CUDA context {C.CUDA_CONTEXT.value / C.MIB:.0f} MiB ({C.CUDA_CONTEXT.source.split(':')[0]})",
        f"allocator reserve {C.ALLOCATOR_RESERVE.value:.0%} of the peak allocated (gpuwise assumption)",
    ]
    if job.method == "qlora":
        notes.append("QLoRA base linears in NF4 with double quantization: 4.127 bits per parameter (QLoRA paper)")
    if job.zero_stage and job.zero is not None and "zero" not in job.framework_filled:
        notes.append(f"ZeRO stage {job.zero_stage} over {job.data_parallel} data-parallel ranks (--zero)")
    notes += [choice.describe() for choice in plan.choices]
    notes += {"standard": [], "chunked": ["loss chunked: torchtune CEWithChunkedOutputLoss, 8 chunks upcast one at "
                                          "a time (2 + 4 + 1 bytes per logit instead of 2 + 12)"],
              "fused": ["loss fused: Liger fused linear cross-entropy; the logits exist one chunk of about BT x H "
                        "elements at a time"]}[job.loss]
    if job.optimizer_in_backward:
        notes.append("optimizer in backward: each gradient is freed after its parameter's step (the largest "
                     "parameter's gradient at most); speed as a separate step")
    if job.compile:
        notes.append("torch.compile: layers keep matmul and attention outputs, backward recomputes the elementwise ops "
                     "(inductor's min-cut partitioner); speed as eager (the roofline already charges each "
                     "elementwise pass once, as fused kernels would)")
    if job.packed:
        notes.append("packed sequences: tokens/s counts every packed token; attention is charged over the whole "
                     "--seq (documents shorter than it attend less)" + ("" if job.flash_attn else
                                                                     "; the block-causal mask is held"))
    if job.activation_offload:
        notes.append("activation offload: saved activations in host memory, two layers on the GPU; the copies are "
                     "assumed hidden behind compute (torchtune's streams overlap them)")
    return tuple(notes)
