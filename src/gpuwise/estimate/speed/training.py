"""Speed of a training step, operator by operator, with communication.

Per micro-batch on one GPU: forward + backward (2x the GEMM FLOPs of trainable weights, 1x for frozen ones, 2.5x for
FlashAttention) + recompute under checkpointing + QLoRA dequantization; per step: the optimizer update
(memory-bound) and the collectives: tensor-parallel all-reduces per layer (not overlapped), data-parallel gradient
all-reduce or ZeRO-3 all-gathers and reduce-scatter (overlapped with the backward pass, Calculon's 15 % slowdown),
and the pipeline bubble (p - 1) / (m + p - 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.catalog import Catalog
from gpuwise.estimate import constants as C
from gpuwise.estimate.dtypes import bytes_per_element
from gpuwise.estimate.plan import TrainPlan, adapted_linears
from gpuwise.estimate.roofline import Machine, Op, PhaseTime, machine, phase_time
from gpuwise.estimate.speed.breakdown import merged_seconds, top_ops
from gpuwise.estimate.speed.convolutions import conv_dtype, conv_ops, forward_flops_per_image
from gpuwise.estimate.speed.eager import training_forward_host_s
from gpuwise.estimate.speed.operators import Pass, forward_ops, layer_ops, model_flops_per_token
from gpuwise.estimate.speed.parallel import (
    DEFAULT_NETWORK,
    Links,
    all_gather_s,
    all_reduce_s,
    all_to_all_s,
    links,
    pipeline_bubble,
)
from gpuwise.estimate.speed.stacks import (
    fusion_note,
    stack_fusions,
    unmeasured_stack_factor,
    unmeasured_stack_note,
)
from gpuwise.workload.jobs.job import TrainJob
from gpuwise.workload.model.counts import Linear

_UPDATE_BYTES = {"adamw": 30.0, "paged-adamw": 30.0, "adamw-8bit": 18.0, "paged-adamw-8bit": 18.0, "sgd": 18.0,
                 "adafactor": 18.0}
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


def _backward(ops: list[Op], *, frozen_gemms: bool) -> list[Op]:
    out = []
    for op in ops:
        if op.kind == "gemm":
            factor = 1.0 if frozen_gemms and op.name != "lm_head" else 2.0
            out.append(Op(op.name + ".bwd", "gemm", op.flops * factor, op.bytes * factor, op.count * int(factor)))
        elif op.kind == "attention":
            out.append(Op(op.name + ".bwd", "attention", op.flops * 2.5, op.bytes * 2, op.count))
        else:
            moved = op.bytes * 2 if op.backward_bytes is None else op.backward_bytes
            out.append(Op(op.name + ".bwd", "memory", 0.0, moved, op.count))
    return out


def _micro_batch_ops(plan: TrainPlan) -> tuple[list[Op], list[Op], list[Op]]:
    """Forward, backward and recompute operators of one micro-batch on one GPU."""
    arch, job = plan.arch, plan.job
    e = plan.act_bytes
    causal = arch.kind == "decoder"
    p = Pass(batch=job.batch, query=job.seq, context=job.seq / 2 if causal else job.seq, act_bytes=e,
             weight_bytes=float(plan.weight_bytes), kv_bytes=e, tp=job.tp, flash=job.flash_attn,
             loss=True, eager_modules=plan.eager_modules, stream_bytes=plan.stream_bytes, fusions=stack_fusions(plan),
             ep=job.ep, dp=job.ep)  # under --ep a GPU's experts take the routed tokens of all ep ranks
    layers = plan.layers_per_stage
    fwd = forward_ops(arch, p, layers)
    bwd = _backward(fwd, frozen_gemms=job.trains_adapters)
    recompute: list[Op] = []
    if job.ckpt == "full":
        recompute = layer_ops(arch, p, layers)
    elif job.ckpt == "selective":
        recompute = [op for op in layer_ops(arch, p, layers) if op.kind == "attention" or "softmax" in op.name]
    if job.trains_adapters:
        adapter_fwd, adapter_bwd, merged_wgrad = _adapter_ops(plan, p)
        fwd.append(adapter_fwd)
        bwd += [adapter_bwd] + ([merged_wgrad] if merged_wgrad is not None else [])
        if job.ckpt == "full":
            recompute.append(adapter_fwd)
    fwd += _framework_traffic(plan, p)
    if job.method == "qlora":
        passes = 3 if job.ckpt == "full" else 2
        nf4 = bytes_per_element("nf4")
        linear = arch.params.linear / plan.model_parallel
        fwd.append(Op("nf4_dequantize", "memory", 0.0, linear * (nf4 + 2) * passes, 7 * int(layers) * passes))
    return fwd, bwd, recompute


def _adapter_ops(plan: TrainPlan, p: Pass) -> tuple[Op, Op, Op | None]:
    """LoRA's adapters beside each adapted linear: the rank-r matmuls (2 r (d_in + d_out) FLOPs per token forward,
    twice that backward) and the casts, scaling and add the framework runs around them (its profile's
    adapter_bytes, per element of the linear's input and output). A routed expert's adapter runs on the tokens
    routed to it: top-k copies of each token; transformers 5 stores the experts fused (one 3-D parameter per layer),
    which PEFT adapts through one ParamWrapper, so its kernels launch once per layer, not once per expert, and it
    merges the whole stack each forward (``_merged_experts``)."""
    arch, job = plan.arch, plan.job
    share = plan.layers_per_stage / max(arch.layers, 1) / job.tp
    fwd_in, fwd_out, bwd_in, bwd_out = plan.framework.adapter_bytes.value
    flops = fwd_bytes = bwd_bytes = wgrad = 0.0
    linears = merged_launches = 0
    for x in adapted_linears(arch, job):
        copies = p.tokens * x.layers * share * (max(arch.experts_per_token, 1) if x.count > 1 else 1)
        flops += 2.0 * copies * job.lora_rank * (x.d_in + x.d_out)
        fwd_bytes += copies * (fwd_in * x.d_in + fwd_out * x.d_out) * p.act_bytes / 2
        bwd_bytes += copies * (bwd_in * x.d_in + bwd_out * x.d_out) * p.act_bytes / 2
        linears += round(x.layers * share)
        if x.count > 1 and plan.framework.merges_fused_experts.value:
            merge_fwd, merge_bwd, merge_wgrad = _merged_experts(x, copies, x.layers * share)
            fwd_bytes, bwd_bytes, wgrad = fwd_bytes + merge_fwd, bwd_bytes + merge_bwd, wgrad + merge_wgrad
            merged_launches += round(x.layers * share)
    kernels = plan.framework.adapter_kernels * linears
    return (Op("lora_adapters", "memory", flops, fwd_bytes, kernels),
            Op("lora_adapters.bwd", "memory", 2 * flops, bwd_bytes, 2 * kernels),
            Op("lora_merged_experts.wgrad", "gemm", wgrad, 0.0, merged_launches) if wgrad else None)


def _merged_experts(x: Linear, copies: float, layers: float) -> tuple[float, float, float]:
    """What PEFT's ParamWrapper adds for a fused expert stack (the framework profile's merges_fused_experts): forward,
    baddbmm reads the 16-bit stack and writes the merged one (4 bytes per weight); backward, the grouped GEMM computes
    the merged weight's gradient (2 x routed tokens x d_in x d_out FLOPs, which a frozen weight skips), writes it and
    reads it once for each factor (6 bytes per weight). Returns (forward bytes, backward bytes, backward FLOPs)."""
    weights = x.count * x.d_in * x.d_out * layers
    return weights * 4.0, weights * 6.0, 2.0 * copies * x.d_in * x.d_out


def _dispatch_bound(phase: PhaseTime, ops: list[Op], eager: bool) -> float:
    """A phase's seconds: its GPU time, or in eager PyTorch the CPU's time to launch its kernels when that is
    longer (each costs EAGER_OVERHEAD of Python dispatch; the GPU runs ahead only while kernels outlast it)."""
    return max(phase.seconds, sum(op.count for op in ops) * C.EAGER_OVERHEAD.value) if eager else phase.seconds


def _framework_traffic(plan: TrainPlan, p: Pass) -> list[Op]:
    """Memory traffic a training framework adds per micro-batch beyond the model's own operators.

    - mixed precision (torch autocast): each forward casts the fp32 weights to 16 bit (read 4 B, write 2 B) and
      each backward adds the 16-bit weight gradient into the fp32 ``.grad`` (read 2 + 4 B, write 4 B): 16 B per
      trainable parameter; pure bf16 only accumulates (read 2 + 2, write 2). Under ZeRO-3 the cast happens on the
      local shard and the all-gather writes the full 16-bit layer (2 B per parameter).
    - FP8 (Transformer Engine / torchao Float8): every linear quantizes its input, its weight and, in backward,
      its output gradient (read 2 B, write 1 B each, plus amax reductions).
    """
    arch, job = plan.arch, plan.job
    ops: list[Op] = []
    shard = 1.0 / plan.model_parallel
    trainable = plan.trainable_params * shard
    sharding = plan.sharding
    if job.precision in ("bf16", "fp16", "fp8"):
        per_param = 16.0 / (sharding.ranks if sharding.stage == 3 else 1)
    else:
        per_param = 6.0 if job.precision == "pure-bf16" else 12.0
    per_param += 2.0 * _gathers_per_micro_batch(plan)  # gathered 16-bit layers written in forward and backward
    ops.append(Op("weight_casts_grad_accumulation", "memory", 0.0, trainable * per_param, 4 * arch.layers))
    if job.precision == "fp8":
        linear = arch.params.linear * shard
        activations = sum(p.tokens * (x.d_in + x.d_out) * x.layers / job.pp for x in arch.params.linears) / job.tp
        ops.append(Op("fp8_casts", "memory", 0.0, 3.0 * (linear + 2 * activations), 12 * arch.layers))
    return ops


def _communication(plan: TrainPlan, catalog: Catalog, window_s: float) -> tuple[float, float]:
    """(exposed communication seconds, overlap slowdown seconds) of one optimizer step."""
    arch, job, microbatches = plan.arch, plan.job, plan.microbatches
    link = links(plan.gpu, catalog, network=job.network, nodes=job.nodes, slot_link=job.slot_link)
    e = plan.act_bytes
    layers = plan.layers_per_stage
    tp_s = 0.0
    if job.tp > 1:
        passes = 3 if job.ckpt == "full" else 2
        size = job.batch * job.seq * arch.hidden * e
        tp_s = microbatches * passes * 2 * layers * all_reduce_s(size, job.tp, link.for_group(job.tp,
                                                                                                spans_nodes=False))
    tp_s += _expert_all_to_all_s(plan, link)
    dp = job.data_parallel
    spans = job.nodes > 1 and dp > 1
    dp_link = link.for_group(dp, spans_nodes=spans)
    shard_params = plan.trainable_params / plan.model_parallel
    grad_bytes = shard_params * plan.state_bytes * plan.expert_share_held
    gathers = _gathers_per_micro_batch(plan)
    if gathers:
        weight_bytes = arch.total_params / plan.model_parallel * 2
        # ZeRO-3 gathers every layer in forward and again in backward (the recompute runs inside the backward
        # gather); SHARD_GRAD_OP / reshard_after_forward=False once, in forward; gradients are reduce-scattered
        ranks = plan.sharding.ranks
        overlappable = microbatches * gathers * all_gather_s(weight_bytes, ranks, dp_link)
        overlappable += all_gather_s(grad_bytes, ranks, dp_link)
        if ranks < dp:  # hybrid: the shards' gradients are all-reduced across the machines' replicas
            overlappable += all_reduce_s(grad_bytes / ranks, dp // ranks, link.for_group(dp // ranks,
                                                                                           spans_nodes=spans))
    else:
        overlappable = all_reduce_s(grad_bytes, dp, dp_link)
    exposed = max(0.0, overlappable - window_s)
    slowdown = C.OVERLAP_SLOWDOWN.value * min(overlappable, window_s)
    return tp_s + exposed, slowdown


def _gathers_per_micro_batch(plan: TrainPlan) -> int:
    """All-gathers of the 16-bit weights per micro-batch: 2 at ZeRO-3 (forward and backward), 1 where a runtime
    gathers for forward and keeps them to backward (FSDP SHARD_GRAD_OP), 0 where the weights are whole (DeepSpeed
    ZeRO-1/2 all-gathers the updated partitions once per step, an all-reduce's traffic with the reduce-scatter)."""
    sharding, job = plan.sharding, plan.job
    if job.data_parallel <= 1 or sharding.ranks <= 1 or (job.pp > 1 and sharding.stage >= 2):
        return 0
    if sharding.stage == 3:
        return 2
    return 1 if sharding.stage == 2 and sharding.profile.shard_is_master.value else 0


def _expert_all_to_all_s(plan: TrainPlan, link: Links) -> float:
    """--ep: each MoE layer dispatches every token's top-k copies to the GPUs holding their experts and combines
    the results back, in forward, in backward (the gradients' way), and again in a checkpointed layer's recompute;
    not overlapped (the next operator needs the tokens). DeepSeek-V3 report sec. 3.4; torchtitan expert parallel."""
    arch, job = plan.arch, plan.job
    if job.ep <= 1:
        return 0.0
    moe_layers = sum(b.count for b in arch.blocks if b.ffn.experts) * plan.layers_per_stage / max(arch.layers, 1)
    passes = 3 if job.ckpt == "full" else 2
    size = job.batch * job.seq * max(arch.experts_per_token, 1) * arch.hidden * plan.act_bytes
    group = link.for_group(job.ep, spans_nodes=link.leaves_node(job.ep, job.nodes))
    return plan.microbatches * passes * 2 * moe_layers * all_to_all_s(size, job.ep, group)


def _cnn_ops(plan: TrainPlan) -> tuple[list[Op], list[Op], list[Op]]:
    job = plan.job
    ops = conv_ops(plan.arch.config, batch=job.batch, act_bytes=plan.act_bytes, train=True, image=job.image_size)
    return ops, [], []


@dataclass(frozen=True)
class _Step:
    """One optimizer step's parts, in seconds, and the per-operator times it was built from."""

    compute_s: float
    bubble_s: float
    communication_s: float
    slowdown_s: float
    by_op: dict[str, float]
    bound: str

    @property
    def seconds(self) -> float:
        return self.compute_s + self.bubble_s + self.communication_s + self.slowdown_s


def _paging_s(plan: TrainPlan, catalog: Catalog, paged_out_bytes: float) -> float:
    """A paged optimizer's states that do not fit (the memory model's paged_out_bytes) come in over the card's host
    link for the update and go out again when the next forward needs the room: twice their bytes per step, at the
    link's achieved rate (bitsandbytes prefetches paged states with cudaMemPrefetchAsync before the step)."""
    link = catalog.interconnects.get(plan.gpu.native_link)
    if paged_out_bytes <= 0 or link is None:
        return 0.0
    return 2 * paged_out_bytes / link.achieved_bytes_per_s


def _step(plan: TrainPlan, catalog: Catalog, m: Machine, paged_out_bytes: float = 0.0) -> _Step:
    arch, job, microbatches = plan.arch, plan.job, plan.microbatches
    fwd, bwd, recompute = _cnn_ops(plan) if arch.kind == "cnn" else _micro_batch_ops(plan)
    t_fwd, t_bwd, t_re = (phase_time(ops, m) for ops in (fwd, bwd, recompute))
    eager = not job.compile and arch.kind != "cnn"
    host = training_forward_host_s(plan) if arch.kind != "cnn" else 0.0
    per_micro = sum(max(_dispatch_bound(t, ops, eager), host if ops and ops is not bwd else 0.0)
                    for t, ops in ((t_fwd, fwd), (t_bwd, bwd), (t_re, recompute)))
    trainable = plan.trainable_params / plan.model_parallel
    if plan.sharding.stage >= 1:
        trainable /= plan.sharding.ranks
    update = phase_time([Op("optimizer_step", "memory", 0.0, trainable * _UPDATE_BYTES[job.optimizer], 10,
                            fixed_s=_paging_s(plan, catalog, paged_out_bytes))], m)
    bubble = pipeline_bubble(job.pp, microbatches) * microbatches * per_micro / (1 - pipeline_bubble(
        job.pp, microbatches)) if job.pp > 1 else 0.0
    window = microbatches * (t_bwd.seconds + (t_fwd.seconds if _gathers_per_micro_batch(plan) else 0.0))
    comm, slowdown = _communication(plan, catalog, window)
    compute = (microbatches * per_micro + update.seconds) / unmeasured_stack_factor(plan.gpu, plan.calibration)
    by_op = merged_seconds([t_fwd.by_op, t_bwd.by_op, t_re.by_op], microbatches)
    by_op["optimizer_step"] = update.seconds
    if comm + slowdown > 0:
        by_op["communication (exposed)"] = comm + slowdown
    bound = "communication" if comm > 0.5 * compute else (
        "compute" if (t_fwd.compute_s + t_bwd.compute_s) >= (t_fwd.memory_s + t_bwd.memory_s) else "memory")
    if host > t_fwd.seconds and comm <= 0.5 * compute:
        bound = "host"  # Python dispatching the forward's operators takes longer than the GPU runs them
    return _Step(compute, bubble, comm, slowdown, by_op, bound)


def _mfu(plan: TrainPlan, m: Machine, tokens_per_s: float) -> float:
    arch, job = plan.arch, plan.job
    peak = plan.gpu.peak_flops("fp8" if job.precision == "fp8" else ("fp16" if job.precision == "fp16" else "bf16"))
    if arch.kind == "cnn":
        flops_per_token = 3 * forward_flops_per_image(arch.config, job.image_size)
    else:
        flops_per_token = model_flops_per_token(arch, job.seq, weight_gradients=not job.trains_adapters)
    return flops_per_token * tokens_per_s / (job.count * (peak or m.peak_flops))


def train_perf(plan: TrainPlan, catalog: Catalog, *, paged_out_bytes: float = 0.0) -> TrainPerf:
    """Speed of one optimizer step of ``plan``; ``paged_out_bytes``: a paged optimizer's states the memory model
    found no room for on the card."""
    arch, job, gpu = plan.arch, plan.job, plan.gpu
    m = plan.machine
    if arch.kind == "cnn":
        m = machine(gpu, conv_dtype(m.dtype, gpu), calibration=plan.calibration)
    step = _step(plan, catalog, m, paged_out_bytes)
    seq = 1 if arch.kind == "cnn" else job.seq  # a CNN "token" is an image
    tokens_per_s = job.data_parallel * plan.microbatches * job.batch * seq / step.seconds
    mfu = _mfu(plan, m, tokens_per_s)
    return TrainPerf(
        step_time_s=step.seconds, tokens_per_s=tokens_per_s, tokens_per_s_per_gpu=tokens_per_s / job.count,
        samples_per_s=tokens_per_s / seq, mfu=mfu,
        epoch_time_s=job.tokens / tokens_per_s if job.tokens else None, bound=step.bound, compute_s=step.compute_s,
        communication_s=step.communication_s + step.slowdown_s, bubble_s=step.bubble_s,
        top_ops=top_ops(step.by_op, step.seconds),
        assumptions=_train_assumptions(m, job, plan.microbatches) + fusion_note(plan) + unmeasured_stack_note(
            gpu, plan.calibration, "training") + (
            ("MFU counts the full s x s attention matrix (PaLM appendix B, as llm-foundry and torchtitan report "
             "it); a causal kernel computes half of it, so at this sequence length MFU overstates the hardware's "
             "utilisation and can pass 100%",) if mfu > 0.9 * m.gemm_efficiency else ()),
    )


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
