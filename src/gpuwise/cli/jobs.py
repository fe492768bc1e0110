"""`gpuwise estimate`, `fit`, `scale`, `serve-sim` and `models`: each builds the typed job from the flags the user
typed, calls one `gpuwise.api` function and renders the result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpuwise import api
from gpuwise.api.shell import (
    HARDWARE,
    HPC_SHARED,
    SHARED,
    HpcJob,
    ImageJob,
    InferJob,
    LoadTest,
    TrainJob,
    Usage,
    job_flag_fields,
    make_hpc_job,
    make_image_job,
    make_job,
    workload_kind,
)
from gpuwise.cli.build import CATALOG, JSON, OUTPUT, Arg, Given, Opt, Source, define
from gpuwise.cli.output import print_json, stdout
from gpuwise.errors import ConfigError
from gpuwise.flags import flag_fields
from gpuwise.report.trace import trace_json, trace_line

MODEL = Arg("model", "Preset id (llama-3.1-8b), hub id (meta-llama/Llama-3.1-8B), a config.json path, or a GGUF file "
                     "(./model.gguf or its URL). `gpuwise models` lists the presets.")
LANGUAGE_MODEL = Arg("model", "Preset id (llama-3.1-8b), hub id (meta-llama/Llama-3.1-8B), a config.json path, or a "
                              "GGUF file (./model.gguf or its URL); or -hf REPO:QUANT. `gpuwise models` lists the "
                              "presets.", required=False)
ESTIMATED = Arg("model", "Preset id (llama-3.1-8b), hub id (meta-llama/Llama-3.1-8B), a config.json path, or a "
                         "GGUF file (./model.gguf or its URL); or -hf REPO:QUANT; `gpuwise models` lists the presets. "
                         "Leave it out with --task hpc --app NAME (`gpuwise models` lists the applications too).",
                required=False)
HF_REPO = Opt("hf_repo", "--hf-repo", "A GGUF model on the Hugging Face hub, as llama.cpp's -hf takes it: "
                                      "<owner>/<repo>[:QUANT] (e.g. unsloth/Qwen3-8B-GGUF:Q4_K_M; Q4_K_M when left "
                                      "out); reads only the chosen file's header (HF_ENDPOINT, HF_TOKEN).", str,
              "Model", "REPO[:QUANT]", aliases=("-hf",))
GPU = Opt("gpu", "--gpu", "Catalog id or loose name of the GPU: rtx-4090, 'H100 SXM' (required); estimating "
          "inference, 2-4 cards as a,b split one copy by layers (llama.cpp).", str, HARDWARE,
          "GPU")
CALIBRATION = Opt("calibration", "--calibration", "Measured rates from `gpuwise bench --save FILE` for this card.",
                  Path, OUTPUT, "FILE")
EXACT = Opt("exact", "--exact", "Also count parameters by building the model on PyTorch's meta device (needs the "
                                "hf extra and torch).")
TRACE = Opt("trace", "--trace", "Also run the model's own transformers code on fake tensors -- one training step "
                                "(LoRA/QLoRA through PEFT), or a prefill and a decode step -- and report its traced "
                                "peak memory, FLOPs and kernels (needs the hf extra, torch, and peft for adapters; no "
                                "GPU; tens of seconds for a 1B model).")
WEIGHTS = Opt("weights", "--weights", "A .safetensors or .gguf checkpoint (file or http(s) URL): its header's exact "
                                     "weight bytes replace the format's bits-per-weight guess (inference; reads "
                                     "only the header).", str, OUTPUT, "FILE|URL")
EMIT = Opt("emit", "--emit", "'hf': print matching transformers/PEFT/bitsandbytes settings.", str, metavar="hf")
LAUNCH = Opt("emit", "--emit", "Print what starts the job with exactly the settings gpuwise assumed: vllm, sglang or "
                               "llamacpp (the serving command; --task infer, the same --engine), axolotl (a config) or "
                               "torchtune (a tune run command) for --task train, or skypilot (a task file for the "
                               "rented machines).", str, metavar="TOOL")
FIXED_TASK = {"scale": "train", "serve-sim": "infer"}


def take_hf_repo(given: Given, *, required: bool = True) -> None:
    """``-hf REPO[:QUANT]`` as the MODEL (``hf.co/REPO[:QUANT]``, which the resolver reads as a GGUF on the hub)."""
    repo = given.shell.get("hf_repo")
    if repo and given.args.get("model"):
        raise ConfigError("give a MODEL or -hf REPO[:QUANT], not both")
    if repo:
        given.args["model"] = "hf.co/" + str(repo).strip()
    elif required and not given.args.get("model"):
        raise ConfigError("give a MODEL (a preset id, hub id, config.json or .gguf path; `gpuwise models`) or -hf "
                          "REPO[:QUANT]")


def _gpu(given: Given) -> str:
    gpu = given.shell.get("gpu")
    if not gpu:
        raise ConfigError("--gpu is required: a catalog id or loose name such as rtx-4090 (`gpuwise catalog list`)")
    return str(gpu)


def image_job(given: Given) -> ImageJob:
    """The image-generation job of the flags typed for a pipeline; a language-model flag is refused, not ignored."""
    values = {**given["job"], **given["image"]}
    if values.pop("task", "infer") != "infer":
        raise ConfigError("image pipelines are modelled for generation: use --task infer (or leave --task out)")
    for name in values:
        if name not in SHARED and name not in ImageJob.model_fields:
            own = ", ".join("--" + f.replace("_", "-") for f in (*SHARED, "resolution", "steps", "guidance_passes"))
            raise ConfigError(f"--{name.replace('_', '-')} does not apply to an image pipeline; it takes {own}")
    return make_image_job(**values)


def hpc_job(given: Given) -> HpcJob:
    """The scientific-computing job of the flags typed with --task hpc; a language-model flag is refused."""
    values = {k: v for k, v in given["job"].items() if k != "task"}
    for name in values:
        if name not in HPC_SHARED:
            own = ", ".join("--" + f.replace("_", "-") for f in (*HPC_SHARED, *(n for n, _, _ in flag_fields(HpcJob))))
            raise ConfigError(f"--{name.replace('_', '-')} does not apply to --task hpc; it takes {own}")
    if given["image"]:
        flag = "--" + next(iter(given["image"])).replace("_", "-")
        raise ConfigError(f"{flag} applies to image pipelines, not --task hpc")
    return make_hpc_job(**values, **given["hpc"])


def wants_hpc(given: Given) -> bool:
    """--task hpc was typed; HPC flags without it are refused with the flag that would make them count."""
    if given["job"].get("task") == "hpc":
        return True
    if given["hpc"]:
        flag = "--" + next(iter(given["hpc"])).replace("_", "-")
        raise ConfigError(f"{flag} describes a scientific-computing job: add --task hpc (and --app NAME)")
    return False


def typed_job(given: Given, command: str) -> TrainJob | InferJob:
    """The job of the flags typed for ``command``; a task the command cannot run is refused, not ignored."""
    if given["image"]:
        flag = "--" + next(iter(given["image"])).replace("_", "-")
        raise ConfigError(f"{flag} applies to image pipelines (sdxl, flux.1-dev; `gpuwise models`)")
    values = dict(given["job"])
    task = str(values.pop("task", FIXED_TASK.get(command, "train")))
    if command in FIXED_TASK and task != FIXED_TASK[command]:
        raise ConfigError(f"`gpuwise {command}` is {FIXED_TASK[command]} only; leave --task out")
    # scale sweeps the GPU count itself, from the smallest one the model-parallel degrees allow
    fixed: dict[str, object] | None = None
    if command == "scale":
        tp, pp = values.get("tp", 1), values.get("pp", 1)
        fixed = {"count": tp * pp} if isinstance(tp, int) and isinstance(pp, int) else None
    return make_job(task, command=command, fixed=fixed, **values)


def _files(given: Given) -> tuple[Path, ...]:
    return tuple(given.shell.get("catalog") or ())


def _image(given: Given, command: str) -> None:
    from gpuwise.report import image as view

    model, job = given.args["model"], image_job(given)
    if any(given.shell.get(k) for k in ("exact", "calibration", "emit", "trace", "weights")):
        raise ConfigError("--exact, --calibration, --emit, --trace and --weights apply to language models, not image "
                          "pipelines")
    if command == "fit":
        fitted = api.image_fit(model, gpu=_gpu(given), job=job, catalog_files=_files(given))
        print_json(view.image_fit_json(fitted)) if given.shell.get("as_json") else stdout().print(
            view.image_fit_view(fitted))
        return
    result = api.image_estimate(model, gpu=_gpu(given), job=job, catalog_files=_files(given))
    if given.shell.get("as_json"):
        print_json(view.image_json(result))
    else:
        stdout().print(view.image_table(result), view.image_lines(result))


def _split(given: Given, model: str, job: TrainJob | InferJob) -> None:
    """``--gpu a,b[,c,d]``, or ``--gpu a --count N`` on llama.cpp or exllamav2: one inference copy split by layers
    over those cards (their default)."""
    from gpuwise.report.split import split_json, split_view

    if not isinstance(job, InferJob):
        raise ConfigError("--gpu with several cards (a,b) splits one inference copy by layers; use --task infer, or "
                          "one --gpu with --count for training")
    names = [name.strip() for name in _gpu(given).split(",")]
    if len(names) == 1:  # --gpu CARD --count N on an engine that splits by layers (api.splits_by_layers)
        names *= job.count
    result = api.layer_split(model, gpus=names, job=job, catalog_files=_files(given), usage=given["usage"])
    if given.shell.get("as_json"):
        print_json(split_json(result))
    else:
        stdout().print(split_view(result, model))


def _hpc(given: Given) -> None:
    from gpuwise.report.hpc import hpc_json, hpc_view

    if given.args.get("model"):
        raise ConfigError("--task hpc estimates an application (--app NAME), not a MODEL: leave MODEL out")
    if any(given.shell.get(k) for k in ("exact", "calibration", "trace", "emit", "weights")):
        raise ConfigError("--exact, --calibration, --trace, --emit and --weights apply to language models, not "
                          "--task hpc")
    result = api.hpc_estimate(gpu=_gpu(given), job=hpc_job(given), catalog_files=_files(given))
    print_json(hpc_json(result)) if given.shell.get("as_json") else stdout().print(hpc_view(result))


def _estimate(given: Given) -> None:
    from gpuwise.report import estimate as view

    take_hf_repo(given, required=False)
    if wants_hpc(given):
        _hpc(given)
        return
    if not given.args.get("model"):
        raise ConfigError("give a MODEL (a preset id, hub id or config.json path; `gpuwise models`), or --task hpc "
                          "--app NAME for a scientific application")
    if workload_kind(None, given.args["model"]) == "image":
        _image(given, "estimate")
        return
    model, job = given.args["model"], typed_job(given, "estimate")
    if "," in _gpu(given) or api.splits_by_layers(job):
        _split(given, model, job)
        return
    result = api.estimate(model, gpu=_gpu(given), job=job, calibration=given.shell.get("calibration"),
                          weights=given.shell.get("weights"), catalog_files=_files(given), usage=given["usage"])
    if given.shell.get("emit"):
        from gpuwise.report.emit import emit_estimate

        typer.echo(emit_estimate(result, model, str(given.shell["emit"])).rstrip("\n"))
        return
    exact = api.exact_params(model) if given.shell.get("exact") else None
    traced = api.trace(model, result.plan) if given.shell.get("trace") else None
    if given.shell.get("as_json"):
        document = view.estimate_json(result)
        if exact is not None:
            document["workload"]["params_exact"] = exact
        if traced is not None:
            document["trace"] = trace_json(traced, result.memory, api.trace_time(traced, result), result)
        print_json(document)
        return
    console = stdout()
    if exact is not None:
        agree = "agrees" if exact == result.model.total_params else "DIFFERS"
        console.print(f"meta-device count {exact:,} ({agree} with the formula's {result.model.total_params:,})")
    console.print(view.estimate_view(result))
    if traced is not None:
        console.print(trace_line(traced, result.memory, api.trace_time(traced, result), result))


def _fit(given: Given) -> None:
    from gpuwise.api.jobs import FIT_EMIT
    from gpuwise.report import estimate as view

    take_hf_repo(given)
    emit = given.shell.get("emit")
    if emit not in (None, FIT_EMIT):
        raise ConfigError(f"--emit {str(emit)[:40]!r} is not accepted; use {FIT_EMIT}")
    if workload_kind(None, given.args["model"]) == "image":
        _image(given, "fit")
        return
    job = typed_job(given, "fit")
    if emit is not None and not isinstance(job, TrainJob):
        raise ConfigError(f"--emit {FIT_EMIT} prints training settings; it applies to --task train")
    fitted = api.fit(given.args["model"], gpu=_gpu(given), job=job, weights=given.shell.get("weights"),
                     catalog_files=_files(given))
    traced = api.trace(given.args["model"], fitted.estimate.plan) if given.shell.get("trace") else None
    if emit is not None:
        from gpuwise.report.hf_settings import hf_settings

        typer.echo(hf_settings(fitted), nl=False)
    elif given.shell.get("as_json"):
        document = view.fit_json(fitted)
        if traced is not None:
            document["trace"] = trace_json(traced, fitted.estimate.memory, api.trace_time(traced, fitted.estimate),
                                           fitted.estimate)
        print_json(document)
    else:
        stdout().print(view.fit_view(fitted))
        if traced is not None:
            stdout().print(trace_line(traced, fitted.estimate.memory, api.trace_time(traced, fitted.estimate),
                                      fitted.estimate))


def _scale(given: Given) -> None:
    from gpuwise.report import perf as view

    job = typed_job(given, "scale")
    assert isinstance(job, TrainJob)
    rows = api.scale(given.args["model"], gpu=_gpu(given), job=job, catalog_files=_files(given))
    if given.shell.get("as_json"):
        print_json([view.scale_row_json(r) for r in rows])
    else:
        stdout().print(view.scale_table(given.args["model"], _gpu(given), rows, job.network))


def _serve_sim(given: Given) -> None:
    from gpuwise.report import perf as view

    take_hf_repo(given)
    job = typed_job(given, "serve-sim")
    assert isinstance(job, InferJob)
    report = api.serve_sim(given.args["model"], gpu=_gpu(given), job=job, calibration=given.shell.get("calibration"),
                           catalog_files=_files(given), usage=given["usage"], **given["load"])
    print_json(view.serving_json(report)) if given.shell.get("as_json") else stdout().print(view.serving_view(report))


def _models(given: Given) -> None:
    rows: list[dict[str, Any]] = []
    for preset in api.list_models():
        arch = api.model(preset.id)
        rows.append({"id": preset.id, "family": arch.family, "params": arch.total_params,
                     "active_params": arch.active_params, "hub_ids": list(preset.hub_ids), "source": preset.source})
    for p in api.list_pipelines():
        rows.append({"id": p.id, "family": f"image pipeline ({p.denoiser_class})", "params": p.total_params,
                     "active_params": p.total_params, "hub_ids": list(p.hub_ids), "source": p.source})
    for a in api.hpc_apps():  # `--task hpc --app ID`: no parameters, a profile
        rows.append({"id": a.id, "family": f"--task hpc --app {a.id} ({a.unit})", "params": 0, "active_params": 0,
                     "hub_ids": [], "source": str(a.sources[0].url)})
    if given.shell.get("as_json"):
        print_json(rows)
        return
    from gpuwise.report.models import models_table

    stdout().print(models_table(rows))


def _job_source(command: str) -> Source:
    tasks = (FIXED_TASK[command],) if command in FIXED_TASK else ("train", "infer")
    return Source("job", job_flag_fields(command, tasks))


def register(app: typer.Typer) -> None:
    define(app, "estimate", "Per-GPU memory and speed of a job, as a table or the JSON contract (--json).",
           _estimate, args=[ESTIMATED], sources=[_job_source("estimate"), Source.of("image", ImageJob, "estimate"),
                                                 Source.of("hpc", HpcJob, "estimate"),
                                                 Source.of("usage", Usage, "estimate")],
           shell=[GPU, HF_REPO, CALIBRATION, WEIGHTS, LAUNCH, EXACT, TRACE, JSON, CATALOG])
    define(app, "fit", "Will it fit? Memory breakdown, largest batch, and the changes that make it fit.", _fit,
           args=[LANGUAGE_MODEL], sources=[_job_source("fit"), Source.of("image", ImageJob, "fit")],
           shell=[GPU, HF_REPO, WEIGHTS, EMIT, TRACE, JSON, CATALOG])
    define(app, "scale", "Training speed on 1, 2, 4, 8 GPUs and nodes of 8: what each GPU adds.", _scale,
           args=[MODEL], sources=[_job_source("scale")], shell=[GPU, JSON, CATALOG])
    define(app, "serve-sim", "Serving under load: P50/P90/P99 latency at a request rate, highest rate for an SLO.",
           _serve_sim, args=[LANGUAGE_MODEL], sources=[_job_source("serve-sim"), Source.of("load", LoadTest,
                                                                                          "serve-sim"),
                                                    Source.of("usage", Usage, "serve-sim")],
           shell=[GPU, HF_REPO, CALIBRATION, JSON, CATALOG])
    define(app, "models", "List the shipped model presets (work offline).", _models, shell=[JSON])
