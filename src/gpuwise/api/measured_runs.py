"""``gpuwise calibrate --from FILE``: the measurements users already have, each beside gpuwise's prediction for the
same settings, the difference attributed to the prefill's rate and the decode step's, and a calibration record.

A serving run is predicted by serve-sim at the run's own load: its clients in flight (``--max-concurrency``, or
every prompt at once when the rate was unbounded) or its Poisson rate, with the run's mean prompt and output lengths.
A llama-bench test is a prompt of ``n_prompt`` tokens (pp) or ``n_gen`` generated tokens from an empty context (tg)
at batch 1. The record takes the least-loaded serving run (the least queueing in its figures): its TTFT against the
prediction recalibrates the prefill's matmul rate, its time per output token the decode's memory rate; llama-bench's
pp and tg tests do the same. `estimate`, `fit`, `serve-sim` and `recommend` read it with ``--calibration``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from gpuwise.api.calibration_records import CALIBRATE_KIND
from gpuwise.catalog import GPU, Catalog, load_catalog
from gpuwise.catalog.device_names import match_device, split_devices
from gpuwise.errors import ConfigError, GpuwiseError
from gpuwise.estimate.roofline import machine
from gpuwise.safe_io import atomic_write_text, check_writable
from gpuwise.workload.exports import CalibrateSettings, MeasuredRun, read_export, text
from gpuwise.workload.model.architecture import Architecture, from_config
from gpuwise.workload.run_limits import Breach, Setting, explain, floors, rate_breaches

CatalogFiles = tuple[Path | str, ...]
RECORD_KIND = CALIBRATE_KIND
_GGUF_FORMATS = {"gguf-q4_k_m": 4.85, "gguf-q8_0": 8.5}  # the GGUF formats gpuwise models, bits per weight
_SHAPE_DONORS = ("llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "qwen2.5-14b", "qwen2.5-32b", "llama-3.1-70b",
                 "llama-3.1-405b")  # dense GQA decoders whose layer shape a parameter count borrows
# llama.cpp's names (src/llama-arch.cpp) of mixture-of-experts architectures that carry no "moe" in them
_MOE_ARCHS = frozenset({"deepseek2", "llama4", "gpt-oss", "grok", "dbrx", "arctic", "minimax-m2"})


@dataclass(frozen=True)
class Compared:
    run: MeasuredRun
    measured: Mapping[str, float | None]
    predicted: Mapping[str, float | None]
    note: str = ""

    @property
    def errors(self) -> dict[str, float | None]:
        """(predicted - measured) / measured per key."""
        return {k: (self.predicted.get(k) - v) / v if v and self.predicted.get(k) is not None else None  # type: ignore[operator]
                for k, v in self.measured.items()}


@dataclass(frozen=True)
class Calibrated:
    source: str
    gpu: str
    model: str
    engine: str
    runs: tuple[Compared, ...]
    calibration: Mapping[str, Any]
    notes: tuple[str, ...] = ()  # how the file's names were read (the GPU, a model taken from its parameter count)
    breaches: tuple[Breach, ...] = ()  # figures beyond the cards: the calibration is then not applied

    @property
    def applicable(self) -> bool:
        return not self.calibration.get("not_applied")

    def record(self) -> dict[str, Any]:
        return {"kind": RECORD_KIND, "version": 1, "gpu": self.gpu, "model": self.model, "source": self.source,
                "job_class": f"serve-{self.engine}", "taken_at": "", "calibration": dict(self.calibration),
                "notes": list(self.notes), "checks": [b.record() for b in self.breaches],
                "runs": [{"tool": c.run.tool, "label": c.run.label, "measured": dict(c.measured),
                          "predicted": dict(c.predicted), "error": c.errors, "note": c.note,
                          "beyond_the_cards": any(b.run == c.run.label for b in self.breaches)} for c in self.runs]}


def _card(catalog: Catalog, settings: CalibrateSettings, runs: list[MeasuredRun]) -> tuple[GPU, int, str, str]:
    """(card, devices the file lists, a note on how its name was read, who named it)."""
    printed = next((r.gpu_name for r in runs if r.gpu_name), None)
    lists = runs[0].bench.lists_devices.value  # the name lists every device, or names the card alone (TP apart)
    devices = len(split_devices(printed)) if printed and lists else 1
    if settings.gpu:
        return catalog.gpu(settings.gpu), max(1, devices), "", "--gpu"
    if not printed:
        raise ConfigError("the file does not say which GPU ran it: give --gpu ID (`gpuwise catalog list`)")
    found = match_device(printed, catalog)
    read = f"the file's GPU {printed[:120]!r} read as {found.count} x {found.gpu}" + (
        f" ({found.note})" if found.note else "")
    return catalog.gpus[found.gpu], found.count if lists else 1, read, "the file"


def _dense(run: MeasuredRun) -> tuple[Architecture, str]:
    """A dense decoder of the llama-bench file's own parameter count: the layer shape of the nearest of
    _SHAPE_DONORS, its layer count scaled so the total matches; said so in the note."""
    from gpuwise.workload.model.presets import presets
    from gpuwise.workload.model.resolve import architecture_of_preset

    assert run.params is not None
    donors = {k: architecture_of_preset(presets()[k]) for k in _SHAPE_DONORS}
    donor = min(donors, key=lambda k: abs(math.log(donors[k].total_params / run.params)))  # type: ignore[operator]
    shape = donors[donor]
    per_layer = (shape.total_params - shape.params.embedding - shape.params.head) / shape.layers
    layers = max(1, round((run.params - shape.params.embedding - shape.params.head) / per_layer))
    config = {**shape.config, "num_hidden_layers": layers}
    arch = from_config(config, name=f"dense {run.params / 1e9:.2f}B", source="llama-bench model_n_params")
    moe = run.architecture and ("moe" in run.architecture or run.architecture in _MOE_ARCHS)
    return arch, (f"no --model: a dense model of the file's {run.params / 1e9:.2f} B parameters and "
                  f"{(run.weight_bytes or 0) / 1e9:.2f} GB, with {donor}'s layer shape ({layers} layers)"
                  + (f"; the file's architecture '{run.architecture}' is a mixture of experts, which dense "
                     "overstates: give --model" if moe else ""))


def _model_file(given: str, runs: list[MeasuredRun]) -> str | None:
    """The GGUF a llama-bench record loaded (its model_filename), found in the folder ``--model`` names; None when
    ``given`` is not a folder holding it (then ``--model`` is read as any model name)."""
    folder = Path(given).expanduser()
    if not folder.is_dir():
        return None
    for run in runs:
        if run.model_file:
            candidate = folder / PurePath(run.model_file.replace("\\", "/")).name
            if candidate.is_file():
                return str(candidate)
    return None


def _model(settings: CalibrateSettings, runs: list[MeasuredRun]) -> tuple[Architecture, str]:
    from gpuwise.api.jobs import model

    gguf = _model_file(settings.model, runs) if settings.model else None
    if gguf is not None:
        arch = model(gguf)
        held = arch.checkpoint.exact_bytes if arch.checkpoint is not None else None
        listed = next((r.weight_bytes for r in runs if r.weight_bytes), None)
        differs = (f"; its tensors hold {held:,.0f} bytes where the record says {listed:,.0f}: another file of "
                   "that name?") if held and listed and abs(held - listed) > 0.01 * listed else ""
        return arch, f"--model {gguf}: the record's model file, its architecture from the GGUF header{differs}"
    counted = next((r for r in runs if not r.bench.names_model.value and r.params), None)
    if not settings.model and counted is not None:
        return _dense(counted)
    name = settings.model or next((r.model for r in runs if r.model and r.bench.names_model.value), None)
    if not name:
        raise ConfigError("the file does not name the model: give --model (a preset, hub id or config.json)")
    try:
        return model(name), ""
    except GpuwiseError as exc:
        raise ConfigError(f"{exc} (give --model with a preset or a config.json to predict these runs)") from None


def _gguf(run: MeasuredRun, arch: Architecture) -> str:
    """The modelled GGUF format nearest the file's bits per weight (its bytes over the parameters)."""
    bits = 8 * run.weight_bytes / (run.params or arch.total_params) if run.weight_bytes else 4.85
    return min(_GGUF_FORMATS, key=lambda f: abs(_GGUF_FORMATS[f] - bits))


def _serving(run: MeasuredRun, arch: Architecture, card: GPU, engine: str, tp: int,
             catalog_files: CatalogFiles) -> Compared:
    from gpuwise.api.jobs import serve_sim

    if not run.input_len or not run.output_len:
        raise ConfigError(f"{run.label}: the run gives no prompt or output lengths to predict")
    load: dict[str, Any] = ({"concurrency": max(1, round(run.concurrency))} if run.concurrency else
                            {"qps": run.request_rate or 1.0})
    try:
        report = serve_sim(arch, gpu=card.id, engine=engine, tp=tp, count=tp, input_len=max(1, round(run.input_len)),
                           output_len=max(2, round(run.output_len)), batch=max(1, round(run.concurrency or 1)),
                           catalog_files=catalog_files, **load)
    except GpuwiseError as exc:
        raise ConfigError(f"{str(exc).rstrip('.')}; give --tp N with the GPUs one replica of the server had, "
                          "--gpu with its card, --model with what it served") from None
    seen = report.at_concurrency or report.at_rate
    assert seen is not None
    measured = {"ttft_ms": run.ttft_ms, "tpot_ms": run.tpot_ms, "request_per_s": run.request_per_s,
                "output_tokens_per_s": run.output_tokens_per_s}
    predicted = {"ttft_ms": seen.ttft_mean_ms, "tpot_ms": seen.tpot_mean_ms, "request_per_s": seen.requests_per_s,
                 "output_tokens_per_s": seen.throughput_tokens_per_s}
    note = f"{run.statistic} of the file" if run.statistic != "mean" else ""
    return Compared(run, measured, predicted, note)


def _bench(run: MeasuredRun, arch: Architecture, card: GPU, devices: int, catalog_files: CatalogFiles) -> Compared:
    from gpuwise.api.jobs import estimate

    quant = _gguf(run, arch)
    job: dict[str, Any] = {"engine": run.bench.engine.value, "quant": quant, "batch": 1, "count": devices,
                           "weights_bytes": run.weight_bytes, "catalog_files": catalog_files}
    if run.prompt_tokens and not run.generated_tokens:
        est = estimate(arch, gpu=card.id, task="infer", input_len=run.prompt_tokens, output_len=1, **job)
        ttft = est.perf.ttft_ms if est.perf is not None else None  # type: ignore[union-attr]
        predicted = run.prompt_tokens / (ttft / 1e3) if ttft else None
    else:
        est = estimate(arch, gpu=card.id, task="infer", input_len=1, output_len=run.generated_tokens or 128, **job)
        tpot = est.perf.tpot_ms if est.perf is not None else None  # type: ignore[union-attr]
        predicted = 1e3 / tpot if tpot else None
    bits = 8 * (run.weight_bytes or 0) / (run.params or arch.total_params)
    return Compared(run, {"tokens_per_s": run.tokens_per_s}, {"tokens_per_s": predicted},
                    f"as {quant} (the file's {bits:.2f} bits per weight)")


def request_overhead_ms(run: MeasuredRun) -> float | None:
    """What a request took beyond its first token and its decode steps: e2e - TTFT - (output - 1) x TPOT (tokenising,
    HTTP and streaming, scheduling), where the tool reports all three as means (medians do not add up)."""
    if run.e2e_ms is None or run.ttft_ms is None or run.tpot_ms is None or not run.output_len:
        return None
    return run.e2e_ms - run.ttft_ms - (run.output_len - 1) * run.tpot_ms


def _ratio(compared: Compared, key: str, faster_is_larger: bool) -> float | None:
    seen, guess = compared.measured.get(key), compared.predicted.get(key)
    if not seen or not guess or seen <= 0 or guess <= 0:
        return None
    return seen / guess if faster_is_larger else guess / seen


def _quietest(runs: tuple[Compared, ...]) -> Compared | None:
    serving = [c for c in runs if not c.run.bench.single_stream.value]
    return min(serving, key=lambda c: (c.run.concurrency or c.run.request_rate or 1e9)) if serving else None


def attribute(runs: tuple[Compared, ...], card: GPU) -> dict[str, Any]:
    """The prefill's matmul rate and the decode step's memory rate, each the modelled one times predicted /
    measured, from the least-loaded serving run (or llama-bench's pp and tg tests)."""
    m = machine(card, "bf16" if card.bf16_dense_tflops else "fp32")
    quiet = _quietest(runs)
    if quiet is not None:
        prefill, decode = _ratio(quiet, "ttft_ms", False), _ratio(quiet, "tpot_ms", False)
        basis = quiet.run.label
    else:
        pp = next((c for c in runs if c.run.prompt_tokens and not c.run.generated_tokens), None)
        tg = next((c for c in runs if c.run.generated_tokens), None)
        prefill = _ratio(pp, "tokens_per_s", True) if pp else None
        decode = _ratio(tg, "tokens_per_s", True) if tg else None
        basis = "llama-bench pp and tg"
    out: dict[str, Any] = {"bound": "prefill+decode", "predicted_over_measured": decode or prefill or 1.0,
                           "basis": basis}
    overhead = request_overhead_ms(quiet.run) if quiet and quiet.run.statistic == "mean" else None
    if overhead is not None:  # reported, not applied: the simulator's turnaround is its own rule (simulate.py)
        out["request_overhead_ms"] = overhead
    if prefill:
        out["gemm_tflops"] = {m.dtype: m.peak_flops * m.gemm_efficiency * m.shape_fraction * prefill / 1e12}
    if decode:
        out["memory_gb_s"] = m.memory_bytes_per_s * decode / 1e9
    return out


def _checked(mechanism: dict[str, Any], runs: tuple[Compared, ...], arch: Architecture,
             setting: Setting) -> tuple[dict[str, Any], tuple[Breach, ...]]:
    """The mechanism marked ``not_applied`` (with the likely wrong assumption) when a run's figure is beyond its
    floor on the cards or a rate is outside [1%, 100%] of the card's datasheet peak."""
    measured = [c.run for c in runs]
    total = float(measured[0].params or arch.total_params) if setting.dense_from_file else float(arch.total_params)
    active = total if setting.dense_from_file else float(arch.active_params)
    found = floors(measured, active_params=active, total_params=total, setting=setting)
    found += rate_breaches(mechanism, setting.card, str(mechanism.get("basis", "")))
    if found:
        mechanism = {**mechanism, "not_applied": explain(found, measured, setting)}
    return mechanism, tuple(found)


def calibrate(path: Path | str, *, settings: Mapping[str, object] | None = None, save: Path | str | None = None,
              catalog_files: CatalogFiles = ()) -> Calibrated:
    """Read a benchmark export, predict each run, attribute the difference and check it against the cards'
    datasheet; ``save`` writes the record (marked ``not_applied`` when the check fails)."""
    from gpuwise.flags import build

    chosen = build(CalibrateSettings, dict(settings or {}))
    target = Path(save) if save is not None else None
    if target is not None:
        check_writable(target, what="calibration record")
    runs = read_export(Path(path))
    catalog = load_catalog(catalog_files=catalog_files)
    card, devices, card_note, named = _card(catalog, chosen, runs)
    arch, model_note = _model(chosen, runs)
    engine = chosen.engine or runs[0].bench.engine.value
    tp = chosen.tp or next((r.tp for r in runs if r.tp), None) or 1
    compared = tuple(_bench(r, arch, card, devices, catalog_files) if r.bench.single_stream.value else
                     _serving(r, arch, card, engine, tp, catalog_files) for r in runs[:50])
    setting = Setting(card, devices if runs[0].bench.single_stream.value else tp, engine, named,
                      dense_from_file=bool(model_note))
    mechanism, breaches = _checked(attribute(compared, card), compared, arch, setting)
    done = Calibrated(text(Path(path).name) or "export", card.id, arch.name, engine, compared, mechanism,
                      tuple(n for n in (card_note, model_note) if n), breaches)
    if target is not None:
        atomic_write_text(target, json.dumps(done.record(), indent=2) + "\n", what="calibration record")
    return done
