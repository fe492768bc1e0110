"""Models and jobs through the public API: estimate, fit, scale, serve-sim, recommend, tco.

A model is a preset id, a hub id, a config.json path, or an :class:`Architecture` (``model_from_config`` builds one
from a mapping, e.g. an uploaded config.json). A job is a typed :class:`TrainJob`/:class:`InferJob` (``job=``), or
its flags as keyword options, validated into one by the same model the CLI uses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuwise import runtimes
from gpuwise.api.calibration_records import calibration_for, cards_named
from gpuwise.api.catalog import CatalogFiles, load_catalog
from gpuwise.errors import ConfigError
from gpuwise.estimate.calibration import Calibration
from gpuwise.estimate.cost.report import Purchase, TcoReport, tco_report
from gpuwise.estimate.cost.tco import Usage
from gpuwise.estimate.estimate import Estimate
from gpuwise.estimate.estimate import estimate as _estimate
from gpuwise.estimate.fit import FitReport
from gpuwise.estimate.fit import fit as _fit
from gpuwise.estimate.plan import InferPlan, TrainPlan
from gpuwise.estimate.plan import resolve as _resolve
from gpuwise.estimate.scaling import ScaleRow, scaling
from gpuwise.estimate.serving.energy import serving_energy, split_energy
from gpuwise.estimate.serving.layer_split import LayerSplit
from gpuwise.estimate.serving.layer_split import layer_split as _layer_split
from gpuwise.estimate.serving.load import serving_report
from gpuwise.estimate.serving.simulate import ServingReport
from gpuwise.flags import build
from gpuwise.recommend.engine import Recommendation
from gpuwise.recommend.rank import recommend as _recommend
from gpuwise.recommend.request import Request, parse_request
from gpuwise.safe_io import check_size
from gpuwise.workload.jobs.job import InferJob, Job, TrainJob
from gpuwise.workload.jobs.load_test import LoadTest
from gpuwise.workload.jobs.parse import make_job
from gpuwise.workload.model.architecture import Architecture, from_config
from gpuwise.workload.model.presets import Preset, presets
from gpuwise.workload.model.resolve import resolve_model

ModelRef = str | Architecture
FIT_EMIT = runtimes.DEFAULT_FRAMEWORK
"""``fit --emit`` takes the default framework's name and prints its settings (transformers' Trainer, PEFT,
bitsandbytes: report/hf_settings.py)."""


def model(name: ModelRef) -> Architecture:
    """A model's normalised shape and exact parameter count: preset id, hub id, path to a config.json."""
    return name if isinstance(name, Architecture) else resolve_model(name)


def model_from_config(config: Mapping[str, Any], *, name: str = "uploaded config.json") -> Architecture:
    """The architecture of a config.json mapping (validated: types, ranges, size, nesting)."""
    check_size(config, origin=name)
    return from_config(config, name=name[:200])


def exact_params(name: ModelRef) -> int:
    """Parameter count from transformers on the meta device (the ``hf`` extra and torch are needed)."""
    from gpuwise.workload.exact import meta_param_count

    arch = model(name)
    if not arch.config.get("model_type"):
        raise ConfigError(f"{arch.name}: no transformers config to build; its count is the published one")
    return meta_param_count(arch.config)


def trace(name: ModelRef, job: Job | TrainPlan | InferPlan) -> Any:
    """The model's own transformers code on fake tensors (workload/trace/steps.py): one steady-state training step, or a
    prefill and a decode step; peak allocated bytes by kind, FLOPs and kernels. ``job``: an estimate's plan (its job
    as resolved, and the sharding it decided), or a bare job. Needs the ``hf`` extra and torch (PEFT for adapters);
    no GPU."""
    from gpuwise.estimate.plan import with_framework
    from gpuwise.workload.trace.by_layers import trace_by_layers
    from gpuwise.workload.trace.steps import trace_inference, trace_training

    plan = job if isinstance(job, (TrainPlan, InferPlan)) else None
    typed: Job = job.job if isinstance(job, (TrainPlan, InferPlan)) else job
    if isinstance(typed, TrainJob) and plan is None:
        typed = with_framework(typed)  # a bare job: its framework's recipe, as its plan would fill it
    arch = model(name)
    if not arch.config.get("model_type") or arch.kind not in ("decoder", "encoder"):
        raise ConfigError(f"--trace supports decoder and encoder language models; {arch.name} is neither")
    if isinstance(typed, InferJob):
        if arch.kind != "decoder":
            raise ConfigError(f"--trace of inference generates text: {arch.name} is an encoder")
        return trace_by_layers(arch.config, lambda config: trace_inference(config, typed))
    if typed.data_parallel > 1:
        return _trace_sharded(arch.config, typed, plan.sharding if isinstance(plan, TrainPlan) else None)
    return trace_by_layers(arch.config, lambda config: trace_training(config, typed))


def _trace_sharded(config: Any, job: TrainJob, sharding: Any) -> Any:
    """One rank of a data-parallel step under torch's fake process group (workload/trace/sharded.py), sharded as the
    plan decided (a bare job: as its plan would)."""
    from gpuwise.estimate.plan import data_parallel_layout
    from gpuwise.workload.trace.by_layers import trace_by_layers
    from gpuwise.workload.trace.sharded import RUNTIME, trace_sharded_training

    sharding = sharding if sharding is not None else data_parallel_layout(job)
    if sharding.profile is not RUNTIME:
        raise ConfigError(f"--trace of a data-parallel step runs {RUNTIME.name}, --sharding {RUNTIME.id}; "
                          f"{sharding.name} needs its own runtime on a GPU: leave out --trace or use --sharding "
                          f"{RUNTIME.id}")
    return trace_by_layers(config, lambda cut: trace_sharded_training(cut, job, ranks=sharding.ranks,
                                                                        stage=sharding.stage))


def trace_time(traced: Any, result: Estimate) -> Any:
    """A trace's step timed kernel by kernel on the estimate's card (estimate/speed/traced.py): the roofline of each
    operator the model's own code dispatched, and an eager runtime's host cost per dispatch, at the rates of the
    estimate's calibration."""
    from gpuwise.estimate.speed.traced import traced_time

    if not traced.ops:  # a sharded step's trace records memory only
        return None
    return traced_time(traced.ops, result.plan)  # the plan carries the estimate's calibration


def list_models() -> list[Preset]:
    """The shipped presets (usable offline), by id."""
    return [presets()[k] for k in sorted(presets())]


def job(task: str = "train", /, **options: Any) -> TrainJob | InferJob:
    """The typed job of ``task`` from its flags: ``gpuwise.api.job("infer", quant="fp8", batch=32)``."""
    return make_job(task, **options)


def _job(task: str, given: Job | None, options: Mapping[str, Any]) -> Job:
    if given is None:
        return make_job(task, **options)
    if options:
        raise ConfigError(f"give job= or the job's options ({', '.join(sorted(options))}), not both")
    return given


def estimate(model_name: ModelRef, *, gpu: str, task: str = "train", job: Job | None = None,
             calibration: Path | str | None = None, weights: str | None = None, catalog_files: CatalogFiles = (),
             usage: Usage | Mapping[str, object] | None = None, **options: object) -> Estimate:
    """Per-GPU memory, speed and cost of a job; ``calibration`` is a record written by ``gpuwise bench --save``
    whose measured rates replace the efficiency tables for that card; ``weights`` a .safetensors or .gguf file or
    URL whose header gives the exact weight bytes (inference); ``usage`` the electricity price and PUE the energy
    per output token is charged at (``{"usd_per_kwh": 0.1, "pue": 1.3}``; default Usage()'s).

    ``gpuwise.estimate("llama-3.1-8b", gpu="rtx-4090", method="qlora", batch=2, seq=2048)``
    """
    cat = load_catalog(catalog_files=catalog_files)
    card = cat.gpu(gpu)
    measured = calibration_for(calibration, card, cat) if calibration is not None else None
    typed = with_weights_file(_job(task, job, options), weights)
    if usage and not isinstance(typed, InferJob):  # priced energy is per output token: training makes none
        raise ConfigError("--usd-per-kwh and --pue price an inference job's energy per output token; use them with "
                          "--task infer (`gpuwise tco` takes them for the cost of owning cards)")
    return _estimate(model(model_name), typed, card, cat, calibration=measured, usage=_usage(usage))


def _usage(usage: Usage | Mapping[str, object] | None) -> Usage:
    return usage if isinstance(usage, Usage) else build(Usage, dict(usage or {}))


def weights_bytes(weights: str) -> float:
    """A .safetensors or .gguf file's or URL's exact weight bytes, from its header (workload/weights_file.py)."""
    from gpuwise.workload.weights_file import read_weights

    return float(read_weights(weights).total_bytes)


def with_weights_file(job: Job, weights: str | None) -> Job:
    """The job with its checkpoint's exact weight bytes read from ``weights`` (a file or URL's header)."""
    if weights is None:
        return job
    if not isinstance(job, InferJob):
        raise ConfigError("--weights gives an inference checkpoint's exact bytes: use it with --task infer")
    updated: Job = job.updated(weights_bytes=weights_bytes(weights))  # validated: a positive, bounded byte count
    return updated


def plan(model_name: ModelRef, *, gpu: str, task: str = "train", job: Job | None = None,
         catalog_files: CatalogFiles = (), **options: object) -> TrainPlan | InferPlan:
    """The job resolved once on the card, as every estimator reads it: layout, formats, micro-batches, the
    runtime's limits there, and each default it chose with where it came from (``plan.choices``).

    ``gpuwise.plan("llama-3.1-8b", gpu="h100-sxm-80gb", task="infer", engine="sglang").max_batched_tokens``
    """
    return _resolve(model(model_name), _job(task, job, options), load_catalog(catalog_files=catalog_files).gpu(gpu))


def splits_by_layers(job: Job) -> bool:
    """Whether ``job`` is one inference copy split by layers over its --count cards: at TP 1 on an engine whose
    multi-GPU default is a layer split (its profile's ``splits_layers``: llama.cpp's --split-mode layer, exllamav2's
    gpu_split), not --count independent copies."""
    if not isinstance(job, InferJob) or job.count <= 1 or job.tp != 1:
        return False
    return runtimes.engine(job.engine).splits_layers is not None


def layer_split(model_name: ModelRef, *, gpus: Sequence[str], job: InferJob | None = None,
                catalog_files: CatalogFiles = (), usage: Usage | Mapping[str, object] | None = None,
                **options: object) -> LayerSplit:
    """One copy of an inference job split by layers over 2-4 cards, equal or not (llama.cpp's default): the layers,
    memory and capacity of each card and one user's speed.

    ``gpuwise.layer_split("llama-3.1-70b", gpus=["rtx-3090", "rtx-3060-12gb"], engine="llamacpp",
    quant="gguf-q4_k_m")``
    """
    cat = load_catalog(catalog_files=catalog_files)
    shaped = _job("infer", job, options)
    assert isinstance(shaped, InferJob)
    arch = model(model_name)
    cards = [cat.gpu(g) for g in gpus]
    split = _layer_split(arch, shaped, cards, cat)  # each card's estimate resolves the job
    return split_energy(split, cards, shaped.output_len, _usage(usage))


def fit(model_name: ModelRef, *, gpu: str, task: str = "train", job: Job | None = None, weights: str | None = None,
        catalog_files: CatalogFiles = (), **options: object) -> FitReport:
    """The estimate plus the largest batch that fits and the changes that save the most memory; ``weights`` as for
    ``estimate``."""
    card = load_catalog(catalog_files=catalog_files).gpu(gpu)
    return _fit(model(model_name), with_weights_file(_job(task, job, options), weights), card)


def scale(model_name: ModelRef, *, gpu: str, job: TrainJob | None = None, catalog_files: CatalogFiles = (),
          **options: object) -> list[ScaleRow]:
    """The training job on 1, 2, 4, 8 GPUs and nodes of 8, with scaling efficiency per GPU count."""
    cat = load_catalog(catalog_files=catalog_files)
    shaped = _job("train", job, options)
    assert isinstance(shaped, TrainJob)
    return scaling(model(model_name), shaped, cat.gpu(gpu), cat)


def serve_sim(model_name: ModelRef, *, gpu: str, job: InferJob | None = None, calibration: Path | str | None = None,
              catalog_files: CatalogFiles = (), usage: Usage | Mapping[str, object] | None = None,
              **options: object) -> ServingReport:
    """Continuous-batching simulation of one replica under Poisson load: P50/P90/P99 TTFT and end-to-end latency at
    ``qps``, the highest rate whose P99 meets ``p99_ms``, and the closed-form capacity the recommender plans with.
    ``options`` are the inference job's flags and the load test's (qps, p99_ms, slo, requests, seed, length_dist).
    Deterministic for a given ``seed``. Each load point carries its energy per output token at ``usage``'s
    electricity price and PUE (as for ``estimate``)."""
    load = build(LoadTest, {k: v for k, v in options.items() if k in LoadTest.model_fields})
    job_options = {k: v for k, v in options.items() if k not in LoadTest.model_fields}
    cat = load_catalog(catalog_files=catalog_files)
    card = cat.gpu(gpu)
    shaped = _job("infer", job, job_options)
    assert isinstance(shaped, InferJob)
    measured = calibration_for(calibration, card, cat) if calibration is not None else None
    report = serving_report(model(model_name), shaped, card, cat, load, calibration=measured)
    return serving_energy(report, card, shaped.count, _usage(usage))


def recommend(request: Request | Mapping[str, object], *, calibration: Sequence[Path | str] = (),
              catalog_files: CatalogFiles = ()) -> Recommendation:
    """Rank every GPU x count x buy/rent way to run the request's workloads (a Request, or the same as a mapping:
    ``{"workloads": [{"model": "qwen2-7b", "options": {"method": "qlora"}}], "budget_usd": 2000}``).
    ``calibration``: `bench --save` records; each replaces the efficiency tables for the card it measured."""
    parsed = parse_request(request)
    cat = load_catalog(catalog_files=catalog_files)
    measured: dict[str, Calibration] = {}
    for path in calibration:
        from gpuwise.probe.bench import load_calibration

        record = load_calibration(Path(path))
        cards = cards_named(record.gpu, cat)
        if not cards:
            raise ConfigError(f"calibration {str(path)!r} was measured on {record.gpu[:60]!r}, which is not in the "
                              "catalog; add the card with --catalog")
        for card_id in cards:
            measured[card_id] = calibration_for(path, cat.gpus[card_id], cat)
    return _recommend(parsed, cat, measured)


def tco(gpu: str, *, catalog_files: CatalogFiles = (), **options: object) -> TcoReport:
    """Year-by-year cost of owning cards against renting them from each catalog offer. ``options``: the purchase
    (count, price_usd, used) and the usage (hours_per_day, years, usd_per_kwh, pue)."""
    purchase = build(Purchase, {k: v for k, v in options.items() if k not in Usage.model_fields})
    usage = build(Usage, {k: v for k, v in options.items() if k in Usage.model_fields})
    cat = load_catalog(catalog_files=catalog_files)
    return tco_report(cat.gpu(gpu), cat, purchase, usage)
