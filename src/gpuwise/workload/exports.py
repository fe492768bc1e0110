"""Benchmark exports users already have, read into one shape: each run's settings and what it measured.

Formats, each read from the tool's documented output and source:
- ``vllm bench serve --save-result`` (vllm-project/vllm benchmarks/serve.py ``save_to_pytorch_benchmark_format`` and
  the result dict of ``benchmark``): one JSON object; ``request_rate`` is the string "inf" for as-fast-as-possible;
  v0.8 writes the key ``request_goodput:`` with a colon.
- SGLang ``python -m sglang.bench_serving --output-file`` (sgl-project/sglang python/sglang/bench_serving.py): JSON
  Lines, one object per run appended; ``request_rate`` may be the bare token ``Infinity``; the Dec-2024 format has
  medians only (``median_ttft_ms``, ``median_itl_ms``) and no ``request_throughput``.
- NVIDIA AIPerf / GenAI-Perf ``profile_export_aiperf.json`` / ``profile_export_genai_perf.json``
  (ai-dynamo/aiperf, triton-inference-server/perf_analyzer genai-perf): stat blocks ``{unit, avg, p50, ...}`` per
  metric; ``input_config`` nests its concurrency differently in each version, so it is searched for.
- ``llama-bench -o json`` (ggml-org/llama.cpp tools/llama-bench/llama-bench.cpp ``json_printer``): a JSON array,
  one object per test, ``n_prompt`` (pp) or ``n_gen`` (tg) with ``avg_ts`` tokens/s; ``flash_attn`` a bool in
  older builds and an int (-1 auto) in newer ones.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gpuwise.errors import ConfigError
from gpuwise.flags import Flag
from gpuwise.safe_io import read_text

MAX_EXPORT_BYTES = 50 * 2**20
MAX_RUNS = 10_000
FORMATS = ("AIPerf or GenAI-Perf profile export JSON", "`vllm bench serve --save-result` JSON",
           "SGLang bench_serving JSONL", "`llama-bench -o json`")


@dataclass(frozen=True)
class MeasuredRun:
    """One benchmark run as measured: the load it ran and what it saw (means where the tool gives them, else
    medians). Serving runs carry latencies; llama-bench tests carry tokens/s of a prompt or a generation."""

    tool: str
    label: str
    model: str | None = None
    gpu_name: str | None = None
    concurrency: float | None = None  # clients in flight (a closed loop)
    request_rate: float | None = None  # offered requests/s; None: as fast as possible
    requests: int | None = None
    input_len: float | None = None  # tokens per request, mean
    output_len: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None  # per output token after the first (the inter-token latency where no TPOT)
    e2e_ms: float | None = None  # a request's whole latency, where the tool gives it
    request_per_s: float | None = None
    output_tokens_per_s: float | None = None
    prompt_tokens: int | None = None  # llama-bench: a pp test's prompt, or a tg test's generated tokens
    generated_tokens: int | None = None
    tokens_per_s: float | None = None  # llama-bench avg_ts
    weight_bytes: float | None = None  # llama-bench model_size: the GGUF's bytes
    statistic: str = "mean"


def _number(value: Any) -> float | None:
    """A finite number, or None (the strings "inf", JSON's Infinity and NaN, nulls)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _first(data: Mapping[str, Any], *keys: str) -> tuple[float | None, str]:
    for key in keys:
        found = _number(data.get(key))
        if found is not None:
            return found, key.split("_")[0]
    return None, ""


def _per_request(total: Any, count: Any) -> float | None:
    t, n = _number(total), _number(count)
    return t / n if t is not None and n else None


def _serving(data: Mapping[str, Any], tool: str, label: str) -> MeasuredRun:
    """A vLLM or SGLang serving result: the two tools share their key names."""
    completed = _number(data.get("completed"))
    ttft, stat = _first(data, "mean_ttft_ms", "median_ttft_ms")
    tpot, _ = _first(data, "mean_tpot_ms", "median_tpot_ms", "mean_itl_ms", "median_itl_ms")
    e2e, _ = _first(data, "mean_e2e_latency_ms", "mean_e2el_ms", "median_e2e_latency_ms", "median_e2el_ms")
    rate = _number(data.get("request_rate"))
    duration = _number(data.get("duration"))
    per_s = _number(data.get("request_throughput")) or (completed / duration if completed and duration else None)
    concurrency = _number(data.get("max_concurrency"))
    if concurrency is None and rate is None:  # every prompt at once: as many in flight as prompts
        concurrency = _number(data.get("num_prompts")) or completed
    server: Mapping[str, Any] = data["server_info"] if isinstance(data.get("server_info"), Mapping) else {}
    model = data.get("model_id") or server.get("model_path")
    return MeasuredRun(
        tool=tool, label=label, model=model if isinstance(model, str) else None,
        concurrency=concurrency, request_rate=rate, requests=int(completed) if completed else None,
        input_len=_per_request(data.get("total_input_tokens"), completed),
        output_len=_per_request(data.get("total_output_tokens"), completed), ttft_ms=ttft, tpot_ms=tpot, e2e_ms=e2e,
        request_per_s=per_s, output_tokens_per_s=_number(data.get("output_throughput")), statistic=stat or "mean")


def _stat(data: Mapping[str, Any], key: str) -> float | None:
    block = data.get(key)
    return _number(block.get("avg")) if isinstance(block, Mapping) else None


def _search(node: Any, names: tuple[str, ...], depth: int = 0) -> Any:
    """The first value under any of ``names`` in a nested config (AIPerf's input_config differs by version)."""
    if depth > 6:
        return None
    if isinstance(node, Mapping):
        for name in names:
            if name in node and node[name] not in (None, [], {}):
                return node[name]
        children: Iterator[Any] = iter(node.values())
    elif isinstance(node, list):
        children = iter(node[:50])
    else:
        return None
    for child in children:
        found = _search(child, names, depth + 1)
        if found is not None:
            return found
    return None


def _aiperf(data: Mapping[str, Any], label: str) -> MeasuredRun:
    config = data.get("input_config") or {}
    model = _search(config, ("model_names", "model", "formatted_model_name", "name"))
    if isinstance(model, list):
        model = model[0] if model and isinstance(model[0], str) else None
    gpu = _search(data.get("telemetry_data") or {}, ("gpu_name",))
    count = _stat(data, "request_count")
    return MeasuredRun(
        tool="aiperf" if "was_cancelled" in data or "telemetry_data" in data else "genai-perf", label=label,
        model=model if isinstance(model, str) else None, gpu_name=gpu if isinstance(gpu, str) else None,
        concurrency=_number(_search(config, ("concurrency",))), requests=int(count) if count else None,
        input_len=_stat(data, "input_sequence_length"), output_len=_stat(data, "output_sequence_length"),
        ttft_ms=_stat(data, "time_to_first_token"), tpot_ms=_stat(data, "inter_token_latency"),
        e2e_ms=_stat(data, "request_latency"),
        request_per_s=_stat(data, "request_throughput"), output_tokens_per_s=_stat(data, "output_token_throughput"))


def _llama_bench(test: Mapping[str, Any], index: int) -> MeasuredRun:
    prompt, generated = int(test.get("n_prompt") or 0), int(test.get("n_gen") or 0)
    label = f"pp{prompt}" if prompt and not generated else f"tg{generated}" if generated and not prompt else (
        f"pp{prompt}+tg{generated}")
    return MeasuredRun(tool="llama-bench", label=f"{label} (test {index + 1})", model=str(test.get("model_type")),
                       gpu_name=str(test.get("gpu_info") or "") or None, prompt_tokens=prompt or None,
                       generated_tokens=generated or None, tokens_per_s=_number(test.get("avg_ts")),
                       weight_bytes=_number(test.get("model_size")), concurrency=1.0)


def _load_label(data: Mapping[str, Any], index: int) -> str:
    """``#2 8 req/s``, ``#1 32 clients``, ``#3 all at once``: the load a serving run offered."""
    concurrency, rate = _number(data.get("max_concurrency")), _number(data.get("request_rate"))
    load = (f"{concurrency:g} clients" if concurrency else f"{rate:g} req/s" if rate else "all at once")
    return f"#{index + 1} {load}"


def _unknown(path: Path) -> ConfigError:
    return ConfigError(f"{path}: not a benchmark export gpuwise reads; it reads: {'; '.join(FORMATS)}")


def _objects(text: str, path: Path) -> list[Any]:
    """The file's JSON documents: one (a JSON file) or one per line (JSON Lines)."""
    with contextlib.suppress(json.JSONDecodeError):  # not one document: JSON Lines, below
        return [json.loads(text)]
    found = []
    for number, line in enumerate(text.splitlines()[:MAX_RUNS], 1):
        if line.strip():
            try:
                found.append(json.loads(line))
            except json.JSONDecodeError:
                raise ConfigError(f"{path}: line {number} is not JSON ({'; '.join(FORMATS)} are read)") from None
    return found


def _one(data: Any, index: int, path: Path) -> list[MeasuredRun]:
    if isinstance(data, list) and data and all(isinstance(t, Mapping) and "avg_ts" in t for t in data):
        return [_llama_bench(t, i) for i, t in enumerate(data[:MAX_RUNS])]
    if not isinstance(data, Mapping):
        raise _unknown(path)
    if isinstance(data.get("time_to_first_token"), Mapping) or isinstance(data.get("request_throughput"), Mapping):
        return [_aiperf(data, path.name)]
    if any(k in data for k in ("mean_ttft_ms", "median_ttft_ms")):
        tool = "sglang bench_serving" if data.get("backend") == "sglang" else "vllm bench serve"
        return [_serving(data, tool, _load_label(data, index))]
    raise _unknown(path)


def read_export(path: Path) -> list[MeasuredRun]:
    """Every run in ``path`` (bounded: MAX_EXPORT_BYTES, MAX_RUNS); a file of another shape is a one-line error that
    names the formats read."""
    documents = _objects(read_text(path, what="benchmark export", max_bytes=MAX_EXPORT_BYTES), path)
    runs = [run for i, doc in enumerate(documents) for run in _one(doc, i, path)]
    if not runs:
        raise _unknown(path)
    return runs[:MAX_RUNS]


class CalibrateSettings(BaseModel):
    """What `gpuwise calibrate` needs beside the file: what the file does not say."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    gpu: Annotated[str | None, Field(max_length=100), Flag(frozenset({"calibrate"}), "Measurement")] = Field(
        default=None, description="catalog id of the card the runs were on (default: the file's GPU name, if any)")
    model: Annotated[str | None, Field(max_length=300), Flag(frozenset({"calibrate"}), "Measurement")] = Field(
        default=None, description="the model served (default: the file's model id)")
    engine: Annotated[Literal["vllm", "sglang", "trtllm", "lmdeploy", "llamacpp"] | None,
                      Flag(frozenset({"calibrate"}), "Measurement")] = Field(
        default=None, description="the serving engine (default: the tool's: vllm, sglang, llamacpp; vllm for AIPerf)")
    tp: Annotated[int, Field(ge=1, le=64), Flag(frozenset({"calibrate"}), "Measurement")] = Field(
        default=1, description="tensor-parallel GPUs of one replica, as the server ran")
