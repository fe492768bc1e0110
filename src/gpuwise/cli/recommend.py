"""`gpuwise recommend` and `gpuwise tco`: which GPU, bought or rented, and what owning one costs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpuwise import api
from gpuwise.cli.common import CatalogOption, JsonOption, catalog_files, guarded, print_json, stdout
from gpuwise.recommend.request import load_scenario, parse_request


def run_recommend(*, model: str | None, task: str, options: dict[str, Any], files: tuple[Path, ...], as_json: bool,
                  scenario: Path | None, report: Path | None, settings: dict[str, Any],
                  targets: dict[str, Any]) -> None:
    from gpuwise.report import recommend as view

    if scenario is not None:
        request = load_scenario(scenario)
    else:
        job = {k: v for k, v in options.items() if v is not None and k not in ("count", "nodes")}
        workload: dict[str, Any] = {"model": model, "task": task, "options": job}
        for key, value in targets.items():
            if value is not None:
                workload[key] = value
        request = parse_request({"workloads": [workload], **settings}, origin="options")
    result = api.recommend(request, catalog_files=files)
    if report is not None:
        report.write_text(view.markdown(result), encoding="utf-8")
    if as_json:
        print_json(view.recommendation_json(result))
    else:
        stdout().print(view.recommendation_view(result))


@guarded
def tco_command(
    gpu: str = typer.Argument(..., help="Catalog id or loose name of the GPU."),
    count: int = typer.Option(1, help="Cards bought (or rented)."),
    price_usd: float | None = typer.Option(None, help="Price of one card (default: the catalog's street/MSRP)."),
    used: bool = typer.Option(False, "--used", help="Use the catalog's used price."),
    hours_per_day: float = typer.Option(8.0, help="Hours of use per day."),
    years: float = typer.Option(3.0, help="Horizon in years."),
    usd_per_kwh: float = typer.Option(0.16, help="Electricity price (US residential average ~0.16)."),
    pue: float = typer.Option(1.0, help="Power usage effectiveness: 1.0 at home, 1.2-1.6 in data centers."),
    as_json: bool = JsonOption,
    catalog: list[Path] | None = CatalogOption,
) -> None:
    """Owning N cards against renting them, year by year, with the break-even hours per month."""
    from gpuwise.report import recommend as view

    result = api.tco(gpu, count=count, price_usd=price_usd, used=used, hours_per_day=hours_per_day, years=years,
                     usd_per_kwh=usd_per_kwh, pue=pue, catalog_files=catalog_files(catalog))
    if as_json:
        print_json(view.tco_json(result))
    else:
        stdout().print(view.tco_view(result))
