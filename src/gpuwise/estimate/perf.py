"""Speed of a training step and of inference (prefill, decode), operator by operator, with communication.

Training, per micro-batch on one GPU: forward + backward (2x the GEMM FLOPs of trainable weights, 1x for
frozen ones, 2.5x for FlashAttention) + recompute under checkpointing + QLoRA dequantization; per step: the
optimizer update (memory-bound) and the collectives: tensor-parallel all-reduces per layer (not overlapped),
data-parallel gradient all-reduce or ZeRO-3 all-gathers and reduce-scatter (overlapped with the backward
pass, Calculon's 15 % slowdown), and the pipeline bubble (p - 1) / (m + p - 1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpuwise.catalog import GPU, Catalog
from gpuwise.catalog.schema import Dtype
from gpuwise.estimate import constants as C
from gpuwise.estimate.backends import decode_factor, unmeasured_stack_factor, unmeasured_stack_note
from gpuwise.estimate.cnn import conv_dtype, conv_ops, forward_flops_per_image
from gpuwise.estimate.cuda_graphs import captured_sizes, graph_batch
from gpuwise.estimate.dtypes import activation_bytes, bytes_per_element, training_weight_bytes
from gpuwise.estimate.memory import lora_params
from gpuwise.estimate.operators import Pass, forward_ops, layer_ops, model_flops_per_token
from gpuwise.estimate.parallel import DEFAULT_NETWORK, all_gather_s, all_reduce_s, all_to_all_s, links, pipeline_bubble
from gpuwise.estimate.roofline import Calibration, Machine, Op, PhaseTime, machine, phase_time
from gpuwise.estimate.weights import matmul_dtype, weights
from gpuwise.workload.architecture import Architecture
from gpuwise.workload.job import InferJob, TrainJob

_UPDATE_BYTES = {"adamw": 30.0, "adamw-8bit": 18.0, "paged-adamw-8bit": 18.0, "sgd": 18.0, "adafactor": 18.0}
"""Bytes read and written per trainable parameter by one optimizer step (derived: AdamW reads weight, gradient and
two fp32 moments and writes weight and moments = 7 x 4 B, plus the 16-bit weight copy = 30 B)."""


@dataclass(frozen=True)
class TrainPerf:
    step_time_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    samples_per_s: float
    mfu: float
    epoch_time_s: float | None
    bound: str
    compute_s: float
    communication_s: float
    bubble_s: float
    top_ops: tuple[tuple[str, float], ...]
    assumptions: tuple[str, ...] = ()


@dataclass(frozen=True)
class InferPerf:
    bound: str
    top_ops: tuple[tuple[str, float], ...]
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    decode_tokens_per_s: float | None = None
    output_tokens_per_s: float | None = None
    e2e_latency_ms: float | None = None
    samples_per_s: float | None = None
    assumptions: tuple[str, ...] = field(default_factory=tuple)
    replicas: int = 1  # --count / --tp copies, each serving the job's batch: the figures above are one replica's


def _train_dtype(precision: str) -> Dtype:
    return {"fp8": "fp8", "fp32": "fp32", "fp16": "fp16"}.get(precision, "bf16")  # type: ignore[return-value]


def _backward(ops: list[Op], *, frozen_gemms: bool) -> list[Op]:
    out = []
    for op in ops:
        if op.kind == "gemm":
            factor = 1.0 if frozen_gemms and op.name != "lm_head" else 2.0
            out.append(Op(op.name + ".bwd", "gemm", op.flops * factor, op.bytes * factor, op.count * int(factor)))
        elif op.kind == "attention":
            out.append(Op(op.name + ".bwd", "attention", op.flops * 2.5, op.bytes * 2, op.count))
        else:
            out.append(Op(op.name + ".bwd", "memory", 0.0, op.bytes * 2, op.count))
    return out


def _micro_batch_ops(arch: Architecture, job: TrainJob) -> tuple[list[Op], list[Op], list[Op]]:
    """Forward, backward and recompute operators of one micro-batch on one GPU."""
    e = activation_bytes(job.precision)
    causal = arch.kind == "decoder"
    p = Pass(batch=job.batch, query=job.seq, context=job.seq / 2 if causal else job.seq, act_bytes=e,
             weight_bytes=float(training_weight_bytes(job.precision)), kv_bytes=e, tp=job.tp, flash=job.flash_attn,
             loss=True, eager_modules=_eager_modules(arch, job),
             stream_bytes=4 if job.precision in ("bf16", "fp16", "fp8") and job.framework != "torchtune" else None)
    layers = arch.layers / job.pp
    fwd = forward_ops(arch, p, layers)
    bwd = _backward(fwd, frozen_gemms=job.trains_adapters)
    recompute: list[Op] = []
    if job.ckpt == "full":
        recompute = layer_ops(arch, p, layers)
    elif job.ckpt == "selective":
        recompute = [op for op in layer_ops(arch, p, layers) if op.kind == "attention" or "softmax" in op.name]
    if job.trains_adapters:
        rank_flops = 2.0 * p.tokens * lora_params(arch, job) / (job.tp * job.pp)
        fwd.append(Op("lora_adapters", "gemm", rank_flops, 0.0, 2 * int(layers)))
        bwd.append(Op("lora_adapters.bwd", "gemm", 2 * rank_flops, 0.0, 4 * int(layers)))
    fwd += _framework_traffic(arch, job, p)
    if job.method == "qlora":
        passes = 3 if job.ckpt == "full" else 2
        nf4 = bytes_per_element("nf4")
        linear = arch.params.linear / (job.tp * job.pp)
        fwd.append(Op("nf4_dequantize", "memory", 0.0, linear * (nf4 + 2) * passes, 7 * int(layers) * passes))
    return fwd, bwd, recompute


_FUSED_FRAMEWORKS = frozenset({"unsloth", "torchtitan", "megatron"})  # Triton / TE / torch fused norms and RoPE


def _eager_modules(arch: Architecture, job: TrainJob) -> bool:
    """Training runs the model's norms and rotary embedding as transformers' (or torchtune's) Python modules, op by
    op: an RMSNorm family, not compiled, outside the frameworks that swap in fused kernels (Unsloth's Triton
    kernels, Megatron's and torchtitan's fused norms) -- and without tensor or pipeline parallelism, which only
    those frameworks run. torch.nn.LayerNorm is one native kernel already."""
    return (arch.rms_norm and not job.compile and job.framework not in _FUSED_FRAMEWORKS
            and job.tp == 1 and job.pp == 1)


def _dispatch_bound(phase: PhaseTime, ops: list[Op], eager: bool) -> float:
    """A phase's seconds: its GPU time, or in eager PyTorch the CPU's time to launch its kernels when that is
    longer (each costs EAGER_OVERHEAD of Python dispatch; the GPU runs ahead only while kernels outlast it)."""
    return max(phase.seconds, sum(op.count for op in ops) * C.EAGER_OVERHEAD.value) if eager else phase.seconds


def _framework_traffic(arch: Architecture, job: TrainJob, p: Pass) -> list[Op]:
    """Memory traffic a training framework adds per micro-batch beyond the model's own operators.

    - mixed precision (torch autocast): each forward casts the fp32 weights to 16 bit (read 4 B, write 2 B) and
      each backward adds the 16-bit weight gradient into the fp32 ``.grad`` (read 2 + 4 B, write 4 B): 16 B per
      trainable parameter; pure bf16 only accumulates (read 2 + 2, write 2). Under ZeRO-3 the cast happens on the
      local shard and the all-gather writes the full 16-bit layer (2 B per parameter).
    - FP8 (Transformer Engine / torchao Float8): every linear quantizes its input, its weight and, in backward,
      its output gradient (read 2 B, write 1 B each, plus amax reductions).
    """
    ops: list[Op] = []
    shard = 1.0 / (job.tp * job.pp)
    trainable = (lora_params(arch, job) if job.trains_adapters else arch.total_params) * shard
    if job.precision in ("bf16", "fp16", "fp8"):
        per_param = 16.0 / (job.data_parallel if job.zero_stage == 3 else 1)
    else:
        per_param = 6.0 if job.precision == "pure-bf16" else 12.0
    if job.zero_stage == 3 and job.data_parallel > 1:
        per_param += 2.0 * 2  # gathered 16-bit layers written in forward and in backward
    ops.append(Op("weight_casts_grad_accumulation", "memory", 0.0, trainable * per_param, 4 * arch.layers))
    if job.precision == "fp8":
        linear = arch.params.linear * shard
        activations = sum(p.tokens * (x.d_in + x.d_out) * x.layers / job.pp for x in arch.params.linears) / job.tp
        ops.append(Op("fp8_casts", "memory", 0.0, 3.0 * (linear + 2 * activations), 12 * arch.layers))
    return ops


def _steps_per_update(job: TrainJob) -> int:
    accumulation = 1
    if job.global_batch:
        accumulation = math.ceil(job.global_batch / (job.batch * job.data_parallel))
    if job.pp > 1:
        return max(job.pp_microbatches or job.pp, accumulation)
    return accumulation


def _communication(arch: Architecture, job: TrainJob, gpu: GPU, catalog: Catalog, microbatches: int,
                   window_s: float) -> tuple[float, float]:
    """(exposed communication seconds, overlap slowdown seconds) of one optimizer step."""
    link = links(gpu, catalog, network=job.network, nodes=job.nodes, slot_link=job.slot_link)
    e = activation_bytes(job.precision)
    layers = arch.layers / job.pp
    tp_s = 0.0
    if job.tp > 1:
        passes = 3 if job.ckpt == "full" else 2
        size = job.batch * job.seq * arch.hidden * e
        tp_s = microbatches * passes * 2 * layers * all_reduce_s(size, job.tp, link.for_group(job.tp,
                                                                                                spans_nodes=False))
    dp = job.data_parallel
    spans = job.nodes > 1 and dp > 1
    dp_link = link.for_group(dp, spans_nodes=spans)
    shard_params = (lora_params(arch, job) if job.trains_adapters else arch.total_params) / (job.tp * job.pp)
    grad_bytes = shard_params * (2 if job.precision == "pure-bf16" else 4)
    if job.zero_stage == 3 and dp > 1:
        weight_bytes = arch.total_params / (job.tp * job.pp) * 2
        # forward and backward each gather every layer once (recompute runs inside the backward gather)
        overlappable = microbatches * 2 * all_gather_s(weight_bytes, dp, dp_link)
        overlappable += all_gather_s(grad_bytes, dp, dp_link)
    else:
        overlappable = all_reduce_s(grad_bytes, dp, dp_link)
    exposed = max(0.0, overlappable - window_s)
    slowdown = C.OVERLAP_SLOWDOWN.value * min(overlappable, window_s)
    return tp_s + exposed, slowdown


def _cnn_ops(arch: Architecture, job: TrainJob) -> tuple[list[Op], list[Op], list[Op]]:
    ops = conv_ops(arch.config, batch=job.batch, act_bytes=activation_bytes(job.precision), train=True,
                   image=job.image_size)
    return ops, [], []


def train_perf(arch: Architecture, job: TrainJob, gpu: GPU, catalog: Catalog, *,
               calibration: Calibration | None = None) -> TrainPerf:
    m = machine(gpu, _train_dtype(job.precision), calibration=calibration)
    if arch.kind == "cnn":
        m = machine(gpu, conv_dtype(m.dtype, gpu), calibration=calibration)
    fwd, bwd, recompute = _cnn_ops(arch, job) if arch.kind == "cnn" else _micro_batch_ops(arch, job)
    t_fwd, t_bwd, t_re = (phase_time(ops, m) for ops in (fwd, bwd, recompute))
    eager = not job.compile and arch.kind != "cnn"
    per_micro = sum(_dispatch_bound(t, ops, eager) for t, ops in ((t_fwd, fwd), (t_bwd, bwd), (t_re, recompute)))
    microbatches = _steps_per_update(job)
    trainable = (lora_params(arch, job) if job.trains_adapters else arch.total_params) / (job.tp * job.pp)
    if job.zero_stage >= 1:
        trainable /= job.data_parallel
    update = phase_time([Op("optimizer_step", "memory", 0.0, trainable * _UPDATE_BYTES[job.optimizer], 10)], m)
    bubble = pipeline_bubble(job.pp, microbatches) * microbatches * per_micro / (1 - pipeline_bubble(
        job.pp, microbatches)) if job.pp > 1 else 0.0
    window = microbatches * (t_bwd.seconds + (t_fwd.seconds if job.zero_stage == 3 else 0.0))
    comm, slowdown = _communication(arch, job, gpu, catalog, microbatches, window)
    compute = (microbatches * per_micro + update.seconds) / unmeasured_stack_factor(gpu, calibration)
    step = compute + bubble + comm + slowdown
    seq = 1 if arch.kind == "cnn" else job.seq  # a CNN "token" is an image
    tokens_per_step = job.data_parallel * microbatches * job.batch * seq
    tokens_per_s = tokens_per_step / step
    peak = gpu.peak_flops("fp8" if job.precision == "fp8" else ("fp16" if job.precision == "fp16" else "bf16"))
    if arch.kind == "cnn":
        flops_per_token = 3 * forward_flops_per_image(arch.config, job.image_size)
    else:
        flops_per_token = model_flops_per_token(arch, job.seq, weight_gradients=not job.trains_adapters)
    mfu = flops_per_token * tokens_per_s / (job.count * (peak or m.peak_flops))
    by_op = _merge([t_fwd.by_op, t_bwd.by_op, t_re.by_op], microbatches)
    by_op["optimizer_step"] = update.seconds
    if comm + slowdown > 0:
        by_op["communication (exposed)"] = comm + slowdown
    bound = "communication" if comm > 0.5 * compute else (
        "compute" if (t_fwd.compute_s + t_bwd.compute_s) >= (t_fwd.memory_s + t_bwd.memory_s) else "memory")
    return TrainPerf(
        step_time_s=step, tokens_per_s=tokens_per_s, tokens_per_s_per_gpu=tokens_per_s / job.count,
        samples_per_s=tokens_per_s / seq, mfu=mfu,
        epoch_time_s=job.tokens / tokens_per_s if job.tokens else None, bound=bound, compute_s=compute,
        communication_s=comm + slowdown, bubble_s=bubble, top_ops=_top(by_op, step),
        assumptions=_train_assumptions(m, job, microbatches) + unmeasured_stack_note(gpu, calibration, "training") + (
            ("MFU counts the full s x s attention matrix (PaLM appendix B, as llm-foundry and torchtitan report "
             "it); a causal kernel computes half of it, so at this sequence length MFU overstates the hardware's "
             "utilisation and can pass 100%",) if mfu > 0.9 * m.gemm_efficiency else ()),
    )


def _merge(parts: list[Mapping[str, float]], times: int) -> dict[str, float]:
    merged: dict[str, float] = {}
    for part in parts:
        for name, seconds in part.items():
            key = name.removesuffix(".bwd")
            merged[key] = merged.get(key, 0.0) + seconds * times
    return merged


def _top(by_op: Mapping[str, float], total: float, n: int = 6) -> tuple[tuple[str, float], ...]:
    ranked = sorted(by_op.items(), key=lambda kv: -kv[1])[:n]
    return tuple((name, seconds / total) for name, seconds in ranked)


def _train_assumptions(m: Machine, job: TrainJob, microbatches: int) -> tuple[str, ...]:
    return (
        f"matmuls in {m.dtype} at {m.gemm_efficiency:.0%} of the {m.peak_flops / 1e12:,.0f} TFLOPS dense peak "
        f"(measured maximum for this card or architecture), less for small GEMMs",
        f"attention kernels at {m.attention_efficiency:.0%} of peak; memory traffic at "
        f"{m.memory_bytes_per_s / 1e9:,.0f} GB/s ({C.MEMORY_EFFICIENCY.value:.0%} of the datasheet)",
        f"{microbatches} micro-batch(es) of {job.batch} x {job.seq} tokens per optimizer step on each "
        f"data-parallel rank",
        *((f"{job.nodes} nodes joined by {job.network or DEFAULT_NETWORK}" + ("" if job.network else
           " (assumed: --network names yours)"),) if job.nodes > 1 else ()),
    )


# ---------------------------------------------------------------- inference
def _infer_pass(arch: Architecture, job: InferJob, *, query: int, context: float, logits: int = 1) -> Pass:
    """One forward of the replica; ``logits`` positions per sequence reach the LM head (a verifying step scores
    every drafted token)."""
    w = weights(arch, job.weights)
    return Pass(batch=job.local_batch, query=query, context=context, act_bytes=activation_bytes(job.weights),
                weight_bytes=w.dense_bytes_per_weight, kv_bytes=bytes_per_element(job.kv_dtype), tp=job.tp,
                flash=job.flash_attn, logits_tokens=job.local_batch * logits, absorb_mla=job.engine != "hf",
                expert_bytes=w.expert_bytes_per_weight, ep=job.ep, dp=job.attention_dp)


def _dequantize(arch: Architecture, job: InferJob) -> list[Op]:
    """Batched GEMMs on AWQ/GPTQ weights unpack them to fp16 first (AutoAWQ's GEMM path above its batch
    threshold): read the packed weights, write and read fp16 copies. llama.cpp's MMQ kernels (ggml-cuda/mmq.cu)
    multiply the quantized GGUF blocks directly, so GGUF prefill pays no such pass."""
    if job.weights not in ("awq-int4", "gptq-int4", "int4"):
        return []
    w = weights(arch, job.weights)
    quantized = w.quantized / job.tp
    return [Op("dequantize", "memory", 0.0, quantized * (w.bits / 8 + 2 + 2), 7 * arch.layers)]


def _tp_comm_s(arch: Architecture, job: InferJob, tokens: int, gpu: GPU, catalog: Catalog) -> float:
    """Per layer under TP: an all-reduce after attention and one after a dense MLP; under --ep a dispatch and a
    combine all-to-all per MoE layer instead of its all-reduce, each GPU sending the top-k copies of its own tokens'
    hidden states (``tokens`` is the replica's, split over the attention groups)."""
    if job.replica_gpus <= 1:
        return 0.0
    path = links(gpu, catalog, network=job.network, nodes=job.nodes, slot_link=job.slot_link)
    size = tokens / job.attention_dp * arch.hidden * activation_bytes(job.weights)
    moe_layers = sum(b.count for b in arch.blocks if b.ffn.experts) if job.ep > 1 else 0
    seconds = 0.0
    if job.ep > 1:
        local = size * max(arch.experts_per_token, 1)
        seconds += 2 * moe_layers * all_to_all_s(local, job.ep, path.for_group(job.ep, spans_nodes=False))
    if job.tp > 1:
        ring = path.for_group(job.tp, spans_nodes=False)
        seconds += (2 * arch.layers - moe_layers) * all_reduce_s(size, job.tp, ring)
    return seconds


def infer_perf(arch: Architecture, job: InferJob, gpu: GPU, catalog: Catalog, *,
               calibration: Calibration | None = None, backend_scaled: bool = True) -> InferPerf:
    m = machine(gpu, matmul_dtype(job.weights, gpu), eager=job.engine == "hf", calibration=calibration)
    if arch.kind == "cnn":
        m = machine(gpu, conv_dtype(m.dtype, gpu), calibration=calibration)

        images = phase_time(conv_ops(arch.config, batch=job.batch, act_bytes=2, train=False, image=job.image_size), m)
        return InferPerf(bound=images.bound, top_ops=_top(images.by_op, images.seconds),
                         samples_per_s=job.batch / images.seconds, assumptions=_infer_assumptions(m))
    causal = arch.kind == "decoder"
    prefill_pass = _infer_pass(arch, job, query=job.input_len, context=job.input_len / 2 if causal else job.input_len)
    prefill = phase_time(forward_ops(arch, prefill_pass) + _dequantize(arch, job), m)
    prefill_s = prefill.seconds + _tp_comm_s(arch, job, job.batch * job.input_len, gpu, catalog)
    if not arch.decoder_layers:  # encoders: one forward pass per batch
        return InferPerf(bound=prefill.bound, top_ops=_top(prefill.by_op, prefill.seconds),
                         samples_per_s=job.batch / prefill_s, assumptions=_infer_assumptions(m))
    average_context = job.input_len + job.output_len / 2  # a sliding-window layer reads at most its window
    decode = phase_time(forward_ops(arch, _infer_pass(arch, job, query=1, context=average_context)), m)
    factor = decode_factor(gpu, job.engine, catalog) if backend_scaled and calibration is None else 1.0
    tpot = _decode_s(arch, job, gpu, catalog, m, batch=job.batch, context=average_context, factor=factor)
    e2e = prefill_s + max(job.output_len - 1, 0) * tpot
    scaled = (f"llama.cpp decode on {gpu.software.stack} scaled by {factor:.2f}, its published measurement against "
              "the model (estimate/backends.py)",) if factor != 1.0 else ()
    return InferPerf(
        bound=decode.bound, top_ops=_top(decode.by_op, decode.seconds), ttft_ms=prefill_s * 1e3,
        tpot_ms=tpot * 1e3, decode_tokens_per_s=job.batch / tpot,
        output_tokens_per_s=job.batch * job.output_len / e2e if job.output_len else None,
        e2e_latency_ms=e2e * 1e3, assumptions=_infer_assumptions(m) + scaled,
    )


def decode_step_s(arch: Architecture, job: InferJob, gpu: GPU, catalog: Catalog, *, batch: int,
                  context: float, calibration: Calibration | None = None) -> float:
    """One decode step of ``batch`` sequences at ``context`` tokens (the serving simulator's clock)."""
    m = machine(gpu, matmul_dtype(job.weights, gpu), eager=job.engine == "hf", calibration=calibration)
    return _decode_s(arch, job, gpu, catalog, m, batch=batch, context=context)


def _decode_s(arch: Architecture, job: InferJob, gpu: GPU, catalog: Catalog, m: Machine, *, batch: int,
              context: float, factor: float = 1.0) -> float:
    """Seconds per token of each sequence in a decode step of ``batch`` sequences: the step over the tokens each
    gains (``job.tokens_per_step``). With --spec-tokens K the step is one verifying forward of K + 1 tokens per
    sequence plus K passes of the draft head (one decoder layer and the LM head, as EAGLE and DeepSeek's MTP
    module are). The step replays the engine's CUDA graph of the next captured batch size (estimate/cuda_graphs.py);
    a batch the engine does not capture launches each kernel from Python, at least EAGER_OVERHEAD apiece."""
    query = job.spec_tokens + 1
    local = -(-batch // job.attention_dp)
    sizes = captured_sizes(job.engine, gpu.memory_gb, job.tp, job.max_num_seqs or 1024, query)
    graphed = graph_batch(job.engine, local, sizes)
    shaped = job.model_copy(update={"batch": (graphed or local) * job.attention_dp})
    ops = forward_ops(arch, _infer_pass(arch, shaped, query=query, context=context, logits=query))
    if job.spec_tokens:
        ops += forward_ops(arch, _infer_pass(arch, shaped, query=1, context=context), layers=1) * job.spec_tokens
    step = phase_time(ops, m).seconds / factor
    if sizes is not None and graphed is None:
        step = max(step, sum(op.count for op in ops) * C.EAGER_OVERHEAD.value)
    step += _tp_comm_s(arch, shaped, shaped.batch * query, gpu, catalog)
    return step / job.tokens_per_step


def prefill_s(arch: Architecture, job: InferJob, gpu: GPU, catalog: Catalog, *, tokens: int,
              calibration: Calibration | None = None) -> float:
    """Prefill of ``tokens`` prompt tokens: whole prompts of the job's input length batched together, and what is
    left as one chunk of a prompt (chunked prefill), its queries attending to about half a prompt of keys."""
    m = machine(gpu, matmul_dtype(job.weights, gpu), eager=job.engine == "hf", calibration=calibration)
    whole, rest = divmod(max(tokens, 1), job.input_len)
    seconds = 0.0
    for batch, query in ((whole, job.input_len), (1 if rest else 0, rest)):
        if not batch:
            continue
        shaped = job.model_copy(update={"batch": batch})
        p = _infer_pass(arch, shaped, query=query, context=job.input_len / 2)
        seconds += phase_time(forward_ops(arch, p) + _dequantize(arch, shaped), m).seconds
        seconds += _tp_comm_s(arch, shaped, batch * query, gpu, catalog)
    return seconds


def _infer_assumptions(m: Machine) -> tuple[str, ...]:
    return (
        f"matmuls in {m.dtype} at {m.gemm_efficiency:.0%} of the {m.peak_flops / 1e12:,.0f} TFLOPS dense peak; "
        f"memory traffic at {m.memory_bytes_per_s / 1e9:,.0f} GB/s",
        f"each kernel costs at least {m.kernel_floor_s * 1e6:.0f} us (launch/tail)",
    )
