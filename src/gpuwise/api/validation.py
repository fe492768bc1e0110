"""``gpuwise validate``: run the job for real on the user's device and set gpuwise's own estimate beside it.

The model is built from its config.json with random weights on the device (workload/trace/run.py); its peak memory
and synchronised step times are measured; the estimate is made for the same job on the device's catalog card (on the
CPU, on a "host-cpu" card whose matmul and memory rates are measured first). ``save`` writes a record that
``estimate --calibration`` reads: the mechanism the estimate was bound by, recalibrated from the measurement (the
host's seconds per dispatched operator, or the achieved matmul or memory rate), never a flat factor.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise import runtimes
from gpuwise.api.calibration_records import HOST_CPU, VALIDATE_KIND, calibration_for
from gpuwise.catalog import GPU, Catalog, load_catalog
from gpuwise.errors import ConfigError
from gpuwise.estimate import constants as C
from gpuwise.estimate.calibration import Calibration
from gpuwise.estimate.estimate import Estimate, estimate
from gpuwise.estimate.image.pipeline import ImageEstimate
from gpuwise.estimate.plan import InferPlan
from gpuwise.estimate.roofline import machine
from gpuwise.estimate.speed.inference import InferPerf
from gpuwise.estimate.speed.training import TrainPerf
from gpuwise.safe_io import atomic_write_text, check_writable
from gpuwise.workload.diffusion.pipeline import Pipeline, find_pipeline
from gpuwise.workload.jobs.image import ImageJob, make_image_job
from gpuwise.workload.jobs.job import InferJob, Job, TrainJob
from gpuwise.workload.jobs.parse import make_job
from gpuwise.workload.model.architecture import Architecture
from gpuwise.workload.trace.run import Measured, RunSettings, run_inference, run_training

CatalogFiles = tuple[Path | str, ...]
RECORD_KIND = VALIDATE_KIND
INFER_ENGINE = runtimes.VALIDATE_ENGINE.id  # the --engine of an inference run: transformers' generate
MEMORY_MARGIN = 0.10  # refused before allocating when the estimate leaves less than this share of the device free
GIB = 2**30


@dataclass(frozen=True)
class Validation:
    """One validate run: what the device measured beside what gpuwise predicted, key by key."""

    model: str
    job: Job | ImageJob
    device: str
    device_name: str
    card: str  # the catalog id the prediction was made on (host-cpu on the CPU)
    measured: Mapping[str, float | None]
    predicted: Mapping[str, float | None]
    run: Measured
    estimate: Estimate | ImageEstimate
    calibration: Mapping[str, Any]  # what `estimate --calibration` takes from this run
    host: str = ""
    taken_at: str = ""

    @property
    def errors(self) -> dict[str, float | None]:
        """(predicted - measured) / measured per key: negative is an estimate too low (too fast, too small)."""
        out: dict[str, float | None] = {}
        for key, seen in self.measured.items():
            guess = self.predicted.get(key)
            out[key] = (guess - seen) / seen if guess is not None and seen else None
        return out

    def record(self) -> dict[str, Any]:
        return {"kind": RECORD_KIND, "version": 1, "gpu": self.card, "device": self.device,
                "device_name": self.device_name, "runtime": dict(self.run.versions), "model": self.model,
                "job_class": job_class(self.job), "job": self.job.model_dump(mode="json"),
                "method": self.run.method, "measured": dict(self.measured), "predicted": dict(self.predicted),
                "error": self.errors, "terms": terms(self.estimate, self.run), "calibration": dict(self.calibration),
                "steps_timed": self.run.steps_timed, "stopped_early": self.run.stopped_early,
                "host": self.host, "taken_at": self.taken_at}


def job_class(job: Job | ImageJob) -> str:
    """What kind of run this is, for matching a record to a later estimate: train-full, train-lora, infer-hf,
    image-diffusers."""
    if isinstance(job, ImageJob):
        return f"image-{job.engine}"
    return f"train-{job.method}" if isinstance(job, TrainJob) else f"infer-{job.engine}"


_MEASURED_AS = {"parameters": "weights", "buffers": "weights", "gradients": "gradients", "optimizer": "optimizer",
                "activations": "activations", "temporaries": "activations"}
_PREDICTED_AS = {"weights": "weights", "master_weights": "weights", "gradients": "gradients",
                 "optimizer": "optimizer", "activations": "activations", "logits": "activations"}


def _grouped(parts: Mapping[str, float], names: Mapping[str, str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, value in parts.items():
        if name in names:
            out[names[name]] = out.get(names[name], 0.0) + value / GIB
    return {k: round(v, 6) for k, v in out.items()}


def terms(result: Estimate | ImageEstimate, run: Measured | None = None) -> dict[str, Any]:
    """The estimate's parts: memory by component (and for training, the measured peak in the same parts: weights,
    gradients, optimizer states, activations), and what bounds the step."""
    parts = {k: round(v / GIB, 6) for k, v in result.memory.breakdown_bytes.items() if v}
    perf = result.perf if isinstance(result, Estimate) else None
    found: dict[str, Any] = {"memory_gib": parts, "bound": perf.bound if perf is not None else None,
                             "top_ops": [list(x) for x in perf.top_ops[:5]] if perf is not None else []}
    if run is not None and run.parts_bytes:
        found["memory_parts_gib"] = {"measured": _grouped(run.parts_bytes, _MEASURED_AS),
                                     "predicted": _grouped(result.memory.breakdown_bytes, _PREDICTED_AS)}
    return found


def _validated_job(task: str, given: Job | None, options: Mapping[str, object]) -> Job:
    """The job to run: given, or built from ``options``; inference runs transformers' generate (the engine whose
    profile says validate runs it)."""
    if given is not None and options:
        raise ConfigError(f"give job= or the job's options ({', '.join(sorted(options))}), not both")
    if given is None:
        values = dict(options)
        if task == "infer":
            values.setdefault("engine", INFER_ENGINE)
        given = make_job(task, command=None, fixed=None, **values)
    if isinstance(given, InferJob) and not runtimes.engine(given.engine).validate_runs:
        raise ConfigError(f"validate runs {runtimes.VALIDATE_ENGINE.validate_runs}: --engine {INFER_ENGINE} (or leave "
                          "it out)")
    if given.count != 1:
        raise ConfigError("validate runs one device (--count 1)")
    return given


def host_card(catalog: Catalog, device: str) -> tuple[GPU, Calibration]:
    """The CPU as a card: its memory the RAM available now, its rates measured now (bf16 and fp32 matmuls, a copy)."""
    from gpuwise.probe import bench

    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    rates = {d: bench.gemm(d, size=512, device=device, repeats=3) for d in ("fp32", "bf16")}
    copy_gb_s, _ = bench.device_bandwidth(n_bytes=64 * 2**20, device=device, repeats=3)
    base = catalog.gpus["l4"]  # any record: every figure that matters is replaced
    card = base.model_copy(update={
        "id": HOST_CPU, "name": "host CPU (rates measured now)", "memory_gb": ram / GIB,
        "memory_bandwidth_gb_s": copy_gb_s, "fp32_tflops": rates["fp32"], "bf16_dense_tflops": rates["bf16"],
        "fp16_dense_tflops": rates["bf16"], "tf32_dense_tflops": None, "fp8_dense_tflops": None,
        "int8_dense_tops": None, "fp4_dense_tflops": None, "unified_memory": None, "price": None})
    return card, Calibration(gemm_flops={k: v * 1e12 for k, v in rates.items()}, memory_bytes_per_s=copy_gb_s * 1e9)


def _card(catalog: Catalog, device: str, gpu: str | None) -> tuple[GPU, str, Calibration | None]:
    from gpuwise.probe import bench
    from gpuwise.probe.checks import match_catalog

    named = catalog.gpu(gpu) if gpu else None  # an unknown --gpu is bad input, whatever the machine
    name, memory_mib, _driver, _torch = bench.device_identity(device)
    if device == "cpu":
        card, measured = host_card(catalog, device)
        return card, name, measured
    found = named or match_catalog(name, memory_mib, catalog)[0]
    if found is None:
        raise ConfigError(f"{name[:60]} is not in the catalog: give --gpu ID for the prediction (`gpuwise catalog "
                          "list`)")
    return found, name, None


def _refuse_if_tight(need: float, room: float, card: GPU) -> None:
    if need > (1 - MEMORY_MARGIN) * room:
        raise ConfigError(f"the estimate needs {need / GIB:,.1f} of {room / GIB:,.1f} GiB on {card.id}, "
                          f"less than {MEMORY_MARGIN:.0%} free: not run (a smaller --batch or --seq, or a larger "
                          "device)")


def _gib(value: float | None) -> float | None:
    return None if value is None else value / GIB


def figures(run: Measured, result: Estimate) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """(measured, predicted) with the same keys: peak memory in GiB, seconds, and tokens per second."""
    memory = result.memory
    measured: dict[str, float | None] = {"peak_allocated_gib": _gib(run.peak_allocated_bytes),
                                         "peak_reserved_gib": _gib(run.peak_reserved_bytes)}
    predicted: dict[str, float | None] = {"peak_allocated_gib": _gib(memory.allocated_bytes),
                                          "peak_reserved_gib": _gib(memory.reserved_bytes)
                                          if run.peak_reserved_bytes is not None else None}
    perf, job = result.perf, result.job
    if isinstance(perf, TrainPerf) and isinstance(job, TrainJob) and result.model.kind in ("cnn", "vision"):
        measured.update(step_s=run.step_s, samples_per_s=job.batch / run.step_s)
        predicted.update(step_s=perf.step_time_s, samples_per_s=perf.samples_per_s)
    elif isinstance(perf, TrainPerf) and isinstance(job, TrainJob):
        measured.update(step_s=run.step_s, tokens_per_s=job.batch * job.seq / run.step_s)
        predicted.update(step_s=perf.step_time_s, tokens_per_s=perf.tokens_per_s)
    elif isinstance(perf, InferPerf) and isinstance(job, InferJob):
        measured.update(prefill_s=run.prefill_s, decode_s_per_token=run.decode_s_per_token, generate_s=run.step_s,
                        output_tokens_per_s=job.batch * job.output_len / run.step_s)
        predicted.update(prefill_s=_seconds(perf.ttft_ms), decode_s_per_token=_seconds(perf.tpot_ms),
                         generate_s=_seconds(perf.e2e_latency_ms), output_tokens_per_s=perf.output_tokens_per_s)
    return measured, predicted


def _seconds(ms: float | None) -> float | None:
    return None if ms is None else ms / 1e3


def calibration_from(result: Estimate, measured_s: float, predicted_s: float) -> dict[str, Any]:
    """What the measurement says of the mechanism that bounds the predicted step: with the host's dispatch, its
    seconds per operator; with matmuls, their achieved rate; with memory traffic, the achieved bandwidth -- each
    the estimate's own figure (its plan's runtime, matmul dtype and calibration: the rates the prediction ran at)
    times predicted / measured, so a job of another size is re-derived, not scaled."""
    perf, plan = result.perf, result.plan
    ratio = predicted_s / measured_s
    bound = perf.bound if perf is not None else ""
    out: dict[str, Any] = {"bound": bound, "predicted_over_measured": ratio}
    if bound == "host":
        runtime = plan.engine if isinstance(plan, InferPlan) else plan.framework
        if runtime.launch_cost_s is not None:
            out["host_op_s"] = runtime.launch_cost_s.value * measured_s / predicted_s
        return out
    dtype = plan.matmul_dtype
    m = machine(result.gpu, dtype, calibration=plan.calibration)  # the rates the prediction itself ran at
    if bound == "memory":
        out["memory_gb_s"] = m.memory_bytes_per_s * ratio / 1e9
    else:
        out["gemm_tflops"] = {dtype: m.peak_flops * m.gemm_efficiency * m.shape_fraction * ratio / 1e12}
    return out


def _step_pair(measured: Mapping[str, float | None], predicted: Mapping[str, float | None]) -> tuple[float, float]:
    for key in ("step_s", "decode_s_per_token", "generate_s"):
        seen, guess = measured.get(key), predicted.get(key)
        if seen and guess:
            return seen, guess
    raise ConfigError("validate measured no step time to compare")


def validate(model_name: str | Architecture | Pipeline, *, task: str = "train", job: Job | ImageJob | None = None,
             run: Mapping[str, object] | None = None, save: Path | str | None = None,
             calibration: Path | str | None = None, catalog_files: CatalogFiles = (),
             **options: object) -> Validation:
    """Run the job for real and estimate it: ``run`` holds the settings (device, steps, warmup, time_limit_s, gpu;
    probe/settings.py ValidateSettings), ``options`` the job's flags when ``job`` is not given; ``save`` writes the
    record; ``calibration`` an earlier run's record the prediction uses (the same card). An image pipeline (sdxl,
    flux.1-dev) runs its denoiser and VAE.

    ``gpuwise.api.validate("Qwen/Qwen2.5-0.5B", run={"device": "cuda:0"}, method="lora", batch=4, seq=1024)``"""
    from gpuwise.api.hardware import node_stamp
    from gpuwise.flags import build
    from gpuwise.probe.settings import ValidateSettings

    chosen = build(ValidateSettings, dict(run or {}))
    settings = RunSettings(chosen.device, chosen.steps, chosen.warmup, chosen.time_limit_s)
    target = Path(save) if save is not None else None
    if target is not None:
        check_writable(target, what="validate record")
    catalog = load_catalog(catalog_files=catalog_files)
    pipeline = model_name if isinstance(model_name, Pipeline) else find_pipeline(model_name)
    card, device_name, rates = _card(catalog, chosen.device, chosen.gpu)
    if calibration is not None:  # an earlier run's record: does it bring the prediction for this job closer?
        rates = _with_record(calibration, card, catalog, rates)
    done_job: Job | ImageJob
    result: Estimate | ImageEstimate
    if pipeline is not None:
        image_job = job if isinstance(job, ImageJob) else make_image_job(**options)
        name, done_job, done_run, result, measured, predicted = _run_pipeline(pipeline, image_job, card, catalog,
                                                                              settings)
        mechanism: dict[str, Any] = {"bound": "denoiser",
                                     "predicted_over_measured": (predicted["step_s"] or 1) / (measured["step_s"] or 1)}
    else:
        name, done_job, done_run, model_result, measured, predicted = _run_model(model_name, task, job, options, card,
                                                                                 catalog, rates, settings)
        seen, guess = _step_pair(measured, predicted)
        mechanism, result = calibration_from(model_result, seen, guess), model_result
    host, taken_at = node_stamp()
    done = Validation(name, done_job, chosen.device, device_name, card.id, measured, predicted, done_run, result,
                      mechanism, host, taken_at)
    if target is not None:
        atomic_write_text(target, json.dumps(done.record(), indent=2) + "\n", what="validate record")
    return done


Figures = dict[str, float | None]


def _with_record(path: Path | str, card: GPU, catalog: Catalog, rates: Calibration | None) -> Calibration:
    """An earlier run's recalibrated mechanism over the rates measured now (host-cpu): what it sets wins."""
    recorded = calibration_for(path, card, catalog)
    if rates is None:
        return recorded
    return Calibration(gemm_flops={**rates.gemm_flops, **recorded.gemm_flops},
                       memory_bytes_per_s=recorded.memory_bytes_per_s or rates.memory_bytes_per_s,
                       host_op_s=recorded.host_op_s, source=recorded.source)


def _run_model(model_name: str | Architecture | Pipeline, task: str, job: Job | ImageJob | None,
               options: Mapping[str, object], card: GPU, catalog: Catalog, rates: Calibration | None,
               settings: RunSettings) -> tuple[str, Job, Measured, Estimate, Figures, Figures]:
    from gpuwise.api.jobs import model

    assert not isinstance(model_name, Pipeline) and not isinstance(job, ImageJob)
    typed = _validated_job(task, job, options)
    arch = model(model_name)
    if not arch.config.get("model_type"):
        raise ConfigError(f"{arch.name}: no transformers config to build (validate runs transformers models)")
    result = estimate(arch, typed, card, catalog, calibration=rates)
    _refuse_if_tight(result.memory.allocated_bytes, result.memory.capacity_bytes, card)
    done_run = (run_training(arch.config, result.job, settings) if isinstance(result.job, TrainJob)
                else run_inference(arch.config, result.job, settings))
    measured, predicted = figures(done_run, result)
    return arch.name, result.job, done_run, result, measured, predicted


def _run_pipeline(pipeline: Pipeline, job: ImageJob, card: GPU, catalog: Catalog,
                  settings: RunSettings) -> tuple[str, ImageJob, Measured, ImageEstimate, Figures, Figures]:
    """The denoiser and VAE run, beside the estimate's figures for those two (the text encoders are not run)."""
    from gpuwise.estimate.image.pipeline import activations_by_component, image_estimate
    from gpuwise.workload.trace.run_images import run_pipeline

    result = image_estimate(pipeline, job, card, catalog)
    job = result.job  # as the plan resolved it: the pipeline's defaults filled
    held = result.weights_bytes[pipeline.denoiser_name] + result.weights_bytes["vae"]
    acts = activations_by_component(result.plan)
    allocated = held + max(acts[pipeline.denoiser_name], acts["vae"])
    _refuse_if_tight(allocated, result.memory.capacity_bytes, card)
    done_run = run_pipeline(pipeline, job, settings)
    assert job.steps is not None
    step, decode = result.phases_s["denoising"] / job.steps, result.phases_s["VAE decode"]
    measured: Figures = {"peak_allocated_gib": _gib(done_run.peak_allocated_bytes),
                         "peak_reserved_gib": _gib(done_run.peak_reserved_bytes), "step_s": done_run.step_s,
                         "decode_s": done_run.decode_s,
                         "seconds_per_image": (job.steps * done_run.step_s + (done_run.decode_s or 0)) / job.batch}
    predicted: Figures = {"peak_allocated_gib": _gib(allocated),
                          "peak_reserved_gib": _gib(allocated * (1 + C.ALLOCATOR_RESERVE.value))
                          if done_run.peak_reserved_bytes is not None else None,
                          "step_s": step, "decode_s": decode,
                          "seconds_per_image": (job.steps * step + decode) / job.batch}
    return pipeline.name, job, done_run, result, measured, predicted
