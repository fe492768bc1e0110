"""How a model's weights are stored and multiplied: bits per weight with their scales, which weights a format
covers, and what the matmuls run in on a given card.

A quantized format stores the block linears (the checkpoint's own scope: gpt-oss's MXFP4 and Kimi-K2.5's INT4
cover the routed experts only) and keeps embeddings, head, norms and routers 16-bit; GGUF quantizes every tensor.
Its matmuls run on the card's tensor cores of that type where the datasheet lists them -- FP8 from Ada and Hopper,
FP4 (MXFP4, NVFP4) on Blackwell only (the catalog's fp8/fp4 rates, read from each card's datasheet); elsewhere
the engine's weight-only kernels (Marlin, Machete) dequantize to 16-bit in registers: the memory saving holds and
the matmuls run at the 16-bit rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gpuwise.catalog import GPU
from gpuwise.catalog.schema import Dtype
from gpuwise.estimate.dtypes import BITS, unquantized_bytes
from gpuwise.workload.model.architecture import Architecture

NATIVE_MATMUL: dict[str, Dtype] = {"fp8": "fp8", "fp8-block": "fp8", "int8": "int8", "mxfp4": "fp4", "nvfp4": "fp4",
                                   "fp32": "fp32"}
"""The tensor-core type a weight format multiplies in where the card has it (W8A8, W4A4 kernels)."""


@dataclass(frozen=True)
class Weights:
    quant: str
    bits: float  # per weight the format covers, scales included
    quantized: int  # parameters stored in the format
    experts_only: bool  # the format covers the routed experts and nothing else
    total: int
    expert_params: int = 0  # routed-expert weights (what expert parallelism spreads over its GPUs)
    scale: float = 1.0  # the checkpoint header's bytes over the format's figure (as_header_says); 1 without one
    expert_padding: float = 1.0  # the engine's MoE kernel pads each expert matrix on load (padded_experts)

    @property
    def bytes(self) -> float:
        formula = self.quantized * self.bits / 8 + (self.total - self.quantized) * unquantized_bytes(self.quant)
        return (formula + self.expert_params * self.bits / 8 * (self.expert_padding - 1)) * self.scale

    @property
    def expert_bytes(self) -> float:
        return self.expert_params * self.expert_bytes_per_weight

    @property
    def dense_bytes_per_weight(self) -> float:
        """Bytes of a non-expert linear weight (attention, dense and shared MLPs)."""
        return (unquantized_bytes(self.quant) if self.experts_only else self.bits / 8) * self.scale

    @property
    def expert_bytes_per_weight(self) -> float:
        return self.bits / 8 * self.scale * self.expert_padding


def _expert_params(arch: Architecture) -> int:
    return sum(x.d_in * x.d_out * x.count * x.layers for x in arch.params.linears if x.name.startswith("experts."))


def weights(arch: Architecture, quant: str) -> Weights:
    """The weights of ``arch`` stored as ``quant``: the checkpoint's own bits and scope when it ships in that format
    (Kimi-K2.5's INT4 in groups of 32), else the format's defaults over every block linear."""
    own = arch.checkpoint if arch.checkpoint is not None and arch.checkpoint.quant == quant else None
    bits = own.bits if own is not None and own.bits else BITS[quant]
    experts_only = own is not None and own.scope == "experts" and _expert_params(arch) > 0
    if quant.startswith("gguf"):
        quantized = arch.total_params
    else:
        quantized = _expert_params(arch) if experts_only else arch.params.linear
    return Weights(quant, bits, quantized, experts_only, arch.total_params, _expert_params(arch))


def as_header_says(stored: Weights, header_bytes: float | None) -> Weights:
    """``stored`` with the checkpoint header's exact byte sum (--weights), each class of weight scaled alike (the
    header gives the sum, not which tensors a format left 16-bit): the card holds, and each decode step reads, what
    the file holds."""
    if header_bytes is None or stored.bytes <= 0:
        return stored
    return replace(stored, scale=header_bytes / stored.bytes)


def matmul_dtype(quant: str, gpu: GPU) -> Dtype:
    """What the matmuls of ``quant`` weights run in on ``gpu``: its native tensor-core type where the card has one,
    else 16-bit (weight-only kernels)."""
    native = NATIVE_MATMUL.get(quant)
    if native is not None and gpu.peak_flops(native) and (quant != "nvfp4" or gpu.vendor == "nvidia"):
        return native
    return "fp16"


def padded_experts(stored: Weights, arch: Architecture, tp: int, rule: tuple[str, float, int, int] | None,
                   capability: str | None) -> Weights:
    """``stored`` with the expert matrices as the engine's MoE kernel holds them: ``rule`` (format, below compute
    capability, intermediate multiple, hidden multiple) pads each expert's intermediate width per TP rank and its
    hidden width to whole tiles (runtimes/engines.py, vLLM's MXFP4 Marlin); unchanged off that format or card."""
    if rule is None or not stored.expert_params or capability is None or stored.quant != rule[0]:
        return stored
    if float(capability) >= rule[1] or not arch.intermediate or not arch.hidden:
        return stored
    part = arch.intermediate / max(tp, 1)
    factor = (math.ceil(part / rule[2]) * rule[2] / part) * (math.ceil(arch.hidden / rule[3]) * rule[3] / arch.hidden)
    return replace(stored, expert_padding=factor)
