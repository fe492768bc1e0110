"""Bytes per element of every number format gpuwise models: the one table the memory and speed models read.

Formats are named as the job flags name them: training precisions (``--precision``), weight formats
(``--quant``), KV-cache formats (``--kv-dtype``), plus ``nf4`` (the QLoRA base) and ``tf32``. Quantized weight
formats carry their block scales in their bits per weight (see constants.py for each derivation).
"""

from __future__ import annotations

from gpuwise.catalog.schema import Dtype
from gpuwise.estimate import constants as C

BITS: dict[str, float] = {
    "fp32": 32.0, "tf32": 32.0, "bf16": 16.0, "fp16": 16.0, "pure-bf16": 16.0,
    "fp8": C.FP8_BITS.value, "fp8-block": C.FP8_BLOCK_BITS.value, "int8": C.INT8_BITS.value,
    "nf4": C.NF4_DOUBLE_QUANT_BITS.value, "mxfp4": C.MXFP4_BITS.value, "nvfp4": C.NVFP4_BITS.value,
    "int4": C.INT4_GROUP128_SYMMETRIC_BITS.value,
    "awq-int4": C.INT4_GROUP128_BITS.value, "gptq-int4": C.INT4_GROUP128_BITS.value,
    "gguf-q4_k_m": C.GGUF_Q4_K_M_BITS.value, "gguf-q8_0": C.GGUF_Q8_0_BITS.value,
    "q8_0": C.GGUF_Q8_0_BITS.value, "q4_0": C.GGUF_Q4_0_BITS.value,  # llama.cpp's KV-cache types (--cache-type-k/v)
}
"""Storage bits per element."""


def bytes_per_element(fmt: str) -> float:
    """``bytes_per_element("bf16") == 2.0``; ``bytes_per_element("awq-int4") == 0.5195`` (4.156 bits)."""
    return BITS[fmt] / 8


def activation_bytes(fmt: str) -> int:
    """Bytes of an activation (and of its gradient, and of a tensor-parallel message): 4 in fp32 work, else 2 --
    16-bit mixed precision, and FP8 and quantized-weight formats, which all keep bf16/fp16 activations."""
    return 4 if fmt == "fp32" else 2


def unquantized_bytes(quant: str) -> int:
    """Bytes of the tensors a weight format leaves unquantized (embeddings, head, norms): fp32 for fp32, else 16-bit."""
    return 4 if quant == "fp32" else 2


def training_weight_bytes(precision: str) -> int:
    """The working copy of the weights a training forward pass reads: fp32 for ``--precision fp32``, else 16-bit
    (mixed precision casts the fp32 master weights to bf16/fp16; FP8 recipes keep 16-bit weights and cast per GEMM)."""
    return 4 if precision == "fp32" else 2


def training_state_bytes(precision: str) -> int:
    """Gradients, optimizer states and adapters: bf16 only in a pure-bf16 run, else fp32."""
    return 2 if precision == "pure-bf16" else 4


def train_dtype(precision: str) -> Dtype:
    """The dtype a training step's matmuls run in for --precision: fp8, fp32 or fp16 as named, else bf16."""
    return {"fp8": "fp8", "fp32": "fp32", "fp16": "fp16"}.get(precision, "bf16")  # type: ignore[return-value]
