"""The closed form held to the trace: closed-form / traced peak allocated memory over a grid of architectures x
checkpointing x batch x sequence (full fine-tuning in pure bf16 with AdamW; what `--trace` runs today).

Each preset is shrunk to a few layers (``--layers``, every per-layer list cut to match) so that a trace takes
seconds; widths, heads, experts and vocabulary stay the model's own. Run: python benchmarks/trace_grid.py
[--layers 2] [--quick]. Prints one row per case and the distribution of the ratio.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Mapping
from typing import Any

from gpuwise import api
from gpuwise.report.trace import allocated_bytes
from gpuwise.workload.architecture import from_config
from gpuwise.workload.job import TrainJob
from gpuwise.workload.presets import presets

ARCHITECTURES = {  # what each stands for in the grid
    "llama-3.2-1b": "dense GQA", "qwen2.5-0.5b": "GQA with q/k/v biases, tied", "mixtral-8x7b": "MoE",
    "deepseek-v3": "MLA + shared/routed experts", "gemma-3-4b": "sliding window 5:1 (text model)",
    "gpt-oss-20b": "sliding/full + sinks + MoE", "qwen3-next-80b-a3b": "gated DeltaNet hybrid", "phi-4": "dense, wide",
}
_LAYER_LISTS = ("layer_types", "mlp_only_layers", "moe_layers")


def shrink(config: Mapping[str, Any], layers: int) -> dict[str, Any]:
    """The config with ``layers`` layers: every per-layer list cut, dense-first counts kept below the new depth."""
    out = dict(config)
    text = out.get("text_config")
    if isinstance(text, Mapping):
        out["text_config"] = shrink(text, layers)
    if isinstance(out.get("num_hidden_layers"), int):
        out["num_hidden_layers"] = layers
    for key in _LAYER_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [v for v in out[key] if not isinstance(v, int) or v < layers][:layers] \
                if key != "layer_types" else out[key][:layers]
    if isinstance(out.get("first_k_dense_replace"), int):
        out["first_k_dense_replace"] = min(out["first_k_dense_replace"], layers - 1)
    for key in ("num_nextn_predict_layers", "mtp_num_hidden_layers"):
        out.pop(key, None)
    return out


def case(preset: str, layers: int, ckpt: str, batch: int, seq: int) -> tuple[float, float]:
    config = shrink(presets()[preset].config, layers)
    arch = from_config(config, name=f"{preset} ({layers} layers)")
    # pure bf16: transformers' MoE experts run torch._grouped_mm, which takes bf16 inputs only on fake CPU tensors
    job = TrainJob(batch=batch, seq=seq, ckpt=ckpt, precision="pure-bf16", optimizer="adamw")
    traced = api.trace(arch, job).peak_allocated_bytes
    closed = allocated_bytes(api.estimate(arch, gpu="h200-sxm-141gb", job=job).memory)
    return closed, traced


def main() -> None:
    layers = int(sys.argv[sys.argv.index("--layers") + 1]) if "--layers" in sys.argv else 2
    quick = "--quick" in sys.argv
    grid = [(c, b, s) for c in ("none", "full") for b in (1, 2) for s in (256, 1024)]
    ratios = []
    for preset, what in ARCHITECTURES.items():
        for ckpt, batch, seq in grid[:2] if quick else grid:
            try:
                closed, traced = case(preset, layers, ckpt, batch, seq)
            except Exception as exc:  # a family transformers cannot build as a causal LM on fake tensors
                print(f"{preset:22s} {what:30s} {ckpt:4s} {batch} x {seq:5d}  skipped: {str(exc)[:80]}")
                break
            ratios.append(closed / traced)
            print(f"{preset:22s} {what:30s} {ckpt:4s} {batch} x {seq:5d}  closed {closed / 1e9:8.3f} GB  "
                  f"traced {traced / 1e9:8.3f} GB  closed/trace {closed / traced:5.2f}")
    if ratios:
        q = statistics.quantiles(ratios, n=10) if len(ratios) >= 10 else ratios
        print(f"\n{len(ratios)} cases: closed/trace median {statistics.median(ratios):.2f}, "
              f"p10 {min(q):.2f}, p90 {max(q):.2f}, range {min(ratios):.2f}-{max(ratios):.2f}")


if __name__ == "__main__":
    main()
