"""What the software stack changes in a step's speed: the operators it fuses, and its maturity off CUDA.

Fused kernels. A stack that swaps a layer's memory-bound modules for fused kernels moves fewer bytes: a fused RMSNorm
reads the hidden state once and writes it once where transformers' module runs eight kernels over it, a fused SwiGLU
reads gate and up and writes their product where the eager pair also writes and rereads SiLU's output, a fused linear
cross-entropy never writes the logits in fp32. Which operators each stack fuses is its profile's ``Fusions``
(runtimes/frameworks.py, each cited from the stack's code at a commit; torch.compile's for --compile); the bytes each
fused kernel moves are worked out below from its loads and stores (``_fused_parts``, ``loss_op``).

Software maturity: how fast a stack other than CUDA runs, from what has been measured on it.

PyTorch work (training, diffusers) on a consumer or workstation card of a stack with no published end-to-end
measurement is cut by a stated discount (constants.UNMEASURED_STACK_DISCOUNT); a card the user calibrated with
`gpuwise bench --save`, and data-center cards (measured by MLPerf-class runs and MAMF), are not.

llama.cpp on a backend other than CUDA has its decode speed scaled by one published measurement of that backend
(estimate/speed/inference.py, ``decode_factor``): the decode model is built from CUDA's kernels and held to CUDA
measurements (benchmarks/). ROCm's and SYCL's kernels reach a different share of what the hardware allows, so for
each such stack one published llama-bench run (constants.LLAMACPP_DECODE_REFERENCE: the card, llama 7B Q4_0, tg128)
is set against the model's own figure for that very run; the ratio scales llama.cpp decode on the stack's consumer
and workstation cards. Data-center cards (MI300X) are not scaled: their decode at one sequence is bound by kernel
latency, which one consumer card does not measure. Other cards of a stack are the out-of-sample check: ROCm's
llama-bench runs on the Radeon Pro W7900 and the Ryzen AI Max+ 395, never used to set the scale
(benchmarks/data/public-measurements.yaml, B-llamacpp-llama7b-q4_0-tg128-w7900-rocm and -strixhalo-rocm, scored by
benchmarks/accuracy.py and held in tests/test_maturity.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from gpuwise.catalog import GPU
from gpuwise.estimate import constants as C
from gpuwise.estimate.roofline import Op
from gpuwise.runtimes.frameworks import TORCH_COMPILE
from gpuwise.runtimes.schema import UNFUSED, Fusions, LossKernel
from gpuwise.workload.model.blocks import Block

if TYPE_CHECKING:
    from gpuwise.estimate.calibration import Calibration
    from gpuwise.estimate.plan import TrainPlan


class Pass(Protocol):
    """What the layer's memory-bound operators read of a forward pass (speed/operators.py ``Pass``)."""

    @property
    def tokens(self) -> int: ...
    @property
    def tp(self) -> int: ...
    @property
    def act_bytes(self) -> int: ...
    @property
    def stream_bytes(self) -> int | None: ...
    @property
    def eager_modules(self) -> bool: ...
    @property
    def fusions(self) -> Fusions | None: ...

def unmeasured_stack_factor(gpu: GPU, calibration: Calibration | None = None) -> float:
    """The speed factor of PyTorch work on ``gpu``'s stack: UNMEASURED_STACK_DISCOUNT where nothing end-to-end was
    published for this class of card, else 1.0."""
    if calibration is not None or gpu.segment == "datacenter" or gpu.software.stack not in C.UNMEASURED_STACKS:
        return 1.0
    return C.UNMEASURED_STACK_DISCOUNT.value


def unmeasured_stack_note(gpu: GPU, calibration: Calibration | None, work: str) -> tuple[str, ...]:
    factor = unmeasured_stack_factor(gpu, calibration)
    if factor == 1.0:
        return ()
    return (f"no published end-to-end {work} measurement for {gpu.software.stack} on {gpu.id}: the modelled speed "
            f"is cut to {factor:.0%} (gpuwise policy; `gpuwise bench --save` on the card replaces it)",)


# ---------------------------------------------------------------- fused kernels by stack
def stack_fusions(plan: TrainPlan) -> Fusions:
    """The operators the plan's stack runs fused: its framework's, or what --loss fused swaps in (transformers'
    use_liger_kernel), with torch.compile's added under --compile. The cross-entropy is the stack's fused one under
    --loss fused (Liger's fused linear cross-entropy where the stack names none, as the memory model reads the flag)
    and torch's over fp32 logits otherwise."""
    framework, job = plan.framework, plan.job
    fusions = framework.fusions
    if job.loss == "fused" and framework.fused_loss_fusions is not None:
        fusions = framework.fused_loss_fusions
    if job.compile:
        fused = {name: getattr(fusions, name) or getattr(TORCH_COMPILE, name)
                 for name in ("norm", "residual_in_norm", "activation", "rotary")}
        fusions = replace(fusions, **fused, source=fusions.source + "; " + TORCH_COMPILE.source)
    if job.loss != "fused":
        return replace(fusions, loss="fp32_logits")
    if fusions.loss != "fp32_logits":
        return fusions
    return replace(fusions, loss="fused_linear", library=fusions.library or "Liger's")  # the flag's default kernel


_LOSS_WORDS = {"fused_linear": "a fused linear cross-entropy (no fp32 logits)",
               "in_place": "an in-place cross-entropy over the 16-bit logits"}


def fusion_note(plan: TrainPlan) -> tuple[str, ...]:
    """The assumption a training estimate states about the kernels its stack fuses (none: nothing said)."""
    fusions = stack_fusions(plan)
    fused = [name for name, on in (("RMSNorm", fusions.norm), ("the residual add inside the norm",
                                                              fusions.residual_in_norm),
                                   ("SwiGLU", fusions.activation), ("RoPE", fusions.rotary)) if on]
    if fusions.loss in _LOSS_WORDS:
        fused.append(_LOSS_WORDS[fusions.loss])
    if not fused:
        return ()
    libraries = [fusions.library] if fusions.library else []
    if plan.job.compile and TORCH_COMPILE.library not in libraries:
        libraries.append(TORCH_COMPILE.library)
    return (f"{plan.framework.name} runs {' and '.join(libraries) or 'its'} fused kernels for {', '.join(fused)} "
            "(runtimes/frameworks.py, from the stack's code)",)


EAGER_BACKWARD_RATIO = 2.2
"""Bytes autograd moves in backward per byte of these modules' forward: each mul writes two gradients from the
saved inputs (twice its forward), pow's gradient is two muls, an input used twice (the residual, RMSNorm's x)
accumulates its gradients with an add, the norm weights' gradients reduce over the tokens. Traced
(gpuwise.workload.trace.kernels, transformers 5.25 on fake tensors, a bf16-autocast layer of hidden 1024): Llama
845 MB forward, 1,837 backward (2.17); Qwen3 1,099 and 2,470 (2.25)."""


@dataclass(frozen=True)
class _Part:
    """One memory-bound operator of a layer: bytes per token forward and backward, kernels forward."""

    forward: float
    backward: float
    kernels: int


def _widths(block: Block, p: Pass) -> tuple[float, float, float]:
    """(activation elements per token, rotary elements of q and k, QK-norm elements) on one TP shard."""
    a, ffn, t = block.attention, block.ffn, p.tp
    width = ffn.width / t * (max(ffn.top_k, 1) if ffn.experts else 1) + ffn.shared_width / t
    rotary = (a.q_width + a.kv_heads * a.head_dim) / t if a.kind == "gqa" else 0.0
    return width, rotary, rotary if a.qk_norm != "none" else 0.0


def _eager_parts(block: Block, p: Pass, h: int, fusions: Fusions) -> dict[str, _Part]:
    """The layer as transformers' eager modules launch it, kernel by kernel (modeling_llama.py and copies):
    LlamaRMSNorm is to(fp32), pow, mean, add, rsqrt, mul, to(dtype), mul by the weight: 8 kernels moving
    4 s + 28 bytes per element of a stream of s-byte elements; apply_rotary_pos_emb is q*cos, neg and cat
    (rotate_half), *sin, add: 5 kernels and 10 e bytes per element of q and of k; SiLU(gate) * up: 2 kernels,
    5 e bytes per element; each residual add 3 s bytes; a QK-norm (Qwen3) is two more RMSNorms over q and k, on
    16-bit elements. Under autocast the residual stream stays fp32 (the fp32 embedding plus each bf16 sublayer
    output), so s = 4 there, and each linear that reads a normed fp32 hidden state casts it to 16 bits itself (read
    s, write e): q, k and v (three modules in transformers), gate and up. Autocast caches only the casts of leaf
    tensors, the weights (PyTorch docs, torch.autocast). A QK-norm's product with its fp32 weight promotes q and k to
    fp32 (torch type promotion: mul is not an autocast op), so its rotary runs in fp32 and SDPA casts q and k back --
    unless the stack's fused norm keeps q and k in their dtype."""
    a, ffn = block.attention, block.ffn
    e, s = p.act_bytes, p.stream_bytes or p.act_bytes
    width, rotary, qk_norm = _widths(block, p)
    casts = (3 + (2 if ffn.gated else 1)) if s != e and a.kind == "gqa" else 0
    qk = s if qk_norm and not fusions.norm else e  # the dtype the QK-norm leaves q and k in
    r = EAGER_BACKWARD_RATIO
    parts = {"norm": 2 * (4 * s + 28) * h, "residual": 2 * 3 * s * h,
             "activation": (5 if ffn.gated else 2) * e * width,
             "rotary": 10 * qk * rotary + (qk + e) * rotary * (qk != e), "qk_norm": (4 * e + 24 + qk) * qk_norm,
             "casts": casts * (s + e) * h}
    kernels = {"norm": 16, "residual": 2, "activation": 2 if ffn.gated else 1, "rotary": 10 if rotary else 0,
               "qk_norm": 16 if qk_norm else 0, "casts": casts}
    return {name: _Part(moved, r * moved, kernels[name]) for name, moved in parts.items()}


def _native_parts(block: Block, p: Pass, h: int) -> dict[str, _Part]:
    """The layer with one native kernel per operator (a LayerNorm, GELU, or a stack whose modules are not the
    model's): each norm reads and writes the hidden state, each residual add reads two and writes one, the activation
    reads its inputs and writes its output, the rotary (or the bias adds) reads and writes q and k; backward moves
    twice the forward's bytes. A QK-norm (Qwen3, Gemma 3) is not charged here (nor by the inference engines, whose
    figures this path also sets)."""
    a, ffn, t, e = block.attention, block.ffn, p.tp, p.act_bytes
    active = max(ffn.top_k, 1) if ffn.experts else 1
    parts = {"norm": (2 * 2 * h, 2), "residual": (2 * 3 * h, 2),
             "activation": ((3 if ffn.gated else 2) * ffn.width / t * active + 3 * ffn.shared_width / t, 1),
             "rotary": (2 * (a.q_width + a.kv_heads * a.head_dim) / t, 1)}
    return {name: _Part(e * moved, 2 * e * moved, kernels) for name, (moved, kernels) in parts.items()}


def _fused_parts(block: Block, p: Pass, h: int, fusions: Fusions) -> dict[str, _Part]:
    """Bytes per token of the stack's fused kernels, from their loads and stores (s: the residual stream's element,
    e: an activation's):
    - RMSNorm (Liger rms_norm_forward, Unsloth _rms_layernorm_forward, Transformer Engine's LayerNormLinear): forward
      reads x and writes y (2 s per element, the per-row rstd aside); backward reads dy and x and writes dx (3 s).
    - the residual add inside the norm (inductor's prologue fusion): one kernel reads x and the residual and writes
      the sum and the normed output, 4 s where the add and the norm took 3 s + 2 s; backward reads dy, the residual's
      gradient and x and writes dx, 4 s where they took 3 s + 3 s (the norm's and the gradient accumulation's).
    - SwiGLU (Liger swiglu_forward/backward): forward reads gate and up and writes their product (3 e per element
      of the MLP width); backward reads dc, gate and up and writes both gradients over them (5 e). GELU: 2 e, 3 e.
    - RoPE (Liger rope_forward, Unsloth _rope_embedding): in place on q and k, 2 e per element forward and back.
    - QK-norm: the RMSNorm kernel on q and k, 2 e and 3 e (where it replaces transformers' QK-norm modules).
    Worked example (tests/test_fused_stacks.py): Llama-3.1-8B at bf16, h 4096, MLP 14336, q + k 5120 elements:
    norms 2 x 2 x 2 x 4096 = 32,768 B/token forward, activation 3 x 2 x 14336 = 86,016, rotary 2 x 2 x 5120 =
    20,480."""
    ffn = block.ffn
    e, s = p.act_bytes, p.stream_bytes or p.act_bytes
    width, rotary, qk_norm = _widths(block, p)
    parts: dict[str, _Part] = {}
    if fusions.norm:
        parts["norm"] = _Part(2 * 2 * s * h, 2 * 3 * s * h, 2)
        if p.eager_modules:  # in place of transformers' QK-norm modules (the native path charges none)
            parts["qk_norm"] = _Part(2 * e * qk_norm, 3 * e * qk_norm, 2 if qk_norm else 0)
    if fusions.residual_in_norm:  # what the fused add costs beyond the norm's own 2 s and 3 s
        parts["residual"] = _Part(2 * 2 * s * h, 2 * 1 * s * h, 0)
    if fusions.activation:
        parts["activation"] = _Part((3 if ffn.gated else 2) * e * width, (5 if ffn.gated else 3) * e * width, 1)
    if fusions.rotary:
        parts["rotary"] = _Part(2 * e * rotary, 2 * e * rotary, 1 if rotary else 0)
    return parts


def elementwise_op(block: Block, p: Pass, n: int, h: int) -> Op:
    """The norms, residual adds, activation and rotary of ``n`` layers of ``block``: the stack's fused kernels where
    it has them (``p.fusions``), else the model's own modules -- transformers' op by op (``p.eager_modules``) or one
    native kernel each."""
    fusions = p.fusions or UNFUSED
    base = _eager_parts(block, p, h, fusions) if p.eager_modules else _native_parts(block, p, h)
    parts = {**base, **_fused_parts(block, p, h, fusions)}
    forward = p.tokens * n * sum(part.forward for part in parts.values())
    backward = p.tokens * n * sum(part.backward for part in parts.values())
    return Op("norms_residuals_activation", "memory", 0.0, forward, n * sum(part.kernels for part in parts.values()),
              backward_bytes=backward)


def loss_op(logits: float, act_bytes: int, kernel: LossKernel) -> Op:
    """The cross-entropy over ``logits`` positions x vocabulary entries (e = act_bytes):
    - fp32_logits (torch.nn.functional.cross_entropy over the fp32 upcast, as transformers' ForCausalLMLoss runs it):
      forward the cast (read e, write 4) and log_softmax (read 4, write 4); backward nll_loss's zero-filled gradient
      (4), log_softmax's backward (read 4 + 4, write 4) and the cast back (read 4, write e). Traced
      (gpuwise.workload.trace.kernels on transformers 5.25): 6 + 8 forward and 8 + 12 + 6 backward at e = 2.
    - fused_linear (Liger fused_linear_cross_entropy_forward): each chunk's 16-bit logits (the LM head GEMM's
      output) are read twice by liger_cross_entropy_kernel (the online max and sum, then the gradient) and
      overwritten by their gradient: 3 e per logit, all in forward; backward has nothing left to move.
    - in_place (Unsloth Fast_CrossEntropyLoss): forward reads each 16-bit logit once; backward reads it and writes
      the gradient over it: e and 2 e."""
    e = act_bytes
    if kernel == "fused_linear":
        return Op("loss", "memory", 0.0, logits * 3 * e, 1, backward_bytes=0.0)
    if kernel == "in_place":
        return Op("loss", "memory", 0.0, logits * e, 1, backward_bytes=logits * 2 * e)
    return Op("loss", "memory", 0.0, logits * (e + 12), 3, backward_bytes=logits * (20 + e))
