"""The weight format a checkpoint ships in, read from its config.json ``quantization_config`` (or implied by a repo
name's ``-FP8``/``-AWQ`` suffix), and which weights it covers.

    fp8 / fp8-block   quant_method "fp8" (DeepSeek-V3, Kimi-K2, MiniMax-M2, Qwen3-*-FP8): e4m3 weights; with
                      ``weight_block_size`` [128, 128] one fp32 scale per 128 x 128 block (8 + 32/16384 bits)
    mxfp4             quant_method "mxfp4" (gpt-oss): OCP MX FP4, 32 e2m1 values + one e8m0 scale = 4.25 bits;
                      ``modules_to_not_convert`` listing self_attn leaves all but the experts in bf16
    nvfp4             compressed-tensors "nvfp4-pack-quantized" or ModelOpt NVFP4: 16 e2m1 values + one e4m3 scale
                      = 4.5 bits (plus one fp32 scale per tensor)
    int4              compressed-tensors int4 weights with group scales (Kimi-K2.5's experts: group 32, bf16 scales
                      = 4 + 16/32 = 4.5 bits); AWQ and GPTQ (quant_method "awq"/"gptq") keep their own names
Scope: "all" block linears, or "experts" when attention and the dense/shared MLPs are left out (gpt-oss, Kimi-K2.5).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Scope = Literal["all", "experts"]


@dataclass(frozen=True)
class WeightFormat:
    quant: str  # a --quant value
    scope: Scope
    source: str  # where gpuwise read it: the config's quantization_config, or the repo name
    bits: float | None = None  # bits per weight with its scales, when the config fixes them (a group size)
    exact_bytes: float | None = None  # the file's own weight bytes (a GGUF header's tensors): the job holds these


def _leaves_attention(names: object) -> bool:
    """A not-converted / ignore list that names the attention modules: the checkpoint quantized the experts only."""
    return isinstance(names, list) and any(isinstance(n, str) and "self_attn" in n for n in names)


def _compressed_tensors(q: Mapping[str, Any]) -> WeightFormat | None:
    fmt = str(q.get("format", ""))
    groups = q.get("config_groups")
    weights = next((g.get("weights") for g in groups.values() if isinstance(g, Mapping)), None) if isinstance(
        groups, Mapping) else None
    scope: Scope = "experts" if _leaves_attention(q.get("ignore")) else "all"
    source = "config.json quantization_config (compressed-tensors)"
    if "nvfp4" in fmt:
        return WeightFormat("nvfp4", scope, source)
    if not isinstance(weights, Mapping):
        return None
    bits, kind, group = weights.get("num_bits"), weights.get("type"), weights.get("group_size")
    if bits == 4 and kind == "int":
        size = int(group) if isinstance(group, int) and 1 <= group <= 1_000_000 else 128
        return WeightFormat("int4", scope, source, bits=4 + 16 / size)  # a 16-bit scale per group
    if bits == 8 and kind == "float":
        return WeightFormat("fp8", scope, source)
    return None


def from_quantization_config(config: Mapping[str, Any]) -> WeightFormat | None:
    """The format a config.json (or its text_config) declares; None for an unquantized checkpoint or one gpuwise
    does not model."""
    q = config.get("quantization_config")
    text = config.get("text_config")
    if not isinstance(q, Mapping) and isinstance(text, Mapping):
        q = text.get("quantization_config")
    if not isinstance(q, Mapping):
        return None
    method, source = str(q.get("quant_method", "")).lower(), "config.json quantization_config"
    if method == "fp8":
        block = q.get("weight_block_size")
        scope: Scope = "experts" if _leaves_attention(q.get("modules_to_not_convert")) else "all"
        return WeightFormat("fp8-block" if isinstance(block, list) else "fp8", scope, f"{source} ({method})")
    if method == "mxfp4":
        scope = "experts" if _leaves_attention(q.get("modules_to_not_convert")) else "all"
        return WeightFormat("mxfp4", scope, f"{source} (mxfp4)")
    if method == "compressed-tensors":
        return _compressed_tensors(q)
    if method == "modelopt":
        algo = str(q.get("quant_algo", "")).upper()
        return {"NVFP4": WeightFormat("nvfp4", "all", source), "FP8": WeightFormat("fp8", "all", source)}.get(algo)
    if method in ("awq", "gptq") and q.get("bits", 4) == 4:
        return WeightFormat(f"{method}-int4", "all", f"{source} ({method})")
    return None


VARIANT_SUFFIXES: tuple[tuple[str, str | None], ...] = (
    # a repo-name suffix -> the weight format it implies (None: the same weights, tuned or named differently)
    ("-instruct-2507", None), ("-thinking-2507", None), ("-instruct", None), ("-thinking", None), ("-chat", None),
    ("-base", None), ("-it", None), ("-pt", None), ("-hf", None),
    # Qwen's -FP8 repos (most -FP8 repos on the hub) use 128 x 128 blocks, their model cards say
    ("-fp8-dynamic", "fp8"), ("-fp8", "fp8-block"),
    ("-awq", "awq-int4"), ("-gptq-int4", "gptq-int4"), ("-gptq", "gptq-int4"),
    ("-int4", "int4"), ("-w4a16", "int4"), ("-nvfp4", "nvfp4"), ("-fp4", "nvfp4"), ("-mxfp4", "mxfp4"),
    # Neural Magic / Red Hat AI's llm-compressor repos: -quantized.w8a8 (INT8 weights and activations),
    # -quantized.w4a16 (INT4 weights, group 128), -quantized.w8a16 (INT8 weights)
    ("-quantized.w8a8", "int8"), ("-quantized.w8a16", "int8"), ("-quantized.w4a16", "int4"),
)


def strip_variant(name: str) -> tuple[str, str | None, list[str]]:
    """``Qwen/Qwen3-8B-FP8`` -> (``Qwen/Qwen3-8B``, ``fp8``, ["-FP8"]): the base name, the weight format the suffixes
    imply (the last one that implies one), and the suffixes removed. At most four suffixes are removed."""
    base, implied, removed = name, None, []
    for _ in range(4):
        lowered = base.lower()
        match = next(((s, f) for s, f in VARIANT_SUFFIXES if lowered.endswith(s) and len(base) > len(s) + 1), None)
        if match is None:
            break
        suffix, fmt = match
        removed.append(base[-len(suffix):])
        base = base[:-len(suffix)]
        implied = implied or fmt
    return base, implied, removed
