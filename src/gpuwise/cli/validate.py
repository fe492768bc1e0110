"""`gpuwise validate`: the job run for real on this machine's device, measured beside the estimate."""

from __future__ import annotations

from pathlib import Path

import typer

from gpuwise import api
from gpuwise.api.shell import ImageJob, ValidateSettings, workload_kind
from gpuwise.cli.build import CATALOG, JSON, OUTPUT, Given, Opt, Source, define
from gpuwise.cli.jobs import CALIBRATION, MODEL, _job_source, image_job, typed_job
from gpuwise.cli.output import print_json, stdout

SAVE = Opt("save", "--save", "Write the run as a record that `estimate --calibration FILE` uses (JSON).", Path,
           OUTPUT, "FILE")


# The job flags one run on one device honours (workload/trace/run.py and setup.py): the step's shape, precision,
# optimizer, adapters, checkpointing and loss, a framework's defaults for them; the prompt, output and 16-bit weights
# of transformers' generate. Counts, nodes, links, parallel degrees, sharding, offload, serving engines and their
# knobs size runs it never makes, so --help does not list them and typing one is refused.
RUN_FIELDS = frozenset({"task", "batch", "seq", "method", "precision", "optimizer", "optimizer_in_backward", "loss",
                        "lora_rank", "lora_targets", "ckpt", "grad_ckpt", "framework", "image_size", "input_len",
                        "output_len", "quant"})


def _run_source() -> Source:
    return Source("job", {name: spec for name, spec in _job_source("estimate").fields.items() if name in RUN_FIELDS})


def _validate(given: Given) -> None:
    from gpuwise.api.validation import INFER_ENGINE
    from gpuwise.report.validate import validate_json, validate_view

    model = given.args["model"]
    if given["job"].get("task") == "infer":
        given["job"]["engine"] = INFER_ENGINE  # the run is transformers' generate, which the estimate then models
    job = image_job(given) if workload_kind(None, model) == "image" else typed_job(given, "estimate")
    files = tuple(given.shell.get("catalog") or ())
    done = api.validate(model, job=job, run=given["run"], save=given.shell.get("save"),
                        calibration=given.shell.get("calibration"),
                        catalog_files=files)
    print_json(validate_json(done)) if given.shell.get("as_json") else stdout().print(validate_view(done))


def _image_source() -> Source:
    """An image pipeline's own flags but --steps, which validate spends on timed steps: its figures are per denoiser
    forward, and per image at the pipeline's default step count."""
    fields = Source.of("image", ImageJob, "estimate").fields
    return Source("image", {name: spec for name, spec in fields.items() if name != "steps"})


def register(app: typer.Typer) -> None:
    define(app, "validate", "Run the job for real on this device (random weights from its config.json) and show "
                            "measured memory and time beside the estimate.", _validate,
           args=[MODEL], sources=[_run_source(), _image_source(),
                                  Source.of("run", ValidateSettings, "validate")],
           shell=[SAVE, CALIBRATION, JSON, CATALOG],
           doc="Needs torch and transformers (the hf extra); PEFT for LoRA; bitsandbytes and CUDA for QLoRA; diffusers "
               "for an image pipeline (sdxl, flux.1-dev: its denoiser and VAE).")


FROM = Opt("from_file", "--from", "The benchmark export to read: AIPerf/GenAI-Perf profile export JSON, `vllm bench "
                                  "serve --save-result` JSON, SGLang bench_serving JSONL, `llama-bench -o json`; or a "
                                  "vLLM or SGLang start-up log (its memory figures beside gpuwise's).",
           Path, OUTPUT, "FILE")


def _calibrate(given: Given) -> None:
    from gpuwise.errors import ConfigError

    source = given.shell.get("from_file")
    if source is None:
        raise ConfigError("give --from FILE: a benchmark export (AIPerf, vllm bench serve, SGLang bench_serving, "
                          "llama-bench -o json) or a vLLM or SGLang start-up log")
    from gpuwise.api.engine_logs import file_shape

    if file_shape(source) == "engine-log":
        _engine_log(given, source)
        return
    from gpuwise.api.measured_runs import calibrate
    from gpuwise.report.validate import calibrate_json, calibrate_view

    try:
        done = calibrate(source, settings=given["settings"], save=given.shell.get("save"),
                         catalog_files=tuple(given.shell.get("catalog") or ()))
    except ConfigError as exc:
        if "not a benchmark export" in str(exc):  # neither shape: say both
            raise ConfigError(f"{exc}; or a vLLM or SGLang start-up log (lines such as 'GPU KV cache size: N "
                              "tokens', 'KV Cache is allocated')") from None
        raise
    print_json(calibrate_json(done)) if given.shell.get("as_json") else stdout().print(calibrate_view(done))


def _engine_log(given: Given, source: Path) -> None:
    from gpuwise.api.engine_logs import compare_engine_log
    from gpuwise.report.engine_log import engine_log_json, engine_log_view

    wanted = ("gpu", "model", "tp", "engine_version")
    settings = {k: v for k, v in dict(given["settings"]).items() if k in wanted and v is not None}
    done = compare_engine_log(source, settings=settings, save=given.shell.get("save"),
                              catalog_files=tuple(given.shell.get("catalog") or ()))
    print_json(engine_log_json(done)) if given.shell.get("as_json") else stdout().print(engine_log_view(done))


def register_calibrate(app: typer.Typer) -> None:
    from gpuwise.api.shell import CalibrateSettings

    define(app, "calibrate", "Read your benchmark exports (AIPerf, vllm bench serve, SGLang, llama-bench) or a vLLM "
                             "or SGLang start-up log: each run or memory figure beside gpuwise's prediction, and a "
                             "calibration record.", _calibrate,
           sources=[Source.of("settings", CalibrateSettings, "calibrate")],
           shell=[FROM, Opt("save", "--save", "Write the calibration record that --calibration FILE reads (JSON).",
                            Path, OUTPUT, "FILE"), JSON, CATALOG])
