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


@guarded
def doctor_command(
    as_json: bool = JsonOption,
    save_snapshot: Path | None = typer.Option(None, "--save-snapshot", metavar="FILE",
                                              help="Write everything the checks read to FILE (JSON)."),
    from_file: Path | None = typer.Option(None, "--from", metavar="FILE",
                                          help="Run the checks on a snapshot saved by --save-snapshot."),
    load_seconds: float = typer.Option(2.0, help="Seconds of matmul load while reading the PCIe link (0: idle)."),
    catalog: list[Path] | None = CatalogOption,
) -> None:
    """Check this machine's GPUs: PCIe link under load, power cap, throttling, temperature, ECC, retired pages and
    remapped rows, replays, modes, processes, and the driver/torch stack. Exit 0 all pass, 1 warn/fail, 3 no GPU."""
    from gpuwise.probe.backend import read_machine, read_snapshot, write_snapshot
    from gpuwise.probe.checks import run_checks
    from gpuwise.report.doctor import doctor_json, doctor_view

    snapshot = read_snapshot(from_file) if from_file is not None else read_machine(load_seconds=load_seconds)
    if save_snapshot is not None:
        write_snapshot(snapshot, save_snapshot)
    report = run_checks(snapshot, api.load_catalog(catalog_files=catalog_files(catalog)))
    if as_json:
        print_json(doctor_json(report))
    else:
        stdout().print(doctor_view(report))
    raise typer.Exit(report.exit_code)


@guarded
def bench_command(
    device: str = typer.Option("cuda:0", help="torch device to measure: cuda:0, cuda:1 ... (cpu: only to try it)."),
    quick: bool = typer.Option(False, "--quick", help="Smaller problems and fewer repeats (about 10 s)."),
    save: Path | None = typer.Option(None, "--save", metavar="FILE",
                                     help="Write a calibration record that `estimate --calibration FILE` uses."),
    gpu: str | None = typer.Option(None, "--gpu", help="Catalog id of the card (default: from the device name)."),
    as_json: bool = JsonOption,
    catalog: list[Path] | None = CatalogOption,
) -> None:
    """Measure the card: GEMM TFLOPS per dtype, memory copy/triad, host<->device pinned/pageable, vs the catalog."""
    from gpuwise.probe.bench import CalibrationRecord, run, today
    from gpuwise.probe.checks import match_catalog
    from gpuwise.report.bench import bench_json, bench_view

    cat = api.load_catalog(catalog_files=catalog_files(catalog))
    name, driver, torch_version = _device_identity(device)
    card = cat.gpu(gpu) if gpu else match_catalog(name, None, cat)[0]
    link = cat.interconnects.get(card.native_link) if card else None
    results = run(card, device=device, quick=quick, link_gb_s=link.nominal_gb_s if link else None)
    if save is not None:
        CalibrationRecord(gpu=card.id if card else name, name=name, driver=driver, torch=torch_version, date=today(),
                          gemm_tflops={r.metric.removeprefix("gemm_"): r.value for r in results
                                       if r.metric.startswith("gemm_")},
                          memory_gb_s=next((r.value for r in results if r.metric == "memory_copy"), None)).save(save)
    if as_json:
        print_json(bench_json(name, card.id if card else None, results))
    else:
        stdout().print(bench_view(name, card.id if card else None, results))
    raise typer.Exit(1 if any(r.verdict in ("WARN", "FAIL") for r in results) else 0)


def _device_identity(device: str) -> tuple[str, str | None, str | None]:
    from gpuwise.errors import ProbeUnavailable

    try:
        import torch
    except ImportError:
        raise ProbeUnavailable("bench needs PyTorch: install the torch build for your GPU (pytorch.org)") from None
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ProbeUnavailable("torch sees no CUDA device (CPU-only build, no driver, or no GPU): run "
                                   "`gpuwise doctor` to find which")
        return torch.cuda.get_device_name(device), None, torch.__version__
    if device != "cpu":
        raise typer.BadParameter(f"device {device!r}; use cuda:N or cpu")
    return "cpu", None, torch.__version__
