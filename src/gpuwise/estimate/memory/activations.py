"""Activation memory of a training step: what each transformer layer saves for backward, tensor by tensor as
autograd saves them in transformers' code (held to ``--trace`` by benchmarks/trace_grid.py), block by block (a
hybrid model's linear-attention and full-attention layers, a MoE model's dense and expert layers each save their
own), and how much of it is alive at the step's three candidate peaks (the loss, the top of backward, its end)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuwise.estimate.plan import TrainPlan, peft_targets_experts
from gpuwise.workload.model.architecture import Architecture
from gpuwise.workload.model.blocks import Attention, Block
from gpuwise.workload.model.convnets import network

CHUNKED_LOSS_CHUNKS = 8  # torchtune CEWithChunkedOutputLoss(num_output_chunks=8)


def layer_activation_bytes(arch: Architecture, block: Block, *, batch: int, seq: int, element: int, flash: bool,
                           tp: int, keep_scores: bool = True, autocast: bool = False,
                           trained: tuple[str, ...] = ("attn", "mlp"), norms_train: bool = True,
                           residual: int | None = None, projection_out: int | None = None) -> float:
    """Bytes one layer of ``block`` saves for backward (Korthikanti et al. 2022, arXiv 2205.05198, sec. 4).

    The paper's GPT layer stores sbh(34 + 5as/h) bytes (2-byte elements, dropout on); with tensor and
    sequence parallelism everything divides by t. Generalised here, tensor by tensor as autograd saves them in
    transformers' code (checked against --trace, benchmarks/trace_grid.py):
    - each norm keeps what ``norm_saved_bytes`` says of the residual stream (``residual`` bytes, default
      ``element``), each sublayer the input of its projections (under autocast a bf16 copy per projection: autocast
      caches casts of weights only, not of activations);
    - attention keeps Q, K, V (the block's heads and dims) and its output (the output projection's input); a
      softmax attention without FlashAttention also the a x s x s scores (plus dropout mask and output),
      FlashAttention a per-row log-sum-exp (fp32) instead; a linear-attention layer keeps no scores; q/k norms
      (Qwen3, Gemma 3) keep what a norm keeps over Q and K;
    - the MLP keeps 2 (plain: pre- and post-activation) or 4 (gated: gate, up, act(gate), product) tensors of the
      block's active width (x experts per token for MoE, whose routed tokens are also gathered per expert); all but
      the product are ``projection_out`` bytes (default ``element``; bitsandbytes' 4-bit linears return their
      input's dtype, fp32 under QLoRA's upcast norms);
    - a frozen linear's input is not saved (autograd needs it only for the weight gradient), so LoRA on
      attention only drops the MLP input and the down-projection input; dropout adds 1-byte masks.
    """
    s, b, h = seq, batch, arch.hidden
    a = block.attention
    norm = norm_saved_bytes(arch, residual or element, autocast, norms_train)

    def inputs(group: str) -> float:  # the projections' saved input(s), per token
        return element * h * (_input_casts(arch, group) if autocast else 1) * (group in trained)

    qkv, out = _attention_widths(a)
    attention = s * b * (norm * h + inputs("attn") + element * (qkv + out * ("attn" in trained)))
    if a.qk_norm != "none":
        attention += s * b * norm * (a.heads + a.kv_heads) * a.head_dim
    if a.kind != "linear":
        attention += _scores_bytes(arch, a, b, s, flash=flash, keep_scores=keep_scores, autocast=autocast,
                                   element=element)
    ffn = block.ffn
    mlp_tensors = (3 if ffn.gated else 1) + ("mlp" in trained)
    routed = element * h * ffn.top_k * ("mlp" in trained) if ffn.experts else 0.0  # each expert's gathered tokens
    product = element * ("mlp" in trained)
    mlp = s * b * (norm * h + inputs("mlp") + routed + ffn.active_width * (
        (projection_out or element) * (mlp_tensors - ("mlp" in trained)) + product))
    masks = 2 * s * b * h if arch.hidden_dropout > 0 else 0
    cross = attention if arch.kind == "encoder-decoder" else 0.0  # decoder cross-attention, about as large
    layer = attention + mlp + masks + cross * arch.decoder_layers / max(arch.layers, 1)
    return layer / tp  # tensor parallelism splits heads and widths; sequence parallelism the rest


def _attention_widths(a: Attention) -> tuple[int, int]:
    """(Q + K + V width, output width) per token of one layer: a GQA layer's k KV heads; MLA's keys and values
    decompressed per head (transformers' eager path); a gated DeltaNet's key heads for q and k, value heads for v."""
    if a.kind == "linear":
        keys = (a.key_heads or a.kv_heads) * a.head_dim
        return 2 * keys + a.kv_heads * a.value_dim, a.kv_heads * a.value_dim
    return a.heads * a.head_dim + a.kv_heads * (a.head_dim + a.value_dim), a.out_width


def _scores_bytes(arch: Architecture, a: Attention, b: int, s: int, *, flash: bool, keep_scores: bool,
                  autocast: bool, element: int) -> float:
    if flash:
        return float(4 * b * a.heads * s)
    if not keep_scores:
        return 0.0
    wide = 4 if autocast else element
    scores = float(wide * b * a.heads * s * s)
    if arch.attention_dropout > 0:
        scores += b * a.heads * s * s * (1 + wide)  # mask + dropped-out probabilities
    return scores


def norm_saved_bytes(arch: Architecture, residual: int, autocast: bool, weight_trains: bool) -> float:
    """Bytes per element a norm saves for backward, on a residual stream of ``residual`` bytes. transformers'
    RMSNorm (LlamaRMSNorm and its copies) upcasts its input to fp32 and keeps that copy (an fp32 residual stream is
    kept as it is), and the weight's product keeps the normalized tensor, in the residual's dtype, when the weight
    trains. F.layer_norm keeps only its input (fp32 under autocast, which runs it in fp32), with per-row mean and
    rstd."""
    if arch.rms_norm:
        return 4 + (residual if weight_trains else 0)
    return 4 if autocast else residual


def _projection_out_bytes(plan: TrainPlan) -> int:
    """A projection output's bytes: bitsandbytes Linear4bit.forward returns ``out.to(inp_dtype)``, the dtype of its
    input (fp32 under mixed-precision QLoRA, whose norms PEFT upcast); other linears run in the activation dtype."""
    return plan.residual_bytes if plan.job.method == "qlora" else plan.act_bytes


def _input_casts(arch: Architecture, group: str) -> int:
    """Projections of ``group`` that read the hidden state (q, k, v; gate, up, router, shared expert): under
    autocast each casts it to bf16 for itself."""
    return max(1, sum(1 for x in arch.params.linears if x.group == group and x.count == 1 and x.d_in == arch.hidden))


def _trained_groups(plan: TrainPlan) -> tuple[str, ...]:
    job = plan.job
    if not job.trains_adapters or job.lora_targets == "all-linear":
        return ("attn", "mlp")
    return ("attn",)


def activations(plan: TrainPlan) -> float:
    """Activation bytes at the end of the forward pass (what the loss sees)."""
    return activation_moments(plan)[0]


def activation_moments(plan: TrainPlan) -> tuple[float, float, float]:
    """Activation bytes at the end of forward, at the top of backward and at its end (the first layer)."""
    arch, job = plan.arch, plan.job
    if arch.kind == "cnn":
        whole = job.batch * activation_bytes_per_image(arch.config, plan.act_bytes, job.image_size)
        return whole, whole, whole
    return _transformer_activations(plan)


def _runs(plan: TrainPlan) -> list[tuple[Block, int]]:
    """Each block with the tokens its layers run over: an encoder-decoder's decoder blocks over ``--decoder-seq``
    (the labels), every other block over ``--seq``."""
    arch, job = plan.arch, plan.job
    decoder_seq = job.decoder_seq or job.seq
    return [(b, decoder_seq if arch.kind == "encoder-decoder" and b.caches else job.seq) for b in arch.blocks]


def _transformer_activations(plan: TrainPlan) -> tuple[float, float, float]:
    """Activation bytes on the busiest GPU (the first pipeline stage holds pp micro-batches in flight) at the end of
    forward, at the top of backward and at its end.

    Full checkpointing keeps each layer's input; the backward pass then recomputes one layer at a time,
    holding its activations and their gradients (about as large) at once.
    """
    job = plan.job
    in_flight = min(job.pp, job.pp_microbatches or job.pp)
    stored, full_max = 0.0, 0.0
    inputs: dict[bool, float] = {}  # one layer input per stack (an encoder-decoder's encoder and decoder)
    on_gpu: dict[bool, float] = {}  # layers whose saved tensors stay on the GPU under activation offload
    for block, seq in _runs(plan):
        full, layer_input = _layer_run(plan, block, seq)
        stack = block.caches and plan.arch.kind == "encoder-decoder"
        layers = block.count / job.pp
        if job.activation_offload:
            # saved tensors go to pinned host memory through saved_tensors_hooks and come back one layer ahead of
            # backward (torchtune training/_activation_offloading.py OffloadActivations): the current and next layer
            layers = min(layers, 2.0 - on_gpu.get(stack, 0.0))
            on_gpu[stack] = on_gpu.get(stack, 0.0) + layers
        stored += layers * in_flight * (layer_input if job.ckpt == "full" else full)
        full_max, inputs[stack] = max(full_max, full), max(inputs.get(stack, 0.0), layer_input)
    merged, moe_layers = _merged_expert_bytes(plan)
    if job.ckpt == "full":  # made again when the layer is recomputed
        recompute = 2 * full_max + merged
    else:
        stored, recompute = stored + merged * moe_layers / job.pp, 0.0
    edges = 2 * sum(inputs.values()) + _head_copy_bytes(plan) + _packing_mask_bytes(plan, job.seq)
    last = recompute if job.ckpt == "full" else full_max  # the first layer, recomputed or as saved
    return stored + edges, stored + recompute + edges, last + edges


def _merged_expert_bytes(plan: TrainPlan) -> tuple[float, int]:
    """(bytes per MoE layer, MoE layers). PEFT's LoRA on fused expert weights (ParamWrapper,
    peft/tuners/lora/layer.py) parametrizes each as W + B A: a merged 16-bit copy of every expert's weight that the
    expert matmul keeps for backward (made again with the layer under checkpointing)."""
    arch, job = plan.arch, plan.job
    if not job.trains_adapters or job.lora_targets != "all-linear" or not peft_targets_experts(arch):
        return 0.0, 0
    experts = [x for x in arch.params.linears if x.count > 1]
    per_layer = sum(x.d_in * x.d_out * x.count for x in experts)
    return 2.0 * per_layer / job.tp, max((x.layers for x in experts), default=0)


def _head_copy_bytes(plan: TrainPlan) -> float:
    """Under autocast a linear keeps the bf16 copy of its fp32 weight for backward; the only fp32 linear of a QLoRA
    model is its head (prepare_model_for_kbit_training upcast it): V x h x 2 bytes (a full fine-tune's copies are its
    ``weights``). Autocast caches a cast only for a leaf that requires grad, so the frozen head is cast again, and
    kept again, for each chunk of a chunked loss."""
    arch, job = plan.arch, plan.job
    if job.method != "qlora" or not plan.autocast or not arch.lm_head:
        return 0.0
    casts = CHUNKED_LOSS_CHUNKS if job.loss == "chunked" else 1
    return 2.0 * arch.vocab * arch.hidden / job.tp * casts


def compiled_layer_bytes(plan: TrainPlan, block: Block, seq: int) -> float:
    """What a torch.compile'd layer saves: inductor's min_cut_rematerialization_partition
    (torch/_functorch/partitioners.py) saves what is costly to recompute -- matmul and attention outputs, reductions
    (a norm's rstd) -- and recomputes the elementwise chains in backward from them. A layer then keeps its two residual
    inputs, Q, K, V, the attention output and log-sum-exp, and the MLP's matmul outputs (gate and up, or the plain
    MLP's one); norms, casts, act(gate) and the product are recomputed."""
    arch, job = plan.arch, plan.job
    tokens = job.batch * seq
    qkv, out = _attention_widths(block.attention)
    matmul_outputs = (2 if block.ffn.gated else 1) * block.ffn.active_width
    layer = (tokens * (2 * plan.residual_bytes * arch.hidden + plan.act_bytes * (qkv + out + matmul_outputs))
             + 4 * tokens * block.attention.heads)
    return layer / job.tp


def _packing_mask_bytes(plan: TrainPlan, seq: int) -> float:
    """Packed documents without FlashAttention's varlen kernels attend through a block-causal mask: torchtune's
    create_block_causal_mask builds a bool (batch, seq, seq) tensor per forward (flex attention's BlockMask, and
    HF's position_ids with FlashAttention, need none)."""
    job = plan.job
    return float(job.batch * seq * seq) if job.packed and not job.flash_attn else 0.0


def _layer_run(plan: TrainPlan, block: Block, seq: int) -> tuple[float, float]:
    """(bytes one layer of ``block`` saves, its input) at ``seq`` tokens."""
    arch, job = plan.arch, plan.job
    layer_input = plan.residual_bytes * seq * job.batch * arch.hidden / job.tp
    if job.compile:
        return compiled_layer_bytes(plan, block, seq), layer_input
    full = layer_activation_bytes(arch, block, batch=job.batch, seq=seq, element=plan.act_bytes,
                                  flash=job.flash_attn, tp=job.tp, keep_scores=job.ckpt != "selective",
                                  autocast=plan.autocast, trained=_trained_groups(plan),
                                  norms_train=not job.trains_adapters, residual=plan.residual_bytes,
                                  projection_out=_projection_out_bytes(plan))
    return full, layer_input


def activation_bytes_per_image(config: Mapping[str, Any], act_bytes: int, image: int | None = None) -> float:
    """Saved for backward: each convolution's input, and its batch-norm input and activation output."""
    return sum(3.0 * c.out_hw**2 * c.c_out * act_bytes for c in network(config, image).convs)
