"""`gpuwise recommend` and `gpuwise tco`: which GPU, bought or rented, and what owning one costs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpuwise import api
from gpuwise.cli.build import CATALOG, JSON, OUTPUT, Arg, Given, Opt, Source, define
from gpuwise.cli.jobs import _job_source
from gpuwise.cli.output import print_json, stdout
from gpuwise.errors import ConfigError
from gpuwise.estimate.cost import Usage
from gpuwise.estimate.tco_report import Purchase
from gpuwise.recommend.request import Constraints, Request, Workload, load_scenario, parse_request, template_count
from gpuwise.safe_io import atomic_write_text, check_writable
from gpuwise.workload.job import make_job

MODEL = Arg("model", "Preset id, hub id or config.json path of the model to train or serve (or use --scenario).",
            required=False)
SCENARIO = Opt("scenario", "--scenario", "YAML scenario with everything (workloads, money, constraints; see "
                                         "examples/); then give no MODEL and no other flags.", Path, OUTPUT, "FILE")
REPORT = Opt("report", "--report", "Also write a Markdown report to this file.", Path, OUTPUT, "FILE")
CALIBRATIONS = Opt("calibration", "--calibration", "Measured rates from `gpuwise bench --save FILE` (repeatable): "
                                                   "they replace the efficiency tables for the card they measured.",
                   list[Path], OUTPUT, "FILE")
_REQUEST_SOURCES = ("request", "usage", "constraints")


def _request_from_flags(given: Given) -> Request:
    model = given.args.get("model")
    if not model:
        raise ConfigError("give a MODEL (a preset id, hub id or config.json path) or --scenario FILE")
    options = dict(given["job"])
    task = str(options.pop("task", "train"))
    make_job(task, command="recommend", fixed={"count": template_count(task, options)}, **options)  # named as flags
    workload: dict[str, Any] = {"model": model, "task": task, "options": options, **given["workload"]}
    return parse_request({"workloads": [workload], **given["request"], "usage": given["usage"],
                          "constraints": given["constraints"]}, origin="flags")


def _recommend(given: Given) -> None:
    from gpuwise.report import recommend as view

    scenario, report = given.shell.get("scenario"), given.shell.get("report")
    if scenario is not None:
        extra = [k for k, v in given.values.items() if v] + (["MODEL"] if given.args.get("model") else [])
        if extra:
            raise ConfigError("--scenario says everything itself; leave out MODEL and the other job, target and "
                              "money flags (put them in the scenario file)")
    if report is not None:
        check_writable(report, what="report")
    request = load_scenario(scenario) if scenario is not None else _request_from_flags(given)
    result = api.recommend(request, calibration=tuple(given.shell.get("calibration") or ()),
                           catalog_files=tuple(given.shell.get("catalog") or ()))
    if report is not None:
        atomic_write_text(report, view.markdown(result), what="report")
    print_json(view.recommendation_json(result)) if given.shell.get("as_json") else stdout().print(
        view.recommendation_view(result))


def _tco(given: Given) -> None:
    from gpuwise.report import recommend as view

    result = api.tco(given.args["gpu"], catalog_files=tuple(given.shell.get("catalog") or ()), **given["purchase"],
                     **given["usage"])
    print_json(view.tco_json(result)) if given.shell.get("as_json") else stdout().print(view.tco_view(result))


def register(app: typer.Typer) -> None:
    define(app, "recommend", "Which GPU? Every GPU x count x buy/rent ranked, with reasons for each rejection.",
           _recommend, args=[MODEL],
           sources=[_job_source("recommend"), Source.of("workload", Workload, "recommend"),
                    Source.of("request", Request, "recommend"), Source.of("usage", Usage, "recommend"),
                    Source.of("constraints", Constraints, "recommend")],
           shell=[SCENARIO, REPORT, CALIBRATIONS, JSON, CATALOG])
    define(app, "tco", "Owning N cards against renting them, year by year, with the break-even usage.", _tco,
           args=[Arg("gpu", "Catalog id or loose name of the GPU.")],
           sources=[Source.of("purchase", Purchase, "tco"), Source.of("usage", Usage, "tco")], shell=[JSON, CATALOG])
