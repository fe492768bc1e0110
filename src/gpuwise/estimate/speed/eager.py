"""Host time of an eager runtime: a step is never shorter than the time Python takes to dispatch its operators.

In eager PyTorch every operator of a module (each view, cast, add and matmul) passes through Python, the dispatcher
and, for most, a kernel launch; the GPU runs ahead only while its kernels outlast that. transformers' ``generate``
at a small batch is bound by it: a decode step of an 8B model moves 16 GB in about 4 ms on an H200 but dispatches
some 2,500 operators. The operators per module are the runtime profile's :class:`~gpuwise.runtimes.schema.HostOps`
(traced from its code); the seconds per operator its ``launch_cost_s``.
"""

from __future__ import annotations

from dataclasses import replace

from gpuwise.estimate import constants as C
from gpuwise.estimate.plan import InferPlan, Plan, TrainPlan, adapted_linears
from gpuwise.estimate.speed.operators import experts_touched
from gpuwise.estimate.speed.stacks import stack_fusions
from gpuwise.runtimes.schema import EngineProfile, Fusions, HostOps
from gpuwise.workload.model.architecture import Architecture
from gpuwise.workload.model.blocks import Block

_ATTENTION_LINEARS = {"gqa": 4, "mla": 5, "linear": 3}  # q, k, v, o; MLA's q, kv_a, kv_b, o and q_a/q_b; DeltaNet's
# in_proj_qkvz, in_proj_ba and out_proj


def _block_ops(block: Block, ops: HostOps, *, sixteen_bit: bool, rms_norm: bool, rotary: bool, tokens: int) -> float:
    a, f = block.attention, block.ffn
    norms = 2 + (2 if a.qk_norm != "none" or a.kind == "mla" else 0)  # MLA norms its q and kv latents
    norm = ops.norm + (ops.norm_casts if sixteen_bit else 0) if rms_norm else ops.layer_norm
    linears = _ATTENTION_LINEARS[a.kind]
    feed_forward: float
    if f.experts:
        linears += 1 + (3 if f.shared_width else 0)  # the router, a shared expert's MLP
        feed_forward = ops.moe + (ops.gated_activation if f.shared_width else 0)
        feed_forward += ops.per_expert * experts_touched(f, tokens)  # a Python loop over the experts hit
    else:
        linears += 3 if f.gated else 2
        feed_forward = ops.gated_activation if f.gated else 1
    return (norms * norm + linears * ops.linear + (ops.rotary if rotary and a.kind != "linear" else 0)
            + ops.attention + ops.residual + feed_forward)


def host_ops_per_step(arch: Architecture, ops: HostOps, *, sixteen_bit: bool = True, generate: bool = True,
                      tokens: int = 1) -> float:
    """Operators one forward of ``tokens`` tokens dispatches (a decode step of generate, a prefill, an encoder's or a
    training step's forward). RMSNorm families run the norm op by op, LayerNorm is one operator; decoders rotate q and
    k (RoPE), encoders add absolute positions once. Only a MoE block that loops over its experts in Python depends on
    the tokens: it runs its loop's body once per expert that received any (``experts_touched``: top-k experts at a
    batch-1 decode step, nearly all of them in a prefill)."""
    decoder = arch.kind == "decoder"
    outside = ops.per_step if decoder and generate else ops.per_forward
    return outside + sum(b.count * _block_ops(b, ops, sixteen_bit=sixteen_bit, rms_norm=arch.rms_norm,
                                              rotary=decoder, tokens=tokens) for b in arch.blocks)


def host_seconds(engine: EngineProfile, arch: Architecture, *, sixteen_bit: bool = True, tokens: int = 1) -> float:
    """Seconds the engine's host takes to dispatch one forward of ``tokens`` tokens of ``arch`` at the engine's
    launch_cost_s per operator (0 for a runtime without an inventory: a compiled engine, whose launch floor the
    roofline's per-kernel overhead and graph capture already cover)."""
    if engine.host_ops is None or engine.launch_cost_s is None:
        return 0.0
    return host_ops_per_step(arch, engine.host_ops, sixteen_bit=sixteen_bit, tokens=tokens) * engine.launch_cost_s.value


def encoder_layer_ops(ops: HostOps) -> int:
    """Operators of one pre-LN transformer encoder layer (CLIP's, BERT's): two LayerNorms, q, k, v, out and the two
    MLP linears, the attention's views and call, two residual adds, the activation."""
    return 2 * ops.layer_norm + 6 * ops.linear + ops.attention + ops.residual + 1


def training_forward_host_s(plan: TrainPlan) -> float:
    """The host's time to dispatch one training forward of the framework's eager modules (transformers' through the
    HF-based stacks) and, with LoRA, PEFT's operators around each adapted linear: 0 when the framework has no
    traced inventory or runs fused or compiled kernels (the per-kernel floor then applies)."""
    framework = plan.framework
    if framework.host_ops is None or framework.launch_cost_s is None or not plan.eager_modules:
        return 0.0
    ops = host_ops_per_step(plan.arch, _swapped(framework.host_ops, stack_fusions(plan)), sixteen_bit=True,
                            generate=False, tokens=plan.job.batch * plan.job.seq)
    if plan.job.trains_adapters:
        share = plan.layers_per_stage / max(plan.arch.layers, 1)
        ops += round(sum(x.layers * share for x in adapted_linears(plan.arch, plan.job))) * framework.adapter_dispatches
    return ops * framework.launch_cost_s.value


def _swapped(ops: HostOps, fusions: Fusions) -> HostOps:
    """The eager inventory with the modules a kernel library swaps in (Liger's RMSNorm, RoPE, SwiGLU) counted at what
    the library's wrapper dispatches instead of the model's own operators."""
    if fusions.dispatches is None:
        return ops
    fused = fusions.dispatches
    return replace(ops, norm=fused if fusions.norm else ops.norm, norm_casts=0 if fusions.norm else ops.norm_casts,
                   rotary=fused if fusions.rotary else ops.rotary,
                   gated_activation=fused if fusions.activation else ops.gated_activation)


def host_s_per_dispatch(plan: Plan) -> float:
    """What the host spends per dispatched operator: the runtime's measured launch cost (the transformers engine's, and
    the training frameworks' that run transformers' modules; a validate record's where the plan is calibrated), the
    eager PyTorch floor for another runtime that is not compiled, nothing for a compiled or graph-replaying one."""
    if plan.job.compile:
        return 0.0
    if isinstance(plan, InferPlan):
        engine = plan.engine
        if engine.launch_cost_s is not None:
            return engine.launch_cost_s.value
        return C.EAGER_OVERHEAD.value if engine.eager.value else 0.0
    cost = plan.framework.launch_cost_s
    return cost.value if cost is not None else C.EAGER_OVERHEAD.value
