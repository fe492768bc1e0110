"""Roofline time of one operator: max(FLOPs / achievable FLOP/s, bytes / achievable bandwidth) + a kernel floor.

Achievable, not peak: a GEMM reaches the measured maximum fraction of dense peak for its card (the catalog
record's ``measured`` block, or that of its architecture's reference card), scaled down for small problems
(Calculon's size curve); attention kernels reach the FlashAttention papers' fraction; memory traffic reaches the
measured copy bandwidth fraction. A user's own calibration record (``gpuwise bench --save``) replaces them for that
card; a user's catalog file can give a card its own ``measured`` block.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from gpuwise.catalog import GPU
from gpuwise.catalog.schema import Dtype
from gpuwise.estimate import constants as C
from gpuwise.estimate.calibration import Calibration

Kind = Literal["gemm", "attention", "memory"]


@dataclass(frozen=True)
class Op:
    """One operator instance (already multiplied by how often it runs in the phase)."""

    name: str
    kind: Kind
    flops: float
    bytes: float
    count: int = 1  # kernel launches, for the per-kernel floor
    row_fill: float = 1.0  # share of the tensor-core tile rows holding real tokens (a grouped GEMM's experts)
    backward_bytes: float | None = None  # a memory-bound op's traffic in backward, where not twice its forward
    fixed_s: float = 0.0  # measured latency a kernel sequence pays whatever it moves (a fused MoE call's floor)


@dataclass(frozen=True)
class Machine:
    """A GPU with the achievable rates the roofline uses, for one matmul dtype."""

    gpu: GPU
    dtype: str
    peak_flops: float
    gemm_efficiency: float
    attention_efficiency: float
    memory_bytes_per_s: float
    kernel_floor_s: float
    calibrated: bool = False

    def gemm_rate(self, flops: float) -> float:
        size = flops / (flops + C.GEMM_HALF_EFFICIENCY_FLOP.value) if flops > 0 else 1.0
        return self.peak_flops * self.gemm_efficiency * self.shape_fraction * size

    @property
    def shape_fraction(self) -> float:
        """Table efficiencies are best-shape maxima; a model's shapes reach a fraction of them, a fitted parameter per
        architecture generation (compute capability major); a calibration record measured the user's own shapes."""
        if self.calibrated:
            return 1.0
        major = (self.gpu.compute_capability or "").split(".")[0]
        return C.FIXED_SHAPE_FRACTION_BY_CC_MAJOR.get(major, C.FIXED_SHAPE_FRACTION).value


def gemm_efficiency(gpu: GPU, dtype: Dtype) -> float:
    """The fraction of dense peak matmuls in ``dtype`` reach on ``gpu`` at their best shape: the card's own measurement
    in that dtype; else its architecture reference card's (``measured.stands_for``, same segment) in that dtype, else
    in 16-bit (bf16, then fp16: the rate every reference card was measured at); else the stated default."""
    own = gpu.measured_gemm_fraction(dtype)
    if own is not None:
        return own
    reference = gpu.gemm_reference
    if reference is not None:
        order: tuple[Dtype, ...] = (dtype, "bf16", "fp16")
        for borrowed in order:
            fraction = reference.fractions.get(borrowed)
            if fraction is not None:
                return fraction
    return C.GEMM_EFFICIENCY_DEFAULT.value


def attention_efficiency(gpu: GPU) -> float:
    """The fraction of dense peak the attention kernel SDPA picks on ``gpu`` reaches, by compute capability major;
    FLASH_ATTENTION_DEFAULT on other vendors' chips."""
    major = (gpu.compute_capability or "").split(".")[0]
    return C.FLASH_ATTENTION_EFFICIENCY.get(major, C.FLASH_ATTENTION_DEFAULT).value


def machine(gpu: GPU, dtype: Dtype, *, eager: bool = False, calibration: Calibration | None = None) -> Machine:
    """Achievable rates of ``gpu`` for matmuls in ``dtype`` (fp32, tf32, fp16, bf16, fp8, int8).

    A dtype the chip lacks falls back to the next one it has (bf16 -> fp16 -> fp32), as frameworks do."""
    peak = gpu.matmul_peak_flops(dtype)
    efficiency = gemm_efficiency(gpu, dtype)
    memory = gpu.memory_bandwidth_bytes_per_s * C.MEMORY_EFFICIENCY.value
    if calibration is not None:
        if dtype in calibration.gemm_flops and peak:
            efficiency = calibration.gemm_flops[dtype] / peak
        memory = calibration.memory_bytes_per_s or memory
    attention = attention_efficiency(gpu)
    floor = C.EAGER_OVERHEAD.value if eager else C.KERNEL_OVERHEAD.value
    calibrated = calibration is not None and dtype in calibration.gemm_flops
    return Machine(gpu, dtype, peak, efficiency, min(attention, efficiency), memory, floor, calibrated)


def op_time(op: Op, m: Machine) -> tuple[float, str]:
    """Seconds for ``op`` on ``m`` and what bounds it ("compute" or "memory")."""
    flops = op.flops / op.row_fill  # the MMA tiles compute their padded rows too
    if op.kind == "gemm":
        rate = m.gemm_rate(flops / max(op.count, 1))
    elif op.kind == "attention":
        rate = m.peak_flops * m.attention_efficiency
    else:
        rate = float("inf")
    compute = flops / rate if rate and flops else 0.0
    memory = op.bytes / m.memory_bytes_per_s
    bound = "compute" if compute >= memory else "memory"
    return max(compute, memory) + m.kernel_floor_s * op.count + op.fixed_s, bound


@dataclass(frozen=True)
class PhaseTime:
    """The time of a list of operators, with the share of each and the dominant bound."""

    seconds: float
    compute_s: float
    memory_s: float
    by_op: Mapping[str, float]

    @property
    def bound(self) -> str:
        return "compute" if self.compute_s >= self.memory_s else "memory"


def phase_time(ops: list[Op], m: Machine) -> PhaseTime:
    total = compute = memory = 0.0
    by_op: dict[str, float] = {}
    for op in ops:
        seconds, bound = op_time(op, m)
        total += seconds
        by_op[op.name] = by_op.get(op.name, 0.0) + seconds
        if bound == "compute":
            compute += seconds
        else:
            memory += seconds
    return PhaseTime(total, compute, memory, by_op)
