"""`gpuwise doctor`, `bench`, `burn-in` and `monitor`: the real card, checked and measured."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from gpuwise import api
from gpuwise.cli.common import CatalogOption, JsonOption, catalog_files, guarded, output_file, print_json, stdout


@guarded
def doctor_command(
    as_json: bool = JsonOption,
    save_snapshot: Path | None = typer.Option(None, "--save-snapshot", metavar="FILE", callback=output_file,
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
    save: Path | None = typer.Option(None, "--save", metavar="FILE", callback=output_file,
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
    name, memory_mib, driver, torch_version = _device_identity(device)
    card = cat.gpu(gpu) if gpu else match_catalog(name, memory_mib, cat)[0]
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


def _device_identity(device: str) -> tuple[str, float | None, str | None, str | None]:
    """Device name, memory in MiB (it settles names NVML shares between variants, e.g. H200 SXM/NVL), driver, torch."""
    from gpuwise.errors import ProbeUnavailable

    try:
        import torch
    except ImportError:
        raise ProbeUnavailable("bench needs PyTorch: install the torch build for your GPU (pytorch.org)") from None
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ProbeUnavailable("torch sees no CUDA device (CPU-only build, no driver, or no GPU): run "
                                   "`gpuwise doctor` to find which")
        memory_mib = torch.cuda.get_device_properties(device).total_memory / 2**20
        return torch.cuda.get_device_name(device), memory_mib, None, torch.__version__
    if device != "cpu":
        raise typer.BadParameter(f"device {device!r}; use cuda:N or cpu")
    return "cpu", None, None, torch.__version__


@guarded
def burn_in_command(
    minutes: float = typer.Option(10.0, help="How long to load the card."),
    device: int = typer.Option(0, help="GPU index."),
    timeline: Path | None = typer.Option(None, metavar="FILE", callback=output_file,
                                         help="Write the samples: .csv, or .html for a chart "
                                              "(needs plotly: gpuwise[web])."),
    as_json: bool = JsonOption,
) -> None:
    """Sustained GEMM + memory pattern test with 1 s telemetry; stops on heat, ECC errors or wrong results.
    Exit 0 only for a completed, clean run."""
    from gpuwise.errors import ProbeUnavailable
    from gpuwise.probe import burnin

    if minutes <= 0:
        raise typer.BadParameter(f"--minutes must be > 0, got {minutes}")
    try:
        import torch
    except ImportError:
        raise ProbeUnavailable("burn-in needs PyTorch with CUDA") from None
    if not torch.cuda.is_available():
        raise ProbeUnavailable("torch sees no CUDA device: run `gpuwise doctor` to find out why")
    try:
        sampler, shutdown, close = burnin.nvml_sampler(device)
    except ImportError:
        raise ProbeUnavailable("burn-in needs nvidia-ml-py for telemetry: pip install 'gpuwise[probe]'") from None
    try:
        result = burnin.run(seconds=minutes * 60, workload=burnin.torch_workload(f"cuda:{device}"), sampler=sampler,
                            shutdown_c=shutdown)
    finally:
        close()
    if timeline is not None:
        burnin.write_timeline(result, timeline)
    if as_json:
        print_json({"status": result.status, "reasons": list(result.reasons), "completed": result.completed,
                    "clock_ratio": result.clock_ratio, "samples": len(result.samples)})
    else:
        stdout().print(f"[bold]{result.status}[/bold]: " + "; ".join(result.reasons))
    raise typer.Exit(0 if result.status == "PASS" else 1)


@guarded
def monitor_command(
    interval: float = typer.Option(1.0, help="Seconds between readings."),
    count: int = typer.Option(0, help="Stop after this many readings (0: until Ctrl-C)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per reading round (JSON Lines) for scripts."),
) -> None:
    """Live view of every GPU (utilisation, memory, power, temperature, clocks, throttling) with plain hints."""
    import json
    import time
    from dataclasses import asdict

    from rich.live import Live
    from rich.table import Table

    from gpuwise.errors import ProbeUnavailable
    from gpuwise.probe import monitor

    if not interval > 0 or count < 0:
        raise typer.BadParameter(f"--interval must be > 0 and --count >= 0, got {interval} and {count}")
    try:
        import pynvml as nvml
    except ImportError:
        raise ProbeUnavailable("monitor needs nvidia-ml-py: pip install 'gpuwise[probe]'") from None
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        raise ProbeUnavailable(f"no NVIDIA driver ({exc}): install it so that nvidia-smi works") from None

    def render() -> Table:
        table = Table(title="gpuwise monitor (Ctrl-C to stop)", title_justify="left")
        for header in ("GPU", "util %", "memory MiB", "power W", "temp C", "SM MHz", "throttle", "hint"):
            table.add_column(header, overflow="fold")
        busy = monitor.cpu_busy_fraction()
        for r in monitor.read_all():
            table.add_row(f"{r.index} {r.name}", f"{r.utilization_pct}", f"{r.memory_used_mib:,.0f}/"
                          f"{r.memory_total_mib:,.0f}" if r.memory_total_mib else "—",
                          f"{r.power_w:,.0f}/{r.power_limit_w:,.0f}" if r.power_w and r.power_limit_w else "—",
                          f"{r.temperature_c}", f"{r.sm_clock_mhz}", ", ".join(r.reasons) or "—",
                          "; ".join(monitor.hints(r, cpu_busy_fraction=busy)) or "—")
        return table

    def json_round() -> None:
        busy = monitor.cpu_busy_fraction()
        gpus = [{**asdict(r), "hints": monitor.hints(r, cpu_busy_fraction=busy)} for r in monitor.read_all()]
        print(json.dumps({"time": time.time(), "cpu_busy_fraction": busy, "gpus": gpus}, allow_nan=False),
              flush=True)

    try:
        if as_json:
            shown = 0
            while count == 0 or shown < count:
                if shown:
                    time.sleep(interval)
                json_round()
                shown += 1
            return
        with Live(render(), console=stdout(), auto_refresh=False) as live:
            shown = 1
            while count == 0 or shown < count:
                time.sleep(interval)
                live.update(render(), refresh=True)
                shown += 1
    except KeyboardInterrupt:  # Ctrl-C is how a live view ends; stderr keeps --json output clean
        sys.stderr.write("stopped\n")
    finally:
        nvml.nvmlShutdown()


@guarded
def diagnose_command(
    file: str | None = typer.Argument(None, help="Log or traceback file; '-' reads standard input."),
    text: str | None = typer.Option(None, "--text", help="The error text itself."),
    doctor: Path | None = typer.Option(None, "--doctor", metavar="FILE",
                                       help="A `gpuwise doctor --json` report whose findings confirm or rule out "
                                            "causes."),
    top: int = typer.Option(5, help="Causes to show."),
    as_json: bool = JsonOption,
) -> None:
    """Why did it fail? Known error signatures in a log, with cause, how to confirm, fix and sources."""
    import json
    import sys

    from gpuwise.errors import ConfigError
    from gpuwise.report.diagnose import diagnosis_json, diagnosis_view

    if text is None and file is None:
        raise typer.BadParameter("give a FILE, '-' for standard input, or --text '...'")
    if text is None:
        if file == "-":
            text = sys.stdin.read()
        else:
            try:
                text = Path(str(file)).read_text("utf-8", errors="replace")
            except OSError as exc:
                raise ConfigError(f"cannot read {file!r}: {exc.strerror or exc}") from None
    report = None
    if doctor is not None:
        try:
            report = json.loads(doctor.read_text("utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"--doctor {str(doctor)!r} is not a doctor JSON report ({exc})") from None
    result = api.diagnose(text, doctor_report=report)
    if as_json:
        print_json(diagnosis_json(result))
    else:
        stdout().print(diagnosis_view(result, top=top))
