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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.catalog import GPU, Catalog, load_catalog
from gpuwise.errors import ConfigError, GpuwiseError
from gpuwise.estimate.speed.roofline import machine
from gpuwise.safe_io import atomic_write_text, check_writable
from gpuwise.workload.exports import CalibrateSettings, MeasuredRun, read_export
from gpuwise.workload.model.architecture import Architecture

CatalogFiles = tuple[Path | str, ...]
RECORD_KIND = "gpuwise-calibration"
_ENGINE_OF_TOOL = {"vllm bench serve": "vllm", "sglang bench_serving": "sglang", "llama-bench": "llamacpp"}
_GGUF_FORMATS = {"gguf-q4_k_m": 4.85, "gguf-q8_0": 8.5}  # the GGUF formats gpuwise models, bits per weight


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

    def record(self) -> dict[str, Any]:
        return {"kind": RECORD_KIND, "version": 1, "gpu": self.gpu, "model": self.model, "source": self.source,
                "job_class": f"serve-{self.engine}", "taken_at": "", "calibration": dict(self.calibration),
                "runs": [{"tool": c.run.tool, "label": c.run.label, "measured": dict(c.measured),
                          "predicted": dict(c.predicted), "error": c.errors, "note": c.note} for c in self.runs]}


def _card(catalog: Catalog, settings: CalibrateSettings, runs: list[MeasuredRun]) -> GPU:
    name = settings.gpu or next((r.gpu_name for r in runs if r.gpu_name), None)
    if not name:
        raise ConfigError("the file does not say which GPU ran it: give --gpu ID (`gpuwise catalog list`)")
    return catalog.gpu(name.split(",")[0].strip())


def _model(settings: CalibrateSettings, runs: list[MeasuredRun]) -> Architecture:
    from gpuwise.api.jobs import model

    name = settings.model or next((r.model for r in runs if r.model and r.tool != "llama-bench"), None)
    if not name:
        raise ConfigError("the file does not name the model: give --model (a preset, hub id or config.json)")
    try:
        return model(name)
    except GpuwiseError as exc:
        raise ConfigError(f"{exc} (give --model with a preset or a config.json to predict these runs)") from None


def _gguf(run: MeasuredRun, arch: Architecture) -> str:
    """The modelled GGUF format nearest the file's bits per weight (its bytes over the parameters)."""
    bits = 8 * run.weight_bytes / arch.total_params if run.weight_bytes else 4.85
    return min(_GGUF_FORMATS, key=lambda f: abs(_GGUF_FORMATS[f] - bits))


def _serving(run: MeasuredRun, arch: Architecture, card: GPU, engine: str, tp: int,
             catalog_files: CatalogFiles) -> Compared:
    from gpuwise.api.jobs import serve_sim

    if not run.input_len or not run.output_len:
        raise ConfigError(f"{run.label}: the run gives no prompt or output lengths to predict")
    load: dict[str, Any] = ({"concurrency": max(1, round(run.concurrency))} if run.concurrency else
                            {"qps": run.request_rate or 1.0})
    report = serve_sim(arch, gpu=card.id, engine=engine, tp=tp, count=tp, input_len=max(1, round(run.input_len)),
                       output_len=max(2, round(run.output_len)), batch=max(1, round(run.concurrency or 1)),
                       catalog_files=catalog_files, **load)
    seen = report.at_concurrency or report.at_rate
    assert seen is not None
    measured = {"ttft_ms": run.ttft_ms, "tpot_ms": run.tpot_ms, "request_per_s": run.request_per_s,
                "output_tokens_per_s": run.output_tokens_per_s}
    predicted = {"ttft_ms": seen.ttft_mean_ms, "tpot_ms": seen.tpot_mean_ms, "request_per_s": seen.requests_per_s,
                 "output_tokens_per_s": seen.throughput_tokens_per_s}
    note = f"{run.statistic} of the file" if run.statistic != "mean" else ""
    return Compared(run, measured, predicted, note)


def _bench(run: MeasuredRun, arch: Architecture, card: GPU, catalog_files: CatalogFiles) -> Compared:
    from gpuwise.api.jobs import estimate

    quant = _gguf(run, arch)
    if run.prompt_tokens and not run.generated_tokens:
        est = estimate(arch, gpu=card.id, task="infer", engine="llamacpp", quant=quant, batch=1,
                       input_len=run.prompt_tokens, output_len=1, catalog_files=catalog_files)
        ttft = est.perf.ttft_ms if est.perf is not None else None  # type: ignore[union-attr]
        predicted = run.prompt_tokens / (ttft / 1e3) if ttft else None
    else:
        est = estimate(arch, gpu=card.id, task="infer", engine="llamacpp", quant=quant, batch=1, input_len=1,
                       output_len=run.generated_tokens or 128, catalog_files=catalog_files)
        tpot = est.perf.tpot_ms if est.perf is not None else None  # type: ignore[union-attr]
        predicted = 1e3 / tpot if tpot else None
    return Compared(run, {"tokens_per_s": run.tokens_per_s}, {"tokens_per_s": predicted},
                    f"as {quant} (the file's {8 * (run.weight_bytes or 0) / arch.total_params:.2f} bits per weight)")


def request_overhead_ms(run: MeasuredRun) -> float | None:
    """What a request took beyond its first token and its decode steps: e2e - TTFT - (output - 1) x TPOT (tokenising,
    HTTP and streaming, scheduling), where the tool reports all three as means (medians do not add up)."""
    if run.e2e_ms is None or run.ttft_ms is None or run.tpot_ms is None or not run.output_len:
        return None
    return run.e2e_ms - run.ttft_ms - (run.output_len - 1) * run.tpot_ms


def _ratio(compared: Compared, key: str, faster_is_larger: bool) -> float | None:
    seen, guess = compared.measured.get(key), compared.predicted.get(key)
    if not seen or not guess:
        return None
    return seen / guess if faster_is_larger else guess / seen


def attribute(runs: tuple[Compared, ...], card: GPU) -> dict[str, Any]:
    """The prefill's matmul rate and the decode step's memory rate, each the modelled one times predicted /
    measured, from the least-loaded serving run (or llama-bench's pp and tg tests)."""
    m = machine(card, "bf16" if card.bf16_dense_tflops else "fp32")
    serving = [c for c in runs if c.run.tool != "llama-bench"]
    if serving:
        quiet = min(serving, key=lambda c: (c.run.concurrency or c.run.request_rate or 1e9))
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
    quietest = min(serving, key=lambda c: (c.run.concurrency or c.run.request_rate or 1e9)) if serving else None
    overhead = request_overhead_ms(quietest.run) if quietest and quietest.run.statistic == "mean" else None
    if overhead is not None:  # reported, not applied: the simulator's turnaround is its own rule (simulate.py)
        out["request_overhead_ms"] = overhead
    if prefill:
        out["gemm_tflops"] = {m.dtype: m.peak_flops * m.gemm_efficiency * m.shape_fraction * prefill / 1e12}
    if decode:
        out["memory_gb_s"] = m.memory_bytes_per_s * decode / 1e9
    return out


def calibrate(path: Path | str, *, settings: Mapping[str, object] | None = None, save: Path | str | None = None,
              catalog_files: CatalogFiles = ()) -> Calibrated:
    """Read a benchmark export, predict each run, attribute the difference; ``save`` writes the record."""
    from gpuwise.flags import build

    chosen = build(CalibrateSettings, dict(settings or {}))
    target = Path(save) if save is not None else None
    if target is not None:
        check_writable(target, what="calibration record")
    runs = read_export(Path(path))
    catalog = load_catalog(catalog_files=catalog_files)
    card, arch = _card(catalog, chosen, runs), _model(chosen, runs)
    engine = chosen.engine or _ENGINE_OF_TOOL.get(runs[0].tool, "vllm")
    compared = tuple(_bench(r, arch, card, catalog_files) if r.tool == "llama-bench" else
                     _serving(r, arch, card, engine, chosen.tp, catalog_files) for r in runs[:50])
    done = Calibrated(Path(path).name, card.id, arch.name, engine, compared, attribute(compared, card))
    if target is not None:
        atomic_write_text(target, json.dumps(done.record(), indent=2) + "\n", what="calibration record")
    return done
