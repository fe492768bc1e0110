"""`gpuwise recommend` and `gpuwise tco`: which GPU, bought or rented, and what owning one costs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpuwise import api
from gpuwise.api.shell import (
    Constraints,
    HpcJob,
    ImageJob,
    Purchase,
    Request,
    Usage,
    Workload,
    load_scenario,
    make_job,
    parse_request,
    template_count,
    workload_kind,
)
from gpuwise.cli.build import CATALOG, JSON, OUTPUT, Arg, Given, Opt, Source, define
from gpuwise.cli.jobs import LAUNCH, WEIGHTS, _job_source
from gpuwise.cli.output import print_json, stdout
from gpuwise.errors import ConfigError
from gpuwise.safe_io import atomic_write_text, check_writable

MODEL = Arg("model", "Preset id, hub id or config.json path of the model to train or serve (or use --scenario).",
            required=False)
SCENARIO = Opt("scenario", "--scenario", "YAML scenario with its workloads, money and constraints (see examples/); "
                                         "give no MODEL then; money, usage, system and ranking flags override it.",
               Path, OUTPUT, "FILE")
REPORT = Opt("report", "--report", "Also write a Markdown report to this file.", Path, OUTPUT, "FILE")
CALIBRATIONS = Opt("calibration", "--calibration", "Measured rates from `gpuwise bench --save FILE` (repeatable): "
                                                   "they replace the efficiency tables for the card they measured.",
                   list[Path], OUTPUT, "FILE")
_REQUEST_SOURCES = ("request", "usage", "constraints")


def _hpc_request(given: Given) -> Request:
    """`recommend --task hpc --app NAME ...`: one scientific-computing workload (the recommender picks the count)."""
    from gpuwise.cli.jobs import hpc_job

    if given.args.get("model"):
        raise ConfigError("--task hpc recommends for an application (--app NAME), not a MODEL: leave MODEL out")
    if "count" in given["job"]:
        raise ConfigError("--count is the recommender's to choose; give --max-gpus, or --runs for independent runs")
    options = hpc_job(given).model_dump(exclude_defaults=True, exclude={"task"})
    workload: dict[str, Any] = {"task": "hpc", "options": options, **given["workload"]}
    usage = {"usage": given["usage"]} if given["usage"] else {}
    return parse_request({"workloads": [workload], **given["request"], **usage,
                          "constraints": given["constraints"]}, origin="flags")


def _request_from_flags(given: Given) -> Request:
    from gpuwise.cli.jobs import wants_hpc

    if wants_hpc(given):
        return _hpc_request(given)
    model = given.args.get("model")
    if not model:
        raise ConfigError("give a MODEL (a preset id, hub id or config.json path) or --scenario FILE")
    if workload_kind(None, model) == "image":
        from gpuwise.cli.jobs import image_job

        options: dict[str, Any] = image_job(given).model_dump(exclude_defaults=True)
        task = "infer"
    else:
        if given["image"]:
            raise ConfigError(f"--{next(iter(given['image'])).replace('_', '-')} applies to image pipelines "
                              "(sdxl, flux.1-dev; `gpuwise models`)")
        options = dict(given["job"])
        task = str(options.pop("task", "train"))
        make_job(task, command="recommend", fixed={"count": template_count(task, options)}, **options)  # as flags
    if given.shell.get("weights"):  # the checkpoint's exact bytes, from its header (inference)
        if task != "infer":
            raise ConfigError("--weights gives an inference checkpoint's exact bytes: use it with --task infer")
        options["weights_bytes"] = api.weights_bytes(str(given.shell["weights"]))
    workload: dict[str, Any] = {"model": model, "task": task, "options": options, **given["workload"]}
    usage = {"usage": given["usage"]} if given["usage"] else {}  # none given: the request's default (24 h serving)
    return parse_request({"workloads": [workload], **given["request"], **usage,
                          "constraints": given["constraints"]}, origin="flags")


def _scenario(path: Path, given: Given) -> Request:
    """The scenario file's request; money, usage, system and ranking flags override its values. Its workloads are
    the file's own: a MODEL or a job or target flag would have no workload to go to, and is refused."""
    if given.args.get("model") or given["job"] or given["image"] or given["hpc"] or given["workload"]:
        raise ConfigError("--scenario names its own workloads; leave out MODEL and the job and target flags (put "
                          "them in the scenario file)")
    request = load_scenario(path)
    if not any(given[key] for key in _REQUEST_SOURCES):
        return request
    # the file's own values, not its defaults: a default left free stays free (and is said above the answer)
    return parse_request({**request.model_dump(exclude={"workloads", "usage", "constraints"}, exclude_unset=True),
                          **given["request"],
                          "usage": {**request.usage.model_dump(include=set(request.usage_given)), **given["usage"]},
                          "constraints": {**request.constraints.model_dump(exclude_unset=True),
                                          **given["constraints"]},
                          "workloads": request.workloads}, origin=f"{path} with the flags")


def _recommend(given: Given) -> None:
    from gpuwise.report import recommend as view

    scenario, report = given.shell.get("scenario"), given.shell.get("report")
    if report is not None:
        check_writable(report, what="report")
        if scenario is not None and Path(report).resolve() == Path(scenario).resolve():
            raise ConfigError(f"--report {str(report)!r} is the --scenario file; writing it would destroy the "
                              "scenario: give another file name")
    request = _scenario(scenario, given) if scenario is not None else _request_from_flags(given)
    result = api.recommend(request, calibration=tuple(given.shell.get("calibration") or ()),
                           catalog_files=tuple(given.shell.get("catalog") or ()))
    if report is not None:
        atomic_write_text(report, view.markdown(result), what="report")
    launches = _launches(result, given.shell.get("emit"))
    if given.shell.get("as_json"):
        document = view.recommendation_json(result)
        for i, commands in launches.items():
            document["options"][i]["launch"] = commands
        print_json(document)
        return
    stdout().print(view.recommendation_view(result))
    for i, commands in launches.items():
        for command in commands:
            if "\n" in command.rstrip("\n"):
                stdout().print(f"\nlaunch #{i + 1}:\n{command.rstrip()}", soft_wrap=True, markup=False, highlight=False)
            else:
                stdout().print(f"launch #{i + 1}: {command}", soft_wrap=True, markup=False, highlight=False)


def _launches(result: Any, tool: object) -> dict[int, list[str]]:
    if not tool:
        return {}
    from gpuwise.report.emit import emit_options

    return emit_options(result, str(tool))


def _tco(given: Given) -> None:
    from gpuwise.report import recommend as view

    result = api.tco(given.args["gpu"], catalog_files=tuple(given.shell.get("catalog") or ()), **given["purchase"],
                     **given["usage"])
    print_json(view.tco_json(result)) if given.shell.get("as_json") else stdout().print(view.tco_view(result))


def register(app: typer.Typer) -> None:
    define(app, "recommend", "Which GPU? Every GPU x count x buy/rent ranked, with reasons for each rejection.",
           _recommend, args=[MODEL],
           sources=[_job_source("recommend"), Source.of("image", ImageJob, "recommend"),
                    Source.of("hpc", HpcJob, "recommend"),
                    Source.of("workload", Workload, "recommend"),
                    Source.of("request", Request, "recommend"), Source.of("usage", Usage, "recommend"),
                    Source.of("constraints", Constraints, "recommend")],
           shell=[SCENARIO, REPORT, CALIBRATIONS, LAUNCH, WEIGHTS, JSON, CATALOG])
    define(app, "tco", "Owning N cards against renting them, year by year, with the break-even usage.", _tco,
           args=[Arg("gpu", "Catalog id or loose name of the GPU.")],
           sources=[Source.of("purchase", Purchase, "tco"), Source.of("usage", Usage, "tco")], shell=[JSON, CATALOG])
