"""The closed form held to the trace: closed-form / traced peak allocated memory over a grid of architectures x
method (full, LoRA, QLoRA) x checkpointing x batch x sequence x loss.

Each preset is shrunk to a few layers (``--layers``, every per-layer list cut to match) so that a trace takes
seconds; widths, heads, experts and vocabulary stay the model's own. Full fine-tuning runs in pure bf16 (transformers'
MoE experts run torch._grouped_mm, which takes bf16 inputs only on fake CPU tensors), LoRA and QLoRA under bf16
autocast, as PEFT's recipes do. ``--ckpt selective`` is not in the grid: transformers has no selective
checkpointing to trace. Run: python benchmarks/trace_grid.py [--layers 2] [--quick] [--only PRESET,...]
[--methods full,...] [--jsonl OUT]. Prints one row per case and the distribution of the ratio.
"""

from __future__ import annotations

import itertools
import json
import statistics
import sys
from collections.abc import Mapping
from typing import Any

from gpuwise import api
from gpuwise.report.trace import allocated_bytes
from gpuwise.workload.jobs.job import TrainJob
from gpuwise.workload.model.architecture import from_config
from gpuwise.workload.model.presets import presets

ARCHITECTURES = {  # what each stands for in the grid
    "llama-3.2-1b": "dense GQA, tied", "qwen2.5-0.5b": "GQA with q/k/v biases, tied", "mixtral-8x7b": "MoE",
    "deepseek-v3": "MLA + shared/routed experts", "gemma-3-4b": "VLM, sliding window 5:1, q/k norms",
    "gpt-oss-20b": "sliding/full + sinks + MoE", "qwen3-next-80b-a3b": "gated DeltaNet hybrid", "phi-4": "dense, wide",
    "qwen2.5-vl-7b": "VLM (vision tower + GQA)", "bert-large-uncased": "encoder (masked LM, LayerNorm)",
}
_LAYER_LISTS = ("layer_types", "mlp_only_layers", "moe_layers")
METHODS = {"full": "pure-bf16", "lora": "bf16", "qlora": "bf16"}


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


def case(preset: str, layers: int, job: TrainJob) -> tuple[float, float]:
    config = shrink(presets()[preset].config, layers)
    arch = from_config(config, name=f"{preset} ({layers} layers)")
    traced = api.trace(arch, job)
    # compared like with like: a model whose code has no SDPA path was traced with eager attention (scores kept)
    same = job if traced.attention == "sdpa" else job.updated(flash_attn=False)
    closed = allocated_bytes(api.estimate(arch, gpu="h200-sxm-141gb", job=same).memory)
    return closed, traced.peak_allocated_bytes


def grid(quick: bool) -> list[dict[str, Any]]:
    """Every job of the grid (the quick slice: one per architecture and method, checkpointing both ways)."""
    axes = itertools.product(METHODS, ("none", "full"), (1, 2), (256, 1024), ("standard", "chunked"))
    jobs = [dict(method=m, precision=METHODS[m], ckpt=c, batch=b, seq=s, loss=loss, optimizer="adamw")
            for m, c, b, s, loss in axes]
    return [j for j in jobs if j["batch"] == 1 and j["seq"] == 256 and j["loss"] == "standard"] if quick else jobs


def main() -> None:
    layers = int(sys.argv[sys.argv.index("--layers") + 1]) if "--layers" in sys.argv else 2
    out = open(sys.argv[sys.argv.index("--jsonl") + 1], "w") if "--jsonl" in sys.argv else None  # noqa: SIM115
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else list(ARCHITECTURES)
    methods = sys.argv[sys.argv.index("--methods") + 1].split(",") if "--methods" in sys.argv else list(METHODS)
    ratios = []
    for preset in only:
        for spec in (s for s in grid("--quick" in sys.argv) if s["method"] in methods):
            if spec["loss"] == "chunked" and presets()[preset].config.get("model_type") == "bert":
                continue  # a masked LM's loss is its own
            label = (f"{preset:20s} {spec['method']:5s} {spec['ckpt']:4s} {spec['batch']} x {spec['seq']:4d} "
                     f"{spec['loss']:8s}")
            try:
                closed, traced = case(preset, layers, TrainJob(**spec))
            except Exception as exc:  # a family transformers cannot build or run on fake CPU tensors, a length
                print(f"{label} skipped: {str(exc)[:90]}")  # beyond the model's positions
                continue
            ratios.append(closed / traced)
            print(f"{label} closed {closed / 1e9:7.3f} GB  traced {traced / 1e9:7.3f} GB  ratio {closed / traced:5.2f}",
                  flush=True)
            if out:
                out.write(json.dumps({"preset": preset, **spec, "layers": layers, "closed_gb": closed / 1e9,
                                      "traced_gb": traced / 1e9}) + "\n")
    if ratios:
        q = statistics.quantiles(ratios, n=10) if len(ratios) >= 10 else ratios
        print(f"\n{len(ratios)} cases: closed/trace median {statistics.median(ratios):.2f}, "
              f"p10 {min(q):.2f}, p90 {max(q):.2f}, range {min(ratios):.2f}-{max(ratios):.2f}")


if __name__ == "__main__":
    main()
