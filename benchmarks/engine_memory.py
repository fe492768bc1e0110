"""Predicted vs printed: gpuwise's engine memory prediction beside what vLLM and SGLang print at start-up.

For every YAML in ../shared/data/engine-logs (or the folder given), build the inference job from the log's
structured keys (never its text), resolve it into a plan, and set the MemoryEstimate's figures beside ``measured:``:
weights GiB per GPU, KV cache GiB, KV tokens, CUDA graph GiB, maximum concurrency at max_model_len.

    python benchmarks/engine_memory.py [LOG_DIR] [--json]

Every figure is a prediction from the engines' source arithmetic (estimate/memory/engine_pool.py, kv_layout.py) and
the sourced constants of estimate/constants.py. Two constants were set from these logs, and are marked so there:
the CUDA graph bytes per captured piece (fitted on the two logs that print graph memory; ``graph_fit`` prints each
log's own value and the leave-one-log-out error) and ROCm's non-torch memory (read from the one MI300X log that
prints it at TP 1, so that log's KV figures are in-sample).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpuwise.catalog import load_catalog
from gpuwise.errors import UnknownModel
from gpuwise.estimate import constants as C
from gpuwise.estimate.memory.inference import inference_memory
from gpuwise.estimate.plan import resolve
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.resolve import resolve_model

GIB = 2**30
LOGS = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "engine-logs"

# the log's model id (or the start of its description) -> a gpuwise preset of the same architecture
MODELS = {
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "meta-llama/Meta-Llama-3-8B-Instruct": "llama-3-8b",
    "meta-llama/Llama-3.1-70B-Instruct": "llama-3.1-70b",
    "TechxGenus/Meta-Llama-3-70B-Instruct-AWQ": "llama-3-70b",
    "meta-llama/Llama-2-7b-chat-hf": "llama-2-7b",
    "mistralai/Mixtral-8x7B-Instruct-v0.1": "mixtral-8x7b",
    "deepseek-ai/DeepSeek-V3": "deepseek-v3",
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B": "qwen2.5-14b",
    "openai/gpt-oss-20b": "gpt-oss-20b",
    "openai/gpt-oss-120b": "gpt-oss-120b",
    "moonshotai/Kimi-K2-Thinking": "kimi-k2",
    "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b",
    "ibm-granite/granite-4.0-micro": "granite-4.0-micro",
    "Qwen3.6-27B": "qwen3.6-27b",
    "Qwen3.6-35B-A3B": "qwen3.6-35b-a3b",
}

# the log's quantization description (its first word) -> gpuwise's weight format
QUANTS = {"fp8": "fp8", "awq_marlin": "awq-int4", "mxfp4": "mxfp4", "auto_round": "gptq-int4", "modelopt": "nvfp4",
          "compressed-tensors": "int4"}


@dataclass(frozen=True)
class Row:
    log: str
    figure: str
    predicted: float | None
    measured: float | None

    @property
    def error(self) -> float | None:
        if self.predicted is None or not self.measured:
            return None
        return (self.predicted - self.measured) / self.measured


def _model(log: dict[str, Any]) -> str:
    name = str(log["model"])
    for key, preset in MODELS.items():
        if name == key or name.startswith(key + ","):
            return preset
    raise SystemExit(f"{log['id']}: no preset mapped for model {name!r}; add it to MODELS")


def _version(log: dict[str, Any]) -> str | None:
    found = re.search(r"\d+\.\d+(?:\.\d+)?", str(log.get("engine_version") or ""))
    return found.group(0) if found else None


def _quant(log: dict[str, Any]) -> str | None:
    text = str(log.get("quantization") or "")
    if "fp8" in text and "block" in text:
        return "fp8-block"
    return QUANTS.get(text.split(" ")[0]) if text else None


def _kv_dtype(log: dict[str, Any], weights_dtype: str) -> str:
    kv = str(log.get("kv_cache_dtype") or "auto")
    return "fp8" if kv.startswith("fp8") else weights_dtype


def job_of(log: dict[str, Any]) -> InferJob:
    """The InferJob `gpuwise estimate MODEL --task infer --engine E --gpu X --tp N --context L ...` builds."""
    dtype = "fp16" if str(log.get("dtype") or "").startswith("float16") else "bf16"
    fraction = log.get("gpu_memory_utilization") if log["engine"] == "vllm" else log.get("mem_fraction_static")
    tp = log.get("tensor_parallel_size") or 1
    fields: dict[str, Any] = {
        "engine": log["engine"], "tp": tp, "count": tp, "quant": _quant(log) or dtype,
        "kv_dtype": _kv_dtype(log, dtype), "input_len": log.get("max_model_len") or 4096, "output_len": 0,
        "memory_fraction": fraction, "max_num_seqs": log.get("max_num_seqs"),
        "max_num_batched_tokens": log.get("max_num_batched_tokens"),
        "engine_version": _version(log), "enforce_eager": bool(log.get("enforce_eager")),
    }
    return InferJob(**{k: v for k, v in fields.items() if v is not None})


def rows_of(log: dict[str, Any], catalog: Any) -> list[Row]:
    arch = resolve_model(_model(log))
    plan = resolve(arch, job_of(log), catalog.gpu(log["gpu"]["catalog_id"]))
    est = inference_memory(plan)
    measured, details = log["measured"], est.details
    tokens = details.get("kv_tokens_per_gpu")
    context = plan.job.context
    predicted = {
        "weights_gib": est.breakdown_bytes["weights"] / GIB,
        "kv_cache_gib": (details.get("kv_pool_bytes") or 0.0) / GIB,
        "kv_cache_tokens": tokens,
        "cuda_graph_gib": (details.get("cuda_graph_bytes") or 0.0) / GIB,
        "max_concurrency": details.get("max_concurrency_at_len"),
    }
    if log["engine"] == "sglang":
        predicted["max_total_num_tokens"] = tokens
        predicted["kv_pool_gib"] = predicted["kv_cache_gib"]
    del context
    return [Row(log["id"], k, v, measured.get(k)) for k, v in predicted.items() if measured.get(k) is not None]


def graph_fit(rows: list[Row]) -> list[str]:
    """The one fitted constant, bytes per captured graph piece: its value from each log that prints graph memory,
    and each such log predicted from the others' fit (leave one log out)."""
    per_piece = C.VLLM_GRAPH_BYTES_PER_PIECE.value
    fits = {r.log: r.measured * GIB / (r.predicted * GIB / per_piece) for r in rows
            if r.figure == "cuda_graph_gib" and r.predicted and r.measured}
    lines = [f"graph bytes per piece: {v / 2**20:.4f} MiB from {k}" for k, v in fits.items()]
    for log, fit in fits.items():
        others = [v for k, v in fits.items() if k != log]
        if others:
            held = sum(others) / len(others)
            lines.append(f"leave-one-log-out {log}: {held / fit - 1:+.1%}")
    if fits:
        lines.append(f"all-logs fit {sum(fits.values()) / len(fits) / 2**20:.4f} MiB (constants.py: "
                     f"{per_piece / 2**20:.4f})")
    return lines


def all_rows(folder: Path) -> list[Row]:
    """Predicted beside measured for every log in ``folder`` whose model has a preset."""
    catalog = load_catalog(use_user_dir=False)
    rows: list[Row] = []
    for path in sorted(folder.glob("*.yaml")):
        try:
            rows += rows_of(yaml.safe_load(path.read_text()), catalog)
        except UnknownModel as exc:
            rows.append(Row(path.stem, f"skipped: {exc}", None, None))
    return rows


def main(argv: list[str]) -> int:
    folder = Path(next((a for a in argv if not a.startswith("--")), LOGS))
    rows = all_rows(folder)
    if "--json" in argv:
        print(json.dumps([{"log": r.log, "figure": r.figure, "predicted": r.predicted, "measured": r.measured,
                           "error": r.error} for r in rows], indent=1))
        return 0
    for r in rows:
        if r.measured is None:
            print(f"{r.log}: {r.figure}")
            continue
        err = f"{r.error:+7.1%}" if r.error is not None else "      -"
        pred = f"{r.predicted:14,.2f}" if r.predicted is not None else "             -"
        print(f"{r.log[:58]:58} {r.figure:18} {pred} {r.measured:14,.2f} {err}")
    for figure, bar in (("kv_cache_tokens", 0.05), ("kv_cache_gib", 0.05), ("weights_gib", 0.10),
                        ("cuda_graph_gib", 0.10), ("max_total_num_tokens", 0.05)):
        errs = [r.error for r in rows if r.figure == figure and r.error is not None]
        ok = sum(abs(e) <= bar for e in errs)
        print(f"{figure}: {ok}/{len(errs)} within {bar:.0%}")
    print("\n".join(graph_fit(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
