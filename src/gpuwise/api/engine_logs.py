"""``gpuwise calibrate --from LOG``: a vLLM or SGLang start-up log, each memory figure it printed beside gpuwise's
prediction for the settings the log itself printed (workload/engine_log_config.py says where each came from).

The prediction is ``estimate --task infer`` of one sequence of the log's context length (max_model_len /
context_len) on one GPU of the replica: weights, the KV pool in GiB and in tokens (``kv_tokens_per_gpu``, the count
the engine prints; vLLM's blocks are tokens / block size), CUDA graphs where the estimate gives them, and the
concurrency at that length, tokens / context as vLLM prints it (vllm-project/vllm@v0.6.4
vllm/executor/gpu_executor.py: ``num_gpu_blocks * block_size / max_model_len``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuwise.api.catalog import CatalogFiles, load_catalog
from gpuwise.catalog import Catalog
from gpuwise.errors import ConfigError, GpuwiseError
from gpuwise.estimate.dtypes import BITS
from gpuwise.text import printable
from gpuwise.workload.engine_log_config import LOG, RECORD, EngineLog, Knob, parse_engine_log, read_engine_log
from gpuwise.workload.engine_logs import FIGURE_NAMES, rules_of
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.architecture import Architecture

GIB = 2**30
DEFAULT = "engine default (gpuwise's profile)"
FLAG = "--flag"
# vLLM --quantization / SGLang --quantization -> gpuwise's weight format (None: the checkpoint's own)
_QUANT = {"fp8": "fp8", "awq": "awq-int4", "awq_marlin": "awq-int4", "gptq": "gptq-int4", "gptq_marlin": "gptq-int4",
          "mxfp4": "mxfp4", "modelopt_fp4": "nvfp4", "nvfp4": "nvfp4", "modelopt": "nvfp4", "auto_round": "int4",
          "int4": "int4", "int8": "int8", "w8a8_int8": "int8", "fbgemm_fp8": "fp8", "compressed-tensors": None}
_DTYPE = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16", "half": "fp16", "float32": "fp32",
          "float": "fp32"}
_KV = {"fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "fp8_inc": "fp8", "bfloat16": "bf16", "float16": "fp16"}
_TOTAL_MATCH = 0.02  # a printed total within 2 % of one catalog card's memory names it


@dataclass(frozen=True)
class FigureRow:
    key: str
    label: str
    log: float | None
    predicted: float | None

    @property
    def difference(self) -> float | None:
        """(gpuwise - log) / log."""
        if self.log is None or self.predicted is None or self.log == 0:
            return None
        return (self.predicted - self.log) / self.log


@dataclass(frozen=True)
class LogComparison:
    log: EngineLog
    model: str
    gpu: str
    rows: tuple[FigureRow, ...]
    settings: Mapping[str, Knob]
    notes: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = field(default=())

    def record(self) -> dict[str, Any]:
        return {"kind": "engine-log", "source": self.log.source, "record_id": self.log.record_id,
                "engine": self.log.engine, "engine_version": self.log.version.value if self.log.version else None,
                "model": self.model, "gpu": self.gpu, "startup_failed": self.log.startup_failed,
                "figures": [{"figure": r.key, "label": r.label, "log": r.log, "predicted": r.predicted,
                             "difference": r.difference} for r in self.rows],
                "measured": {r.key: r.log for r in self.rows}, "predicted": {r.key: r.predicted for r in self.rows},
                "log_figures": dict(self.log.figures),
                "settings": {k: {"value": v.value, "from": v.origin} for k, v in self.settings.items()},
                "notes": list(self.notes), "assumptions": list(self.assumptions)}


HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}")  # owner/name, as the hub spells repos


def _known(name: str) -> str | None:
    """The name gpuwise resolves offline for ``name``: itself, or the hub id or folder name a local path ends in
    (``/models/Qwen3-235B-A22B-FP8``), when it is a preset or a preset's hub id, a format suffix allowed (-FP8, -AWQ);
    a re-upload under another owner (``TechxGenus/Meta-Llama-3-70B-Instruct-AWQ``) as the preset's own repo."""
    from gpuwise.workload.model.checkpoint import strip_variant
    from gpuwise.workload.model.presets import hub_index

    known = hub_index()
    repos = {k.split("/")[-1]: k for k in sorted(known, reverse=True) if "/" in k}  # repo name -> hub id
    parts = [p for p in name.replace("\\", "/").split("/") if p]
    for candidate in dict.fromkeys((name, "/".join(parts[-2:]), parts[-1] if parts else "")):
        base, _, removed = strip_variant(candidate)
        if candidate and (candidate.lower() in known or base.lower() in known):
            return candidate
        repo = repos.get(base.split("/")[-1].lower())
        if candidate and repo is not None:
            return repo + "".join(reversed(removed))
    return None


def _model(log: EngineLog, given: str | None) -> tuple[Architecture, Knob]:
    """The model: --model, else the log's id (or the YAML record's) when gpuwise knows it offline: a preset or a
    preset's hub id, a format suffix such as -FP8 or -AWQ allowed, also at the end of a local path; else a one-line
    error asking for --model."""
    from gpuwise.api.jobs import model

    if given:
        return model(given), Knob(given, FLAG)
    tried = [k for k in (log.knobs.get("model"), log.record_model) if k is not None]
    for knob in tried:
        found = _known(str(knob.value))
        if found is not None:
            origin = knob.origin if found == knob.value else f"{knob.origin}, read as {found}"
            return model(found), Knob(knob.value, origin)
    shown = f"the log's model {str(tried[0].value)[:120]!r}" if tried else "the log names no model"
    hub = next((str(k.value) for k in tried if HUB_ID.fullmatch(str(k.value)) and not Path(str(k.value)).exists()),
               None)  # a name the log gives that is also a folder here is not read: the file chose it
    if hub is not None:  # a hub id gpuwise has no preset for: its config.json, as `estimate` would fetch it
        try:
            return model(hub), Knob(hub, "the log, config.json from the Hugging Face hub")
        except ConfigError as exc:
            raise ConfigError(f"{shown}: {str(exc).rstrip('.')}; or give --model NAME (a preset such as "
                              "llama-3.1-8b, `gpuwise models`, or a config.json)") from exc
    raise ConfigError(f"{shown} is not a model gpuwise knows offline: give --model NAME (a preset such as "
                      "llama-3.1-8b, `gpuwise models`, or a config.json)")


def _gpu(log: EngineLog, given: str | None, catalog: Catalog) -> Knob:
    """--gpu, else the record's catalog id, else the total memory the log printed if exactly one card has it."""
    if given:
        return Knob(catalog.gpu(given).id, FLAG)
    if log.gpu_id and log.gpu_id in catalog.gpus:
        return Knob(log.gpu_id, RECORD)
    total = log.figures.get("total_gpu_memory_gib")
    if total:
        near = [g.id for g in catalog.gpus.values()
                if abs(g.usable_memory_bytes / GIB - total) <= _TOTAL_MATCH * total]
        if len(near) == 1:
            return Knob(near[0], f"{LOG} (total_gpu_memory={total:g} GiB)")
    raise ConfigError("the log does not say which GPU ran it" + (f" ({total:g} GiB fits several cards)" if total
                                                                 else "") + ": give --gpu ID (`gpuwise catalog list`)")


def _format(log: EngineLog, arch: Architecture) -> tuple[str | None, Knob | None]:
    quant, dtype = log.knobs.get("quantization"), log.knobs.get("dtype")
    if arch.checkpoint is not None:  # a quantized checkpoint loads as it ships (its scope and scales): the engine's
        return None, None  # 'quantization=compressed-tensors' or 'fp8' names that format, it does not requantize
    if quant is not None:
        words = re.findall(r"[\w-]+", str(quant.value).lower())
        if "gguf" in words:  # "gguf Q4_K_M", or the type in the file's name (...-Q4_K_M.gguf)
            model = log.knobs.get("model")
            named_in = words + re.findall(r"[a-z0-9_]+", str(model.value if model else "").lower())
            return next((f"gguf-{w}" for w in named_in if f"gguf-{w}" in BITS), "gguf-q4_k_m"), quant
        named = [_QUANT[w] for w in words if _QUANT.get(w)]  # a record's "compressed-tensors int4 weight-only"
        mapped = named[0] if named else _QUANT.get(words[0] if words else "", "unknown")
        if mapped != "unknown":
            return mapped, quant
    if dtype is None:
        return None, None
    return _DTYPE.get(str(dtype.value).lower()), dtype


Options = tuple[dict[str, Any], dict[str, Knob], list[str]]


def _whole(knob: Knob | None, high: int) -> int | None:
    """A count the log printed, if it is one from 1 to ``high``; anything else is left to the default."""
    value = knob.value if knob is not None else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not float(value).is_integer():
        return None
    return int(value) if 1 <= value <= high else None


def _passed(knob: str, value: Any) -> Any:
    """A knob's value as the job takes it, or None where it is not one (the engine's default applies)."""
    if knob == "enforce_eager":
        return value if isinstance(value, bool) else None
    if knob == "memory_fraction":
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= 1 \
            else None
    return _whole(Knob(value, ""), 10_000_000)


def job_options(log: EngineLog, arch: Architecture, tp: int | None) -> Options:
    """The InferJob options for the log's settings, each knob's origin, and notes on what was approximated. Only
    options InferJob has are passed (an engine_version or enforce_eager field where the job model has one)."""
    knobs, notes = dict(log.knobs), []
    fields = InferJob.model_fields
    if tp:
        knobs["tp"] = Knob(tp, FLAG)
    tp_n, pp_n = _whole(knobs.get("tp"), 1024) or 1, _whole(knobs.get("pp"), 1024) or 1
    options: dict[str, Any] = {"engine": log.engine, "batch": 1, "output_len": 0}
    if pp_n > 1 and "pp" in fields:
        options["pp"] = pp_n
    elif pp_n > 1:
        notes.append(f"pipeline parallel {pp_n} taken as {tp_n * pp_n}-way sharding: gpuwise's inference job has no "
                     "pipeline stages, and each stage holds 1/pp of the layers")
        tp_n *= pp_n
    options.update(tp=tp_n, count=tp_n)
    quant, origin = _format(log, arch)
    if quant:
        options["quant"] = quant
        knobs["format"] = Knob(quant, origin.origin if origin else DEFAULT)
    elif arch.checkpoint is not None:
        knobs["format"] = Knob(arch.checkpoint.quant, f"the checkpoint's own ({arch.checkpoint.source})")
    kv = log.knobs.get("kv_cache_dtype")
    if kv is not None and _KV.get(str(kv.value).lower()):
        options["kv_dtype"] = _KV[str(kv.value).lower()]
    context = _whole(knobs.get("context"), 10_000_000)
    options["input_len"] = context or arch.max_positions or 4096
    if context is None:
        knobs["context"] = Knob(options["input_len"], "the model's positions (not printed)")
    for knob in ("memory_fraction", "max_num_seqs", "max_num_batched_tokens", "enforce_eager"):
        given = knobs.get(knob)
        value = _passed(knob, given.value) if given is not None else None
        if value is not None and knob in fields:
            options[knob] = value
        elif given is None:
            knobs[knob] = Knob(None, DEFAULT)
    if log.version is not None and "engine_version" in fields:
        options["engine_version"] = str(log.version.value)
    knobs["engine_version"] = log.version or Knob(None, "not printed: the newest release gpuwise models")
    return options, knobs, notes


def _rows(log: EngineLog, memory: Any, context: int, block_size: int | None) -> tuple[FigureRow, ...]:
    details = memory.details or {}
    tokens = details.get("kv_tokens_per_gpu")
    pool = details.get("kv_pool_bytes", memory.kv_budget_bytes)
    graphs = details.get("cuda_graph_bytes")
    f = log.figures
    predicted = {"weights_gib": memory.breakdown_bytes.get("weights", 0.0) / GIB,
                 "kv_cache_gib": pool / GIB if pool is not None else None,
                 "kv_cache_tokens": float(int(tokens)) if tokens is not None else None,
                 "gpu_blocks": float(int(tokens // block_size)) if tokens is not None and block_size else None,
                 "cuda_graph_gib": graphs / GIB if graphs is not None else None,
                 "max_concurrency": tokens / context if tokens is not None and context else None}
    seen = {**f, "kv_cache_gib": f.get("kv_cache_gib", f.get("kv_pool_gib"))}
    return tuple(FigureRow(k, label, seen.get(k), predicted[k]) for k, label in FIGURE_NAMES.items()
                 if k != "gpu_blocks" or block_size)


def compare_log(log: EngineLog, *, settings: Mapping[str, object] | None = None,
                catalog_files: CatalogFiles = ()) -> LogComparison:
    """Each figure of ``log`` beside gpuwise's prediction for the log's settings; ``settings`` are calibrate's
    (gpu, model, tp; engine is the log's)."""
    from gpuwise.api.jobs import estimate

    given = dict(settings or {})
    if given.get("engine_version"):
        log = replace(log, version=Knob(str(given["engine_version"]), FLAG))
    catalog = load_catalog(catalog_files=catalog_files)
    gpu = _gpu(log, given.get("gpu"), catalog)  # type: ignore[arg-type]
    arch, model_knob = _model(log, given.get("model"))  # type: ignore[arg-type]
    options, knobs, notes = job_options(log, arch, given.get("tp"))  # type: ignore[arg-type]
    knobs = {"gpu": gpu, "model": model_knob, **{k: v for k, v in knobs.items() if k not in ("gpu", "model")}}
    default_block = rules_of(log.engine).block_size
    if default_block:  # an engine that counts its KV cache in blocks
        knobs.setdefault("block_size", Knob(default_block, "engine default"))
    try:
        done = estimate(arch, gpu=str(gpu.value), task="infer", catalog_files=catalog_files, **options)
    except GpuwiseError as exc:
        raise ConfigError(f"{str(exc).rstrip('.')}; the log's settings: give --gpu, --model or --tp to correct "
                          "them") from None
    block = knobs.get("block_size")
    rows = _rows(log, done.memory, int(options["input_len"]),
                 _whole(block, 4096) if block and default_block else None)
    if log.startup_failed:
        notes.append("the engine failed to start after printing these figures")
    return LogComparison(log, arch.name, str(gpu.value), rows, knobs, tuple(notes), tuple(done.memory.assumptions))


def file_shape(path: Path | str) -> str:
    """What the file at ``path`` holds, by its content: ``engine-log`` (a vLLM or SGLang start-up log, or a YAML
    record of one), ``json`` (a benchmark export's shape, for workload/exports.py), else a one-line ConfigError that
    names both shapes."""
    from gpuwise.safe_io import read_text
    from gpuwise.workload.engine_log_config import MAX_LOG_BYTES, looks_like_engine_log

    text = read_text(Path(path), what="calibrate --from file", max_bytes=MAX_LOG_BYTES)
    if re.match(r"\s*(\{|\[\s*(\{|\[|\]|$))", text):  # a JSON object or array of them (SGLang's '[12:00 TP0]' is not)
        return "json"
    if looks_like_engine_log(text):
        return "engine-log"
    name = printable(Path(path).name[:200], one_line=True) or "the file"
    raise ConfigError(f"{name}: neither a benchmark export (AIPerf, vllm bench serve, SGLang bench_serving, "
                      "llama-bench -o json) nor a vLLM or SGLang start-up log (no line such as 'GPU KV cache size: N "
                      "tokens', '# GPU blocks: N', 'KV Cache is allocated', 'max_total_num_tokens=N')")


def compare_engine_log(path: Path | str, *, settings: Mapping[str, object] | None = None,
                       save: Path | str | None = None, catalog_files: CatalogFiles = ()) -> LogComparison:
    """``calibrate --from LOG``: read the log at ``path`` and compare it (see :func:`compare_log`); ``save`` writes
    the comparison's record (JSON, atomically)."""
    import json

    from gpuwise.flags import build
    from gpuwise.safe_io import atomic_write_text, check_writable
    from gpuwise.workload.exports import CalibrateSettings

    chosen = build(CalibrateSettings, dict(settings or {})).model_dump(exclude_none=True)
    if save is not None:
        check_writable(Path(save), what="calibration record")
    done = compare_log(read_engine_log(Path(path)), settings=chosen, catalog_files=catalog_files)
    if save is not None:
        atomic_write_text(Path(save), json.dumps(done.record(), indent=2) + "\n", what="calibration record")
    return done


def compare_engine_text(text: str, *, source: str = "log", settings: Mapping[str, object] | None = None,
                        catalog_files: CatalogFiles = ()) -> LogComparison:
    """The comparison of a log given as text (a YAML record or the log's lines)."""
    return compare_log(parse_engine_log(text, source=source), settings=settings, catalog_files=catalog_files)
