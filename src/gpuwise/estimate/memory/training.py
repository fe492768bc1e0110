"""Training memory per GPU, component by component, at the moment of the step that holds the most.

    weights           the working copy the forward pass reads (16-bit; fp32 for --precision fp32; NF4 base for QLoRA),
                      with what a ZeRO-3 runtime gathers beside it
    master_weights    fp32 copy of trainable weights in mixed precision
    gradients         of the trainable weights
    optimizer         optimizer states (AdamW: 2 per trainable parameter)
    communication_buffers  the data-parallel runtime's gradient buckets and reduce-scatter buffers
    activations       saved for the backward pass (Korthikanti et al. 2022, adapted below)
    logits            the b x s x V output, its fp32 upcast and log-softmax for the loss
    framework_overhead  CUDA context, cuBLAS workspace, NCCL buffers
    allocator_reserve   what the caching allocator holds beyond the peak it hands out

What is whole, sharded or gathered is each data-parallel runtime's own (memory/model_states.py, runtimes/sharding.py).
Tensor parallelism splits attention heads, MLP width and the vocabulary; pipeline parallelism splits the layers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from gpuwise.estimate import constants as C
from gpuwise.estimate.memory.activations import CHUNKED_LOSS_CHUNKS, activation_moments
from gpuwise.estimate.memory.breakdown import COMPONENTS, MemoryEstimate, framework_overhead
from gpuwise.estimate.memory.model_states import ModelStates, model_states
from gpuwise.estimate.plan import TrainPlan
from gpuwise.workload.jobs.job import TrainJob
from gpuwise.workload.model.architecture import Architecture


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
    states = model_states(plan)
    parts.update(states.parts)
    moment, at_peak = peak_moment(plan, states)
    parts.update(at_peak)
    paged_bytes, paged = _page_out(parts, job, capacity_bytes, framework_overhead(job.count, plan.gpu))
    allocated = sum(parts.values())
    parts["framework_overhead"] = framework_overhead(job.count, plan.gpu)
    parts["allocator_reserve"] = allocated * C.ALLOCATOR_RESERVE.value
    return MemoryEstimate(
        breakdown_bytes=parts, capacity_bytes=capacity_bytes, cuda_context_bytes=C.CUDA_CONTEXT.value,
        assumptions=training_assumptions(plan) + _moment_note(moment, parts, states.gradients) + paged,
        details={"trainable_params": plan.trainable_params, "gradients_bytes": states.gradients,
                 "model_states_bytes": states.persistent,
                 # bitsandbytes' paged states sit in CUDA managed memory (cudaMallocManaged), which torch.cuda's
                 # memory statistics never see
                 "managed_bytes": parts["optimizer"] if job.optimizer in PAGED else 0.0,
                 "paged_out_bytes": paged_bytes},
    )


def peak_moment(plan: TrainPlan, states: ModelStates) -> tuple[str, dict[str, float]]:
    """The moment of the step with the most memory and what weights, activations, logits, gradients and buffers
    hold then: the loss (log-softmax's backward; all activations saved, gradients not yet made), the top of backward
    (the last layer recomputed), the end of backward (every gradient, the first layer's activations) or the
    optimizer step (no activations; DeepSpeed's fp32 gradient copy)."""
    forward, top, last = activation_moments(plan)
    early = states.gradients if plan.gradients_persist else 0.0
    held, one_layer = _autocast_copies(plan, states.weights)
    whole = held + states.gathered
    moments = {
        "the loss": {"weights": whole, "activations": forward, "logits": logits(plan), "gradients": early,
                     "communication_buffers": states.buffers_at_step},
        "the top of backward": {"weights": whole + one_layer, "activations": top, "logits": 0.0, "gradients": early,
                                "communication_buffers": states.buffers},
        "the end of backward": {"weights": whole + one_layer - states.released, "activations": last
                                + _tied_gradient_bytes(plan), "logits": 0.0, "gradients": states.gradients,
                                "communication_buffers": states.buffers},
        "the optimizer step": {"weights": states.weights_at_step, "activations": 0.0, "logits": 0.0,
                               "gradients": states.gradients + states.step,
                               "communication_buffers": states.buffers_at_step},
    }
    name = max(moments, key=lambda k: sum(moments[k].values()))
    return name, moments[name]


def _autocast_copies(plan: TrainPlan, weights: float) -> tuple[float, float]:
    """(16-bit weight copies alive between layers, those of one layer). Under autocast over fp32 weights (plain data
    parallel) the 16-bit ``weights`` are the casts each linear keeps for backward; a checkpointed layer keeps none
    (its forward ran without saving and its recompute casts again), so only the head's copy stays, and one layer's
    while it recomputes. A runtime that holds 16-bit parameters (DeepSpeed, Megatron-LM, FSDP's gathered ones) keeps
    them whatever checkpointing does."""
    arch, job = plan.arch, plan.job
    mixed_copies = plan.autocast and not job.trains_adapters
    if not mixed_copies or job.ckpt != "full" or job.offload != "none":
        return weights, 0.0
    head = 2.0 * arch.vocab * arch.hidden / job.tp if arch.lm_head else 0.0
    layer = 2.0 * arch.params.linear / max(arch.layers, 1) / job.tp / job.pp
    return min(weights, head), layer


def _tied_gradient_bytes(plan: TrainPlan) -> float:
    """A tied embedding and head get two gradients: autograd holds the head's in its input buffer while
    embedding_dense_backward makes a dense V x h one, then adds them into a third (a trained tied embedding only).
    They take the dtype of the parameter autograd differentiates: fp32 under autocast, the gathered 16-bit one under
    DeepSpeed, FSDP or Megatron-LM."""
    arch, job = plan.arch, plan.job
    if job.trains_adapters or arch.params.head or not arch.lm_head:
        return 0.0
    element = plan.state_bytes if plan.sharding.autocast_params else plan.weight_bytes
    return 2.0 * arch.vocab * arch.hidden * element / job.tp


def _moment_note(moment: str, parts: Mapping[str, float], gradients: float) -> tuple[str, ...]:
    if parts["gradients"] >= gradients:
        return (f"peak at {moment}",)
    return (f"peak at {moment}, before backward makes the gradients ({gradients / 2**30:,.2f} GiB, counted at the "
            "end of backward, when the logits are gone): zero_grad(set_to_none=True) freed the last step's",)


PAGED = ("paged-adamw", "paged-adamw-8bit")


def _page_out(parts: dict[str, float], job: TrainJob, capacity_bytes: float,
              overhead: float) -> tuple[float, tuple[str, ...]]:
    """bitsandbytes' paged optimizers keep their states in CUDA unified memory, which the driver evicts to host RAM
    under pressure (bitsandbytes docs, 'Paged optimizers'): the states take only the room the rest leaves. Returns
    the bytes paged out and the note."""
    if job.optimizer not in PAGED or not parts["optimizer"]:
        return 0.0, ()
    rest = sum(parts.values()) - parts["optimizer"]
    room = capacity_bytes / (1 + C.ALLOCATOR_RESERVE.value) - rest - overhead
    if room >= parts["optimizer"]:
        return 0.0, ()
    paged = parts["optimizer"] - max(room, 0.0)
    parts["optimizer"] = max(room, 0.0)
    bits = "8-bit" if job.optimizer == "paged-adamw-8bit" else "32-bit"
    return paged, (f"paged {bits} optimizer: {paged / 2**30:,.2f} GiB of its states page out to host memory (each "
                   "step pages them in over PCIe for the update and out again for the next forward)",)


def _precision_note(plan: TrainPlan) -> str:
    job = plan.job
    if job.trains_adapters:
        adapters = "bf16" if job.precision == "pure-bf16" else "fp32"
        base = "NF4" if job.method == "qlora" else ("fp32" if job.precision == "fp32" else "16-bit")
        return f"frozen base in {base}; {job.method} adapters, their gradients and optimizer states in {adapters}"
    if job.precision in ("bf16", "fp16", "fp8"):
        if plan.sharding.autocast_params:
            return ("mixed precision keeps fp32 weights, a 16-bit copy and fp32 gradients (HF docs, Model training "
                    "anatomy)")
        grads = plan.sharding.profile.gradient_bytes
        return (f"mixed precision: 16-bit weights for compute, an fp32 master copy, {grads.value}-byte gradients "
                f"({grads.source.split(':')[0]})")
    return f"--precision {job.precision}: weights, gradients and optimizer states in " + (
        "bf16" if job.precision == "pure-bf16" else "fp32")


def _sharding_note(plan: TrainPlan) -> str:
    """What the runtime keeps whole and what it gathers, in words."""
    sharding = plan.sharding
    stage, profile = sharding.stage, sharding.profile
    if stage == 0 or sharding.ranks <= 1:
        return ""
    whole = {1: "weights and gradients whole, optimizer states and master weights sharded",
             2: "weights whole, gradients, optimizer states and master weights sharded",
             3: "everything sharded; two layers gathered at a time"}[stage]
    if stage == 2 and profile.reduce_scatter_layer.value:
        whole += " (the weights gathered from forward until each layer's backward)"
    if stage == 3 and profile.stays_gathered.value != "none":
        whole += f", the {profile.stays_gathered.value} kept gathered from forward to backward"
    return f": {whole}"


def training_assumptions(plan: TrainPlan) -> tuple[str, ...]:
    arch, job = plan.arch, plan.job
    notes = [
        f"{arch.name}: {arch.total_params:,} parameters ({arch.active_params:,} active per token)",
        _precision_note(plan),
        "activations: Korthikanti et al. 2022 (arXiv 2205.05198) per-layer formula, generalised to GQA, gated MLPs"
        " and FlashAttention" + ("; full checkpointing keeps each layer's input" if job.ckpt == "full" else ""),
        f"CUDA context {C.CUDA_CONTEXT.value / C.MIB:.0f} MiB ({C.CUDA_CONTEXT.source.split(':')[0]})",
        f"allocator reserve {C.ALLOCATOR_RESERVE.value:.0%} of the peak allocated (gpuwise assumption)",
    ]
    if job.method == "qlora":
        notes.append("QLoRA base linears in NF4 with double quantization: 4.127 bits per parameter (QLoRA paper)")
    if plan.sharding.stage or job.data_parallel > 1:
        notes.append(plan.sharding.describe() + _sharding_note(plan))
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
