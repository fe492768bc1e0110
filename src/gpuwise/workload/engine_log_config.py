"""An engine start-up log read whole: its figures (workload/engine_logs.py), the configuration it printed, and,
for a YAML record of ../shared/data/engine-logs shape, the record's keys for what the log does not print.

Where each knob comes from, first found first: the engine's own config line (vLLM ``Initializing a V1 LLM engine
(vX) with config: ...``, @v0.11.0 vllm/v1/engine/core.py; V0 vllm/engine/llm_engine.py), the figures it printed
(``Maximum concurrency for N tokens``, ``Using max model len N``, SGLang's ``max_total_num_tokens=..., context_len=``),
the arguments it echoed (``non-default args: {...}``, ``args: Namespace(...)``, SGLang ``server_args=ServerArgs(...)``),
the command line the user pasted above it; then the YAML record's keys; else the engine's default (gpuwise's profile
of it decides).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.errors import ConfigError
from gpuwise.safe_io import parse_yaml, read_text
from gpuwise.text import printable
from gpuwise.workload.engine_logs import MAX_LINES, MINIMUM, Reading, derived, engine_of, read_lines, rules_of

MAX_LOG_BYTES = 20 * 2**20
MAX_TEXT = 300
LOG = "printed in the log"
RECORD = "YAML record"

# knob -> the names engines and their launchers give it (vLLM EngineArgs / SGLang ServerArgs field names)
ALIASES: Mapping[str, tuple[str, ...]] = {
    "model": ("model", "model_path", "model_tag"),
    "tp": ("tensor_parallel_size", "tp_size", "tp"),
    "pp": ("pipeline_parallel_size", "pp_size", "pp"),
    "dtype": ("dtype",),
    "quantization": ("quantization",),
    "kv_cache_dtype": ("kv_cache_dtype",),
    "memory_fraction": ("gpu_memory_utilization", "mem_fraction_static"),
    "context": ("max_model_len", "max_seq_len", "context_length", "context_len"),
    "max_num_seqs": ("max_num_seqs", "max_running_requests"),
    "max_num_batched_tokens": ("max_num_batched_tokens", "chunked_prefill_size"),
    "enforce_eager": ("enforce_eager", "disable_cuda_graph"),
    "block_size": ("block_size", "page_size"),
}
# the YAML record's keys for a knob (SOURCES.md of engine-logs)
RECORD_KEYS: Mapping[str, tuple[str, ...]] = {
    "model": ("model",), "tp": ("tensor_parallel_size", "tp_size", "tp"),
    "pp": ("pipeline_parallel_size", "pp_size", "pp"), "dtype": ("dtype",), "block_size": ("block_size", "page_size"),
    "quantization": ("quantization",), "kv_cache_dtype": ("kv_cache_dtype",),
    "memory_fraction": ("gpu_memory_utilization", "mem_fraction_static"),
    "context": ("max_model_len", "context_len", "context_length"),
    "max_num_seqs": ("max_num_seqs", "max_running_requests"),
    "max_num_batched_tokens": ("max_num_batched_tokens", "chunked_prefill_size"), "enforce_eager": ("enforce_eager",),
}
_SHORT = {"tp": ("-tp",), "pp": ("-pp",)}
_VALUE = r"('[^']*'|\"[^\"]*\"|[^\s,)}\]]+)"
_PRINTED = {"context": (r"Using max model len (\d+)", r"Maximum concurrency for ([\d,]+) tokens per request",
                        r"max seq len \((\d+)\)"),
            "max_num_batched_tokens": (r"Chunked prefill is enabled with max_num_batched_tokens=(\d+)",
                                       r"chunked prefill size is adjusted to (\d+)"),
            "memory_fraction": (r"The current --gpu-memory-utilization=([\d.]+)",),
            "kv_cache_dtype": (r"Setting KV cache dtype to ([\w.]+)", r"Using KV cache dtype: ([\w.]+)"),
            "dtype": (r"Load weight end\. type=\w+, dtype=([\w.]+)",)}
_ENGINE_CONFIG = re.compile(r"LLM engine \(v([^)\s]+)\) with config:")
_VERSION = (re.compile(r"LLM engine \(v([^)\s]+)\)"), re.compile(r"vLLM API server version (\S+)"),
            re.compile(r"[█▄▀] +version (\d[\w.+-]*)"), re.compile(r"sglang(?: version|==)\s*v?(\d[\w.+-]*)"))
_RECORD_VERSION = re.compile(r"(?<![\w.])v?(0\.\d+(?:\.\d+){0,2}(?:\.?dev\d+)?(?:\+[\w.]+)?)")  # vLLM, SGLang: 0.x
_ARGS = ("non-default args:", "Namespace(", "ServerArgs(")
_COMMANDS = re.compile(r"vllm serve|sglang\.launch_server|sglang\.bench|launch_server|python3? -m ")


@dataclass(frozen=True)
class Knob:
    value: Any
    origin: str


@dataclass(frozen=True)
class EngineLog:
    """One engine start: ``figures`` as printed (per GPU; GiB whatever the label), ``knobs`` with their origin,
    the YAML record's GPU and model where it gives them."""

    engine: str
    source: str
    figures: Mapping[str, float]
    knobs: Mapping[str, Knob]
    version: Knob | None
    gpu_id: str | None = None
    record_id: str | None = None
    startup_failed: bool = False
    record_model: Knob | None = None  # the record's model key, where the log names another (a local path)


def _clean(raw: str) -> Any:
    """A value as an engine printed it: quotes off, torch. off; None/auto as unset; True/False, numbers typed."""
    value = raw.strip().strip("'\"").removeprefix("torch.")
    if value in ("None", "null", "auto", "") or value.startswith("<"):
        return None
    if value in ("True", "False"):
        return value == "True"
    try:
        return int(value.replace(",", "")) if re.fullmatch(r"-?[\d,]+", value) else float(value)
    except ValueError:
        return printable(value[:MAX_TEXT], one_line=True)


def _setting(line: str, names: tuple[str, ...], short: tuple[str, ...] = ()) -> Any:
    """The first set value of any of ``names`` in an echoed-args line: 'k': v, k=v, --k v, --k=v."""
    for name in names:
        dashed = name.replace("_", "-")
        for regex in (rf"['\"]{name}['\"]\s*:\s*{_VALUE}", rf"(?<![\w.-]){name}\s*=\s*{_VALUE}",
                      rf"(?<![\w-])--(?:{dashed}|{name})(?:=|\s+){_VALUE}",
                      *(rf"(?<![\w-]){s}(?:=|\s+){_VALUE}" for s in short)):
            found = re.search(regex, line)
            if found:
                value = _clean(found.group(1))
                if value is not None:
                    return value
    return None


def _served_model(line: str) -> str | None:
    """``vllm serve MODEL ...`` or ``vllm serve --flags ... /path/MODEL``: the positional model."""
    found = re.search(r"vllm serve\s+(.*)", line)
    if not found:
        return None
    words = found.group(1).split()
    if words and not words[0].startswith("-"):
        return str(_clean(words[0]))
    paths = [w for i, w in enumerate(words) if "/" in w and not w.startswith("-") and "{" not in w]
    return str(_clean(paths[-1])) if paths else None


def _knob_in_lines(knob: str, lines: list[str]) -> Knob | None:
    names, short = ALIASES[knob], _SHORT.get(knob, ())
    layers = ((f"{LOG} (engine config)", [ln for ln in lines if _ENGINE_CONFIG.search(ln)]),
              (f"{LOG} (figures)", None),
              (f"{LOG} (arguments)", [ln for ln in lines if any(a in ln for a in _ARGS)]),
              (f"{LOG} (command line)", [ln for ln in lines if _COMMANDS.search(ln)]))
    for origin, group in layers:
        if group is None:
            for regex in _PRINTED.get(knob, ()):
                found = next((m for ln in lines if (m := re.search(regex, ln))), None)
                if found:
                    return Knob(_clean(found.group(1)), origin)
            group = [ln for ln in lines if "max_total_num_tokens=" in ln]  # SGLang's scheduler prints its limits
        for line in group:
            value = _setting(line, names, short)
            if value is None and knob == "model" and "command" in origin:
                value = _served_model(line)
            if value is not None:
                return Knob(value, origin)
    return None


def _record_knob(knob: str, record: Mapping[str, Any]) -> Knob | None:
    for key in RECORD_KEYS.get(knob, ()):
        value = record.get(key)
        if isinstance(value, str) and knob == "quantization":  # its note names the format: "... int4 weight-only"
            value = printable(value[:MAX_TEXT], one_line=True) or None
        elif isinstance(value, str):  # a record's note follows its value: "bfloat16 (activations)", "fp8 (checkpoint)"
            value = _clean(value.split()[0].rstrip(",;")) if value.split() else None
        if isinstance(value, (bool, int, float, str)) and value != "not":
            return Knob(value, f"{RECORD} ({key})")
    return None


def _version(lines: list[str], record: Mapping[str, Any], engine: str) -> Knob | None:
    """The engine's version: printed in the log; else the first version the record's ``engine_version`` names (its
    author's reading: "not printed (... so about 0.9.2/0.10.0)"); else the newest release on the record's date."""
    for regex in _VERSION:
        found = next((m for ln in lines if (m := regex.search(ln))), None)
        if found:
            return Knob(found.group(1), LOG)
    named = _RECORD_VERSION.search(str(record.get("engine_version") or "")[:MAX_TEXT])
    if named:
        return Knob(named.group(1), f"{RECORD} (engine_version)")
    day = str(record.get("date") or "")[:10]
    release = release_on(engine, day) if re.fullmatch(r"\d{4}-\d{2}-\d{2}", day) else None
    return Knob(release, f"the newest {engine} release on {day} (PyPI's release dates)") if release else None


def release_on(engine: str, day: str) -> str | None:
    """The newest release of ``engine`` (vllm, sglang) first uploaded to PyPI on or before ``day`` (YYYY-MM-DD),
    from workload/data/engine_releases.yaml; None before the table's first or for another engine."""
    released = [v for v, d in _releases().get(engine, ()) if d <= day]
    return released[-1] if released else None


@functools.cache
def _releases() -> dict[str, tuple[tuple[str, str], ...]]:
    from importlib import resources

    data = parse_yaml((resources.files("gpuwise.workload") / "data" / "engine_releases.yaml").read_text("utf-8"),
                      origin="engine_releases.yaml")
    return {name: tuple(sorted(((str(v), str(d)) for v, d in rows), key=lambda r: r[1]))
            for name, rows in data["releases"].items()}


def _record(text: str, origin: str) -> tuple[str, Mapping[str, Any]]:
    """(the log text, the YAML record) of a file: a mapping with a string ``excerpt`` is a record; anything else is
    the log itself."""
    if "excerpt:" not in text:
        return text, {}
    try:
        data = parse_yaml(text, origin=origin)
    except ConfigError:
        return text, {}
    excerpt = data.get("excerpt") if isinstance(data, Mapping) else None
    if isinstance(excerpt, list):  # lines as a YAML list
        excerpt = "\n".join(str(line) for line in excerpt[:MAX_LINES])
    if isinstance(data, Mapping) and isinstance(excerpt, str):
        return excerpt, data
    return text, {}


def parse_engine_log(text: str, *, source: str = "log") -> EngineLog:
    """The engine log in ``text`` (a YAML record or the log's own lines); a one-line ConfigError when it has no
    vLLM or SGLang start-up line."""
    log_text, record = _record(text, source)
    reading: Reading = read_lines(log_text)
    engine = engine_of(reading, source)
    if str(record.get("engine", "")).lower() in reading.engines:  # the record says which, where both are seen
        engine = str(record["engine"]).lower()
    lines = reading.lines
    knobs: dict[str, Knob] = {}
    for knob in ALIASES:
        found = _knob_in_lines(knob, lines) or _record_knob(knob, record)
        if found is not None and found.value is not None:
            knobs[knob] = found
    block = knobs.get("block_size")
    size = block.value if block and isinstance(block.value, int) and 0 < block.value <= 4096 else None
    figures = derived(reading.figures(MINIMUM), rules_of(engine), size)
    fraction = knobs.get("memory_fraction")
    if "gpu_memory_utilization" in figures and (fraction is None or "engine config" not in fraction.origin):
        knobs["memory_fraction"] = Knob(figures["gpu_memory_utilization"], f"{LOG} (figures)")
    if "max_concurrency_at_len" in figures and "context" not in knobs:
        knobs["context"] = Knob(int(figures["max_concurrency_at_len"]), f"{LOG} (figures)")
    gpu = record.get("gpu")
    gpu_id = gpu.get("catalog_id") if isinstance(gpu, Mapping) else gpu if isinstance(gpu, str) else None
    failed = bool(re.search(r"EngineCore failed to start|ValueError: |CUDA out of memory", log_text))
    return EngineLog(engine, source, figures, knobs, _version(lines, record, engine),
                     gpu_id=str(gpu_id)[:100] if isinstance(gpu_id, str) else None,
                     record_id=printable(str(record["id"])[:MAX_TEXT], one_line=True) if record.get("id") else None,
                     startup_failed=failed, record_model=_record_knob("model", record))


def read_engine_log(path: Path) -> EngineLog:
    """The engine log in the file at ``path`` (bounded: MAX_LOG_BYTES)."""
    name = printable(path.name[:MAX_TEXT], one_line=True) or "log"
    return parse_engine_log(read_text(path, what="engine log", max_bytes=MAX_LOG_BYTES), source=name)


def looks_like_engine_log(text: str) -> bool:
    """Whether ``text`` has a vLLM or SGLang start-up line (the calibrate dispatch asks before the export readers)."""
    log_text, _ = _record(text, "file")
    return bool(read_lines(log_text).engines)
