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

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gpuwise.errors import ConfigError, InputTooLarge
from gpuwise.flags import Flag
from gpuwise.runtimes.bench_tools import AIPERF, GENAI_PERF, LLAMA_BENCH, serving_tool
from gpuwise.runtimes.names import ServingEngine
from gpuwise.runtimes.schema import BenchTool
from gpuwise.safe_io import excerpt, parse_json, read_text
from gpuwise.text import printable

MAX_EXPORT_BYTES = 50 * 2**20
MAX_RUNS = 10_000
MAX_FIGURE = 1e12  # no count, latency (ms), token count or rate in a benchmark export comes near it
MAX_TEXT = 200  # characters kept of a name read from a file
MAX_REQUESTS = 1_000_000  # entries read of a per-request list (vLLM's ttfts)
FORMATS = ("AIPerf or GenAI-Perf profile export JSON", "`vllm bench serve --save-result` JSON",
           "SGLang bench_serving JSONL", "`llama-bench -o json`")
UNBOUNDED = ("inf", "infinity")  # vLLM writes request_rate "inf"; SGLang the bare token Infinity


@dataclass(frozen=True)
class MeasuredRun:
    """One benchmark run as measured: the load it ran and what it saw (means where the tool gives them, else
    medians). Serving runs carry latencies; single-stream tests (llama-bench's) carry tokens/s of a prompt or a
    generation. ``bench`` is the tool's record (runtimes/bench_tools.py): the engine it measured, what its runs are."""

    bench: BenchTool
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
    params: float | None = None  # llama-bench model_n_params: the GGUF's parameter count
    architecture: str | None = None  # llama-bench model_type's first word: the GGUF's general.architecture
    context_depth: int | None = None  # llama-bench n_depth: tokens already in the context
    model_file: str | None = None  # llama-bench model_filename: the GGUF file the test loaded
    input_tokens_total: float | None = None  # every prompt token the run sent
    last_first_token_ms: float | None = None  # all prompts sent at once: the latest first token (vLLM's ttfts)
    prefix_cache: bool | None = None  # whether the engine cached prompt prefixes, where the file says
    tp: int | None = None  # the server's tensor-parallel size, where the file says (SGLang's server_info)
    statistic: str = "mean"

    @property
    def tool(self) -> str:
        """The tool's name, as the calibration record gives it."""
        return self.bench.id


def text(value: Any, limit: int = MAX_TEXT) -> str | None:
    """A name read from a file, safe to show: control and format characters (ESC, OSC, bidi overrides) removed,
    runs of spaces collapsed, at most ``limit`` characters; None for anything but a non-empty string."""
    if not isinstance(value, str):
        return None
    return printable(value[: limit * 4], one_line=True)[:limit] or None


def _refuse(where: str, key: str, value: Any, why: str) -> ConfigError:
    return ConfigError(f"{where}: {key} is {excerpt(value, 40)}, {why}")


def figure(data: Mapping[str, Any], key: str, where: str, *, unbounded: bool = False) -> float | None:
    """A measured figure: a finite number from 0 to MAX_FIGURE, None when absent or null; ``unbounded`` also reads
    the "inf"/Infinity a request rate uses for as-fast-as-possible as None. Anything else is a one-line refusal
    that names the file and the field."""
    value = data.get(key)
    if value is None:
        return None
    if unbounded and (value == math.inf or (isinstance(value, str) and value.strip().lower() in UNBOUNDED)):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _refuse(where, key, value, "not a number")
    if not math.isfinite(value) or not 0 <= value <= MAX_FIGURE:
        raise _refuse(where, key, value, f"outside 0 to {MAX_FIGURE:g}")
    return float(value)


def _count(data: Mapping[str, Any], key: str, where: str) -> int | None:
    found = figure(data, key, where)
    if found is not None and not found.is_integer():
        raise _refuse(where, key, found, "not a whole number")
    return int(found) if found is not None else None


def _first(data: Mapping[str, Any], where: str, *keys: str) -> tuple[float | None, str]:
    for key in keys:
        found = figure(data, key, where)
        if found is not None:
            return found, key.split("_")[0]
    return None, ""


def _per_request(total: float | None, count: float | None) -> float | None:
    return total / count if total is not None and count else None


def _latest_first_token_ms(data: Mapping[str, Any], where: str, completed: float | None) -> float | None:
    """Every prompt sent at once (no rate, no concurrency cap) and vLLM's per-request ``ttfts`` (seconds) saved: the
    latest first token, by when every prompt had been prefilled."""
    ttfts = data.get("ttfts")
    if not isinstance(ttfts, list) or not ttfts or len(ttfts) != completed or len(ttfts) > MAX_REQUESTS:
        return None
    seconds = [figure({"ttfts": t}, "ttfts", where) for t in ttfts]
    return 1e3 * max(s for s in seconds if s is not None) if all(s is not None for s in seconds) else None


def _serving(data: Mapping[str, Any], tool: BenchTool, label: str, where: str) -> MeasuredRun:
    """A vLLM or SGLang serving result: the two tools share their key names."""
    completed = figure(data, "completed", where)
    if completed == 0:
        raise ConfigError(f"{where}: no request completed in this run; nothing was measured")
    ttft, stat = _first(data, where, "mean_ttft_ms", "median_ttft_ms")
    tpot, _ = _first(data, where, "mean_tpot_ms", "median_tpot_ms", "mean_itl_ms", "median_itl_ms")
    e2e, _ = _first(data, where, "mean_e2e_latency_ms", "mean_e2el_ms", "median_e2e_latency_ms", "median_e2el_ms")
    rate, duration = figure(data, "request_rate", where, unbounded=True), figure(data, "duration", where)
    per_s = figure(data, "request_throughput", where) or (completed / duration if completed and duration else None)
    concurrency = figure(data, "max_concurrency", where)
    all_at_once = concurrency is None and rate is None
    if all_at_once:  # every prompt at once: as many in flight as prompts
        concurrency = figure(data, "num_prompts", where) or completed
    server: Mapping[str, Any] = data["server_info"] if isinstance(data.get("server_info"), Mapping) else {}
    inputs = figure(data, "total_input_tokens", where)
    radix_off, tp_size = server.get("disable_radix_cache"), _setting(server.get("tp_size"))
    return MeasuredRun(
        bench=tool, label=label, model=text(data.get("model_id")) or text(server.get("model_path")),
        concurrency=concurrency, request_rate=rate, requests=int(completed) if completed else None,
        input_len=_per_request(inputs, completed), input_tokens_total=inputs,
        output_len=_per_request(figure(data, "total_output_tokens", where), completed), ttft_ms=ttft, tpot_ms=tpot,
        e2e_ms=e2e, request_per_s=per_s, output_tokens_per_s=figure(data, "output_throughput", where),
        last_first_token_ms=_latest_first_token_ms(data, where, completed) if all_at_once else None,
        prefix_cache=not radix_off if isinstance(radix_off, bool) else None,
        tp=int(tp_size) if tp_size and tp_size.is_integer() else None, statistic=stat or "mean")


def _stat(data: Mapping[str, Any], key: str, where: str) -> float | None:
    block = data.get(key)
    return figure(block, "avg", f"{where}: {key}") if isinstance(block, Mapping) else None


def _search(node: Any, names: tuple[str, ...], depth: int = 0) -> Any:
    """The first value under any of ``names`` in a nested config (AIPerf's input_config differs by version)."""
    if depth > 6:
        return None
    if isinstance(node, Mapping):
        for name in names:
            if name in node and node[name] not in (None, [], {}):
                return node[name]
        children: Iterator[Any] = iter(list(node.values())[:200])
    elif isinstance(node, list):
        children = iter(node[:50])
    else:
        return None
    for child in children:
        found = _search(child, names, depth + 1)
        if found is not None:
            return found
    return None


def _setting(value: Any) -> float | None:
    """A load setting found by search in a config: a positive finite number, else unknown."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and 0 < value <= MAX_FIGURE else None


def _aiperf(data: Mapping[str, Any], label: str, where: str) -> MeasuredRun:
    config = data.get("input_config") or {}
    model = _search(config, ("model_names", "model", "formatted_model_name", "name"))
    if isinstance(model, list):
        model = model[0] if model else None
    gpu = _search(data.get("telemetry_data") or {}, ("gpu_name",))
    count = _stat(data, "request_count", where)
    return MeasuredRun(
        bench=AIPERF if "was_cancelled" in data or "telemetry_data" in data else GENAI_PERF, label=label,
        model=text(model), gpu_name=text(gpu), concurrency=_setting(_search(config, ("concurrency",))),
        requests=int(count) if count else None, input_len=_stat(data, "input_sequence_length", where),
        output_len=_stat(data, "output_sequence_length", where), ttft_ms=_stat(data, "time_to_first_token", where),
        tpot_ms=_stat(data, "inter_token_latency", where), e2e_ms=_stat(data, "request_latency", where),
        request_per_s=_stat(data, "request_throughput", where),
        output_tokens_per_s=_stat(data, "output_token_throughput", where))


def _llama_bench(test: Mapping[str, Any], index: int, where: str) -> MeasuredRun:
    where = f"{where} test {index + 1}"
    prompt, generated = _count(test, "n_prompt", where) or 0, _count(test, "n_gen", where) or 0
    label = f"pp{prompt}" if prompt and not generated else f"tg{generated}" if generated and not prompt else (
        f"pp{prompt}+tg{generated}")
    model_type = text(test.get("model_type"))
    return MeasuredRun(bench=LLAMA_BENCH, label=f"{label} (test {index + 1})", model=model_type,
                       gpu_name=text(test.get("gpu_info"), limit=MAX_TEXT * 8), prompt_tokens=prompt or None,
                       generated_tokens=generated or None, tokens_per_s=figure(test, "avg_ts", where) or None,
                       weight_bytes=figure(test, "model_size", where) or None,
                       params=figure(test, "model_n_params", where) or None,
                       architecture=model_type.split()[0] if model_type else None,
                       context_depth=_count(test, "n_depth", where), concurrency=1.0,
                       model_file=text(test.get("model_filename"), limit=MAX_TEXT * 8))


def _load_label(data: Mapping[str, Any], index: int) -> str:
    """``#2 8 req/s``, ``#1 32 clients``, ``#3 all at once``: the load a serving run offered."""
    concurrency, rate = _setting(data.get("max_concurrency")), _setting(data.get("request_rate"))
    load = (f"{concurrency:g} clients" if concurrency else f"{rate:g} req/s" if rate else "all at once")
    return f"#{index + 1} {load}"


def _shown(path: Path) -> str:
    return text(str(path), limit=300) or "the export"


def _unknown(path: Path) -> ConfigError:
    return ConfigError(f"{_shown(path)}: not a benchmark export gpuwise reads; it reads: {'; '.join(FORMATS)}")


def _objects(text_: str, path: Path) -> list[Any]:
    """The file's JSON documents: one (a JSON file) or one per line (JSON Lines). Depth and number length are
    bounded; a bare Infinity (SGLang's request_rate) is read, NaN is refused."""
    try:
        return [parse_json(text_, origin=_shown(path), infinity=True)]
    except InputTooLarge:
        raise
    except ConfigError:
        if "\n" not in text_.strip():
            raise
    found = []
    for number, line in enumerate(text_.splitlines()[:MAX_RUNS], 1):
        if line.strip():
            found.append(parse_json(line, origin=f"{_shown(path)} line {number}", infinity=True))
    return found


def _one(data: Any, index: int, path: Path) -> list[MeasuredRun]:
    name = text(path.name) or "export"  # a file name is text from outside too
    where = f"{name} run {index + 1}"
    if isinstance(data, list) and data and all(isinstance(t, Mapping) and "avg_ts" in t for t in data):
        return [_llama_bench(t, i, name) for i, t in enumerate(data[:MAX_RUNS])]
    if not isinstance(data, Mapping):
        raise _unknown(path)
    if isinstance(data.get("time_to_first_token"), Mapping) or isinstance(data.get("request_throughput"), Mapping):
        return [_aiperf(data, name, where)]
    if isinstance(data.get("error_request_count"), Mapping):
        failed = _stat(data, "error_request_count", where)
        raise ConfigError(f"{where}: an AIPerf export in which every request failed ({failed or 0:g} errors, no "
                          "latency or throughput recorded); nothing was measured")
    if any(k in data for k in ("mean_ttft_ms", "median_ttft_ms")):
        return [_serving(data, serving_tool(data.get("backend")), _load_label(data, index), where)]
    raise _unknown(path)


def read_export(path: Path) -> list[MeasuredRun]:
    """Every run in ``path`` (bounded: MAX_EXPORT_BYTES, MAX_RUNS); a file of another shape is a one-line error that
    names the formats read, a field that is not a measurement (a string, a list, Infinity, a negative number where a
    figure goes) one that names the file, the run and the field."""
    documents = _objects(read_text(path, what="benchmark export", max_bytes=MAX_EXPORT_BYTES), path)
    runs = [run for i, doc in enumerate(documents) for run in _one(doc, i, path)]
    if not runs:
        raise _unknown(path)
    return runs[:MAX_RUNS]


class CalibrateSettings(BaseModel):
    """What `gpuwise calibrate` needs beside the file: what the file does not say."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("engine_version")
    @classmethod
    def _a_version(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"v?[0-9]+(\.[0-9]+){0,3}([.+-]?[0-9A-Za-z.+-]*)?", value):
            raise ValueError(f"{value!r} is not a version: give the engine's version as it prints it, e.g. 0.6.4")
        return value

    gpu: Annotated[str | None, Field(max_length=100), Flag(frozenset({"calibrate"}), "Measurement")] = Field(
        default=None, description="catalog id of the card the runs were on (default: the file's GPU name as the tool "
                                  "printed it, read through catalog/data/gpu_names.yaml)")
    model: Annotated[str | None, Field(max_length=300), Flag(frozenset({"calibrate"}), "Measurement")] = Field(
        default=None, description="the model served (default: the file's model id; for llama-bench a dense model "
                                  "of the file's own parameter count)")
    engine: Annotated[ServingEngine | None,
                      Flag(frozenset({"calibrate"}), "Measurement")] = Field(
        default=None, description="the serving engine (default: the tool's: vllm, sglang, llamacpp; vllm for AIPerf)")
    engine_version: Annotated[str | None, Field(max_length=40), Flag(frozenset({"calibrate"}), "Measurement")] = Field(
        default=None, description="engine logs: the engine's version where the log does not print it (default: the "
                                  "record's, else the newest release on its date, else the newest gpuwise models)")
    tp: Annotated[int | None, Field(ge=1, le=64), Flag(frozenset({"calibrate"}), "Measurement")] = Field(
        default=None, description="tensor-parallel GPUs of one replica, as the server ran (default: the file's, "
                                  "else 1)")
