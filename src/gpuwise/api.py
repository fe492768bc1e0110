"""The public functions of gpuwise: what the CLI, the web app and Python users call.

Every function takes keyword-only options and returns plain dataclasses or pydantic records.
``catalog_files`` adds or patches catalog records from the user's own YAML files.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from gpuwise.catalog import GPU, Catalog, Comparison, compare
from gpuwise.catalog import load_catalog as _load_catalog
from gpuwise.errors import ConfigError, GpuwiseError
from gpuwise.estimate.cost import Usage
from gpuwise.estimate.estimate import Estimate
from gpuwise.estimate.estimate import estimate as _estimate
from gpuwise.estimate.fit import FitReport
from gpuwise.estimate.fit import fit as _fit
from gpuwise.estimate.load import serving_report
from gpuwise.estimate.roofline import Calibration
from gpuwise.estimate.scaling import ScaleRow, scaling
from gpuwise.estimate.serving import ServingReport
from gpuwise.estimate.tco_report import TcoReport, tco_report
from gpuwise.recommend.engine import Recommendation
from gpuwise.recommend.rank import recommend as _recommend
from gpuwise.recommend.request import Request, parse_request
from gpuwise.troubleshoot.context import RunContext, read_context
from gpuwise.troubleshoot.matcher import Match
from gpuwise.workload.architecture import Architecture
from gpuwise.workload.job import InferJob, TrainJob, make_job
from gpuwise.workload.presets import Preset, hub_index, presets
from gpuwise.workload.resolve import resolve_model

MAX_SIM_REQUESTS = 100_000  # about 10 s of simulation; percentiles are stable long before

CatalogFiles = Sequence[Path | str]


def load_catalog(*, catalog_files: CatalogFiles = ()) -> Catalog:
    """The catalog with the user's config-folder overrides and ``catalog_files`` applied."""
    return _load_catalog(catalog_files)


def find_gpu(name: str, *, catalog_files: CatalogFiles = ()) -> GPU:
    """The GPU record an id, alias or loose name designates; raises UnknownGPU / AmbiguousGPU."""
    return _load_catalog(catalog_files).gpu(name)


def list_gpus(
    *,
    vendor: str | None = None,
    segment: str | None = None,
    min_memory_gb: float | None = None,
    features: Sequence[str] = (),
    sort: str | None = None,
    descending: bool = True,
    catalog_files: CatalogFiles = (),
) -> list[GPU]:
    """GPUs matching every filter, sorted by a numeric field (see ``gpuwise.catalog.SORT_FIELDS``)."""
    return _load_catalog(catalog_files).select(
        vendor=vendor, segment=segment, min_memory_gb=min_memory_gb,
        features=features, sort=sort, descending=descending,
    )


def compare_gpus(names: Sequence[str], *, catalog_files: CatalogFiles = ()) -> Comparison:
    """Side-by-side figures of two or more GPUs with ratios to the first."""
    cat = _load_catalog(catalog_files)
    return compare([cat.gpu(n) for n in names])


def model(name: str) -> Architecture:
    """A model's normalised shape and exact parameter count: preset id, hub id, or path to a config.json."""
    return resolve_model(name)


def exact_params(name: str) -> int:
    """Parameter count from transformers on the meta device (the ``hf`` extra and torch are needed)."""
    from gpuwise.workload.exact import meta_param_count

    arch = resolve_model(name)
    if not arch.config.get("model_type"):
        raise ConfigError(f"{arch.name}: no transformers config to build; its count is the published one")
    return meta_param_count(arch.config)


def list_models() -> list[Preset]:
    """The shipped presets (usable offline), by id."""
    return [presets()[k] for k in sorted(presets())]


def _job(task: str, options: dict[str, object]) -> TrainJob | InferJob:
    if task not in ("train", "infer"):
        raise ConfigError(f"--task {task!r} is not accepted; use train or infer")
    return make_job(TrainJob if task == "train" else InferJob, **options)


def estimate(
    model_name: str,
    *,
    gpu: str,
    task: Literal["train", "infer"] = "train",
    catalog_files: CatalogFiles = (),
    calibration: Path | str | None = None,
    **job_options: object,
) -> Estimate:
    """Per-GPU memory and speed of a job; options are the CLI flags. ``calibration`` is a record written by
    ``gpuwise bench --save`` whose measured rates replace the efficiency tables for that card.

    ``gpuwise.estimate("llama-3.1-8b", gpu="rtx-4090", method="qlora", batch=2, seq=2048)``
    """
    cat = _load_catalog(catalog_files)
    card = cat.gpu(gpu)
    measured = None
    if calibration is not None:
        from gpuwise.probe.bench import load_calibration

        record = load_calibration(Path(calibration))
        if record.gpu != card.id:
            raise ConfigError(f"calibration {str(calibration)!r} was measured on {record.gpu}, not {card.id}")
        measured = Calibration(gemm_flops={k: v * 1e12 for k, v in record.gemm_tflops.items()},
                               memory_bytes_per_s=record.memory_gb_s * 1e9 if record.memory_gb_s else None)
    return _estimate(resolve_model(model_name), _job(task, job_options), card, cat, calibration=measured)


def fit(
    model_name: str,
    *,
    gpu: str,
    task: Literal["train", "infer"] = "train",
    catalog_files: CatalogFiles = (),
    **job_options: object,
) -> FitReport:
    """The estimate plus the largest batch that fits and the changes that save the most memory."""
    card = _load_catalog(catalog_files).gpu(gpu)
    return _fit(resolve_model(model_name), _job(task, job_options), card)


def scale(model_name: str, *, gpu: str, catalog_files: CatalogFiles = (), **job_options: object) -> list[ScaleRow]:
    """The training job on 1, 2, 4, 8 GPUs and nodes of 8, with scaling efficiency per GPU count."""
    cat = _load_catalog(catalog_files)
    options = {"zero": 3, **job_options}
    job = _job("train", options)
    assert isinstance(job, TrainJob)
    return scaling(resolve_model(model_name), job, cat.gpu(gpu), cat)


def serve_sim(
    model_name: str,
    *,
    gpu: str,
    qps: float,
    p99_ms: float | None = None,
    slo: Literal["e2e", "ttft"] = "e2e",
    requests: int = 400,
    seed: int = 0,
    exponential_lengths: bool = False,
    catalog_files: CatalogFiles = (),
    **job_options: object,
) -> ServingReport:
    """Continuous-batching simulation at ``qps`` (P50/P90/P99 TTFT and end-to-end latency) and the highest rate
    whose P99 meets ``p99_ms``. Deterministic for a given ``seed``."""
    if not 20 <= requests <= MAX_SIM_REQUESTS:
        raise ConfigError(f"--requests must be from 20 (for percentiles) to {MAX_SIM_REQUESTS:,}, got {requests}")
    if not (math.isfinite(qps) and qps > 0):
        raise ConfigError(f"--qps must be a finite rate > 0 requests per second, got {qps}")
    if p99_ms is not None and not (math.isfinite(p99_ms) and p99_ms > 0):
        raise ConfigError(f"--p99-ms must be a finite latency > 0, got {p99_ms}")
    cat = _load_catalog(catalog_files)
    job = _job("infer", job_options)
    assert isinstance(job, InferJob)
    return serving_report(resolve_model(model_name), job, cat.gpu(gpu), cat, qps=qps, p99_ms=p99_ms, slo_key=slo,
                          requests=requests, seed=seed, exponential_lengths=exponential_lengths)


def recommend(request: Request | dict[str, object], *, catalog_files: CatalogFiles = ()) -> Recommendation:
    """Rank every GPU x count x buy/rent way to run the request's workloads (a Request, or the same as a dict:
    ``{"workloads": [{"model": "qwen2-7b", "options": {"method": "qlora"}}], "budget_usd": 2000}``)."""
    if isinstance(request, dict):
        request = parse_request(request)
    return _recommend(request, _load_catalog(catalog_files))


def tco(gpu: str, *, count: int = 1, price_usd: float | None = None, used: bool = False,
        hours_per_day: float = 8.0, years: float = 3.0, usd_per_kwh: float = 0.16, pue: float = 1.0,
        catalog_files: CatalogFiles = ()) -> TcoReport:
    """Year-by-year cost of owning ``count`` cards against renting them from each catalog offer."""
    cat = _load_catalog(catalog_files)
    return tco_report(cat.gpu(gpu), cat, count=count, price_usd=price_usd, used=used,
                      usage=Usage(hours_per_day=hours_per_day, years=years, usd_per_kwh=usd_per_kwh, pue=pue))


@dataclass(frozen=True)
class Diagnosis:
    matches: tuple[Match, ...]
    checklist: tuple[str, ...]
    context: RunContext
    memory_advice: str | None = None


def _doctor_facts(report: object) -> dict[str, str]:
    """Worst status per check id in a `gpuwise doctor --json` document."""
    checks = report.get("checks") if isinstance(report, dict) else None
    if not isinstance(checks, list) or not all(isinstance(c, dict) for c in checks):
        raise ConfigError("the doctor report is not a `gpuwise doctor --json` document (an object whose 'checks' is "
                          "a list of {id, status, ...}); run `gpuwise doctor --json > report.json`")
    order = {"FAIL": 3, "WARN": 2, "PASS": 1, "N/A": 0}
    facts: dict[str, str] = {}
    for check in checks:
        cid, status = str(check.get("id")), str(check.get("status"))
        if order.get(status, 0) > order.get(facts.get(cid, "N/A"), 0):
            facts[cid] = status
    return facts


def _memory_advice(context: RunContext, catalog_files: CatalogFiles) -> str | None:
    if context.model is None or context.capacity_gib is None:
        return None
    cat = _load_catalog(catalog_files)
    card = min(cat.gpus.values(), key=lambda g: abs(g.memory_bytes / 2**30 - context.capacity_gib))  # type: ignore[operator]
    options: dict[str, Any] = {"method": context.method}
    if context.batch:
        options["batch"] = context.batch
    if context.seq:
        options["seq"] = context.seq
    try:
        report = fit(context.model, gpu=card.id, **options)
    except GpuwiseError:
        return None
    memory = report.estimate.memory
    line = (f"{context.model} ({context.method}, batch {context.batch or 1}, seq {context.seq or 2048}) needs about "
            f"{memory.per_gpu_bytes / 1e9:,.1f} GB per GPU; the card has {context.capacity_gib * 2**30 / 1e9:,.1f} GB "
            f"(sized like a {card.id})")
    if report.plan:
        line += f"; the smallest change that fits: {' '.join(report.plan)}"
    return line


def diagnose(text: str, *, doctor_report: dict[str, object] | None = None,
             catalog_files: CatalogFiles = ()) -> Diagnosis:
    """Known error signatures in a log, best first, with evidence; doctor facts confirm or rule out causes."""
    from gpuwise.troubleshoot.matcher import GENERIC_CHECKLIST, diagnose_text

    matches = diagnose_text(text, facts=_doctor_facts(doctor_report) if doctor_report is not None else None)
    context = read_context(text, dict(hub_index()))
    advice = None
    if any("oom" in m.entry.id or "out-of-memory" in m.entry.id for m in matches):
        advice = _memory_advice(context, catalog_files)
    return Diagnosis(tuple(matches), () if matches else GENERIC_CHECKLIST, context, advice)
