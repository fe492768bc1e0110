"""Activation memory of a training step: what each transformer layer saves for backward, tensor by tensor as
autograd saves them in transformers' code (held to ``--trace`` by benchmarks/trace_grid.py), and how much of it is
alive at the step's three candidate peaks (the loss, the top of backward, its end)."""

from __future__ import annotations

from gpuwise.estimate.dtypes import activation_bytes
from gpuwise.workload.architecture import Architecture
from gpuwise.workload.job import TrainJob

CHUNKED_LOSS_CHUNKS = 8  # torchtune CEWithChunkedOutputLoss(num_output_chunks=8)


def layer_activation_bytes(arch: Architecture, *, batch: int, seq: int, element: int, flash: bool, tp: int,
                           keep_scores: bool = True, autocast: bool = False,
                           trained: tuple[str, ...] = ("attn", "mlp"), norms_train: bool = True,
                           residual: int | None = None, projection_out: int | None = None) -> float:
    """Bytes one transformer layer saves for backward (Korthikanti et al. 2022, arXiv 2205.05198, sec. 4).

    The paper's GPT layer stores sbh(34 + 5as/h) bytes (2-byte elements, dropout on); with tensor and
    sequence parallelism everything divides by t. Generalised here, tensor by tensor as autograd saves them in
    transformers' code (checked against --trace, benchmarks/trace_grid.py):
    - each norm keeps what ``norm_saved_bytes`` says of the residual stream (``residual`` bytes, default
      ``element``), each sublayer the input of its projections (under autocast a bf16 copy per projection: autocast
      caches casts of weights only, not of activations);
    - attention keeps Q, K, V (k KV heads of dim d) and its output (the output projection's input); without
      FlashAttention also the a x s x s softmax (plus dropout mask and output); FlashAttention keeps a per-row
      log-sum-exp (fp32) instead; q/k norms (Qwen3, Gemma 3) keep what a norm keeps over Q and K;
    - the MLP keeps 2 (plain: pre- and post-activation) or 4 (gated: gate, up, act(gate), product) tensors of width
      i (x experts per token for MoE, whose routed tokens are also gathered per expert); all but the product are
      ``projection_out`` bytes (default ``element``; bitsandbytes' 4-bit linears return their input's dtype, fp32
      under QLoRA's upcast norms);
    - a frozen linear's input is not saved (autograd needs it only for the weight gradient), so LoRA on
      attention only drops the MLP input and the down-projection input; dropout adds 1-byte masks.
    """
    s, b, h = seq, batch, arch.hidden
    heads = arch.heads
    width = arch.intermediate * max(arch.experts_per_token, 1) + arch.shared_expert_intermediate
    qkv = (arch.heads + 2 * arch.kv_heads) * arch.head_dim
    attn_out = arch.heads * arch.head_dim
    norm = norm_saved_bytes(arch, residual or element, autocast, norms_train)

    def inputs(group: str) -> float:  # the projections' saved input(s), per token
        return element * h * (_input_casts(arch, group) if autocast else 1) * (group in trained)

    attention = s * b * (norm * h + inputs("attn") + element * (qkv + attn_out * ("attn" in trained)))
    if arch.qk_norm != "none":
        attention += s * b * norm * (arch.heads + arch.kv_heads) * arch.head_dim
    if flash:
        attention += 4 * b * heads * s
    elif keep_scores:
        wide = 4 if autocast else element
        attention += wide * b * heads * s * s
        if arch.attention_dropout > 0:
            attention += b * heads * s * s * (1 + wide)  # mask + dropped-out probabilities
    mlp_tensors = (3 if arch.gated_mlp else 1) + ("mlp" in trained)
    routed = element * h * arch.experts_per_token * ("mlp" in trained)  # each expert's gathered tokens
    product = element * ("mlp" in trained)
    mlp = s * b * (norm * h + inputs("mlp") + routed + width * ((projection_out or element) * (mlp_tensors - (
        "mlp" in trained)) + product))
    masks = 2 * s * b * h if arch.hidden_dropout > 0 else 0
    cross = attention if arch.kind == "encoder-decoder" else 0.0  # decoder cross-attention, about as large
    layer = attention + mlp + masks + cross * arch.decoder_layers / max(arch.layers, 1)
    return layer / tp  # tensor parallelism splits heads and widths; sequence parallelism the rest


def norm_saved_bytes(arch: Architecture, residual: int, autocast: bool, weight_trains: bool) -> float:
    """Bytes per element a norm saves for backward, on a residual stream of ``residual`` bytes. transformers'
    RMSNorm (LlamaRMSNorm and its copies) upcasts its input to fp32 and keeps that copy (an fp32 residual stream is
    kept as it is), and the weight's product keeps the normalized tensor, in the residual's dtype, when the weight
    trains. F.layer_norm keeps only its input (fp32 under autocast, which runs it in fp32), with per-row mean and
    rstd."""
    if arch.rms_norm:
        return 4 + (residual if weight_trains else 0)
    return 4 if autocast else residual


def _projection_out_bytes(job: TrainJob) -> int:
    """A projection output's bytes: bitsandbytes Linear4bit.forward returns ``out.to(inp_dtype)``, the dtype of its
    input (fp32 under mixed-precision QLoRA, whose norms PEFT upcast); other linears run in the activation dtype."""
    return residual_bytes(job) if job.method == "qlora" else activation_bytes(job.precision)


def residual_bytes(job: TrainJob) -> int:
    """Bytes per element of the residual stream (and so of a checkpointed layer's input): the embedding's dtype,
    since the residual adds keep the wider type. fp32 for --precision fp32 and for mixed precision over fp32 weights
    (a full fine-tune; QLoRA, whose non-quantized parameters PEFT's prepare_model_for_kbit_training upcasts to
    fp32), else 16-bit (LoRA over a 16-bit base, pure bf16, FP8 recipes over bf16 parameters)."""
    mixed = job.precision in ("bf16", "fp16")
    if job.precision == "fp32" or (mixed and job.method in ("full", "qlora")):
        return 4
    return activation_bytes(job.precision)


def _input_casts(arch: Architecture, group: str) -> int:
    """Projections of ``group`` that read the hidden state (q, k, v; gate, up, router, shared expert): under
    autocast each casts it to bf16 for itself."""
    return max(1, sum(1 for x in arch.params.linears if x.group == group and x.count == 1 and x.d_in == arch.hidden))


def _trained_groups(job: TrainJob) -> tuple[str, ...]:
    if not job.trains_adapters or job.lora_targets == "all-linear":
        return ("attn", "mlp")
    return ("attn",)


def activations(arch: Architecture, job: TrainJob) -> float:
    """Activation bytes at the end of the forward pass (what the loss sees)."""
    return activation_moments(arch, job)[0]


def activation_moments(arch: Architecture, job: TrainJob) -> tuple[float, float, float]:
    """Activation bytes at the end of forward, at the top of backward and at its end (the first layer)."""
    if arch.kind == "cnn":
        from gpuwise.estimate.cnn import activation_bytes_per_image

        whole = job.batch * activation_bytes_per_image(arch.config, activation_bytes(job.precision), job.image_size)
        return whole, whole, whole
    return _transformer_activations(arch, job)


def _transformer_activations(arch: Architecture, job: TrainJob) -> tuple[float, float, float]:
    """Activation bytes on the busiest GPU (the first pipeline stage holds pp micro-batches in flight) at the end of
    forward, at the top of backward and at its end.

    Full checkpointing keeps each layer's input; the backward pass then recomputes one layer at a time,
    holding its activations and their gradients (about as large) at once. An encoder-decoder's decoder layers run
    over ``--decoder-seq`` tokens (the labels), its encoder layers over ``--seq``.
    """
    in_flight = min(job.pp, job.pp_microbatches or job.pp)
    decoder = arch.decoder_layers if arch.kind == "encoder-decoder" else 0
    runs = [(arch.layers - decoder, job.seq), (decoder, job.decoder_seq or job.seq)]
    stored, full_max, inputs = 0.0, 0.0, 0.0
    for count, seq in runs:
        if not count:
            continue
        full, layer_input = _layer_run(arch, job, seq)
        layers = count / job.pp
        if job.activation_offload:
            # saved tensors go to pinned host memory through saved_tensors_hooks and come back one layer ahead of
            # backward (torchtune training/_activation_offloading.py OffloadActivations): the current and next layer
            layers = min(layers, 2.0)
        stored += layers * in_flight * (layer_input if job.ckpt == "full" else full)
        full_max, inputs = max(full_max, full), inputs + layer_input
    merged, moe_layers = _merged_expert_bytes(arch, job)
    if job.ckpt == "full":  # made again when the layer is recomputed
        recompute = 2 * full_max + merged
    else:
        stored, recompute = stored + merged * moe_layers / job.pp, 0.0
    edges = 2 * inputs + _head_copy_bytes(arch, job) + _packing_mask_bytes(arch, job, job.seq)
    last = recompute if job.ckpt == "full" else full_max  # the first layer, recomputed or as saved
    return stored + edges, stored + recompute + edges, last + edges


def _merged_expert_bytes(arch: Architecture, job: TrainJob) -> tuple[float, int]:
    """(bytes per MoE layer, MoE layers). PEFT's LoRA on fused expert weights (ParamWrapper,
    peft/tuners/lora/layer.py) parametrizes each as W + B A: a merged 16-bit copy of every expert's weight that the
    expert matmul keeps for backward (made again with the layer under checkpointing)."""
    if not job.trains_adapters or job.lora_targets != "all-linear" or not peft_targets_experts(arch):
        return 0.0, 0
    experts = [x for x in arch.params.linears if x.count > 1]
    per_layer = sum(x.d_in * x.d_out * x.count for x in experts)
    return 2.0 * per_layer / job.tp, max((x.layers for x in experts), default=0)


# MoE families whose checkpoints already store the experts fused (3-D): transformers 5 has no weight conversion for
# them (transformers/conversion_mapping.py _MODEL_TO_CONVERSION_PATTERN, 5.24), so PEFT's all-linear, which targets
# fused experts through that conversion (peft/utils/transformers_weight_conversion.py), leaves their experts frozen
NATIVELY_FUSED_EXPERTS = frozenset({"gpt_oss", "llama4", "llama4_text"})


def peft_targets_experts(arch: Architecture) -> bool:
    """Whether PEFT's LoRA with target_modules='all-linear' adapts this model's routed experts."""
    return bool(arch.experts) and arch.family not in NATIVELY_FUSED_EXPERTS


def _head_copy_bytes(arch: Architecture, job: TrainJob) -> float:
    """Under autocast a linear keeps the bf16 copy of its fp32 weight for backward; the only fp32 linear of a QLoRA
    model is its head (prepare_model_for_kbit_training upcast it): V x h x 2 bytes (a full fine-tune's copies are its
    ``weights``). Autocast caches a cast only for a leaf that requires grad, so the frozen head is cast again, and
    kept again, for each chunk of a chunked loss."""
    if job.method != "qlora" or job.precision not in ("bf16", "fp16") or not arch.lm_head:
        return 0.0
    casts = CHUNKED_LOSS_CHUNKS if job.loss == "chunked" else 1
    return 2.0 * arch.vocab * arch.hidden / job.tp * casts


def compiled_layer_bytes(arch: Architecture, job: TrainJob, seq: int) -> float:
    """What a torch.compile'd layer saves: inductor's min_cut_rematerialization_partition
    (torch/_functorch/partitioners.py) saves what is costly to recompute -- matmul and attention outputs, reductions
    (a norm's rstd) -- and recomputes the elementwise chains in backward from them. A layer then keeps its two residual
    inputs, Q, K, V, the attention output and log-sum-exp, and the MLP's matmul outputs (gate and up, or the plain
    MLP's one); norms, casts, act(gate) and the product are recomputed."""
    e = activation_bytes(job.precision)
    tokens = job.batch * seq
    width = arch.intermediate * max(arch.experts_per_token, 1) + arch.shared_expert_intermediate
    qkv = (arch.heads + 2 * arch.kv_heads) * arch.head_dim + arch.heads * arch.head_dim
    matmul_outputs = (2 if arch.gated_mlp else 1) * width
    layer = tokens * (2 * residual_bytes(job) * arch.hidden + e * (qkv + matmul_outputs)) + 4 * tokens * arch.heads
    return layer / job.tp


def _packing_mask_bytes(arch: Architecture, job: TrainJob, seq: int) -> float:
    """Packed documents without FlashAttention's varlen kernels attend through a block-causal mask: torchtune's
    create_block_causal_mask builds a bool (batch, seq, seq) tensor per forward (flex attention's BlockMask, and
    HF's position_ids with FlashAttention, need none)."""
    return float(job.batch * seq * seq) if job.packed and not job.flash_attn else 0.0


def _layer_run(arch: Architecture, job: TrainJob, seq: int) -> tuple[float, float]:
    """(bytes one layer saves, its input) at ``seq`` tokens."""
    if job.compile:
        return compiled_layer_bytes(arch, job, seq), residual_bytes(job) * seq * job.batch * arch.hidden / job.tp
    e = activation_bytes(job.precision)
    full = layer_activation_bytes(arch, batch=job.batch, seq=seq, element=e, flash=job.flash_attn, tp=job.tp,
                                  keep_scores=job.ckpt != "selective", autocast=job.precision in ("bf16", "fp16"),
                                  trained=_trained_groups(job), norms_train=not job.trains_adapters,
                                  residual=residual_bytes(job), projection_out=_projection_out_bytes(job))
    return full, residual_bytes(job) * seq * job.batch * arch.hidden / job.tp
