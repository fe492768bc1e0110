"""`gpuwise doctor`, `bench`, `burn-in`, `monitor` and `diagnose`: each calls one `gpuwise.api` function and
renders it; NVML and torch are reached only inside `gpuwise.probe`."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import typer

from gpuwise import api
from gpuwise.api.shell import BenchSettings, BurnInSettings, DoctorSettings, MonitorSettings
from gpuwise.cli.build import CATALOG, JSON, OUTPUT, Arg, Given, Opt, Source, define
from gpuwise.cli.output import print_json, stdout
from gpuwise.errors import ConfigError
from gpuwise.safe_io import decode, parse_json, read_bounded, read_text

MAX_LOG_BYTES = 50_000_000
MAX_REPORT_BYTES = 20_000_000


def _doctor(given: Given) -> None:
    from gpuwise.report.doctor import doctor_json, doctor_view

    report = api.doctor(snapshot_file=given.shell.get("from_file"), save_snapshot=given.shell.get("save_snapshot"),
                        catalog_files=tuple(given.shell.get("catalog") or ()), **given["settings"])
    print_json(doctor_json(report)) if given.shell.get("as_json") else stdout().print(doctor_view(report))
    raise typer.Exit(report.exit_code)


def _bench(given: Given) -> None:
    from gpuwise.report.bench import bench_json, bench_view

    run = api.bench(save=given.shell.get("save"), catalog_files=tuple(given.shell.get("catalog") or ()),
                    **given["settings"])
    results = list(run.results)
    if given.shell.get("as_json"):
        print_json(bench_json(run.device_name, run.catalog_id, results, host=run.host, taken_at=run.taken_at))
    else:
        stdout().print(bench_view(run.device_name, run.catalog_id, results))
    raise typer.Exit(run.exit_code)


def _burn_in(given: Given) -> None:
    result = api.burn_in(timeline=given.shell.get("timeline"), **given["settings"])
    if given.shell.get("as_json"):
        print_json({"status": result.status, "reasons": list(result.reasons), "completed": result.completed,
                    "clock_ratio": result.clock_ratio, "samples": len(result.samples), "host": result.host,
                    "taken_at": result.taken_at})
    else:
        stdout().print(f"[bold]{result.status}[/bold]: " + "; ".join(result.reasons))
    raise typer.Exit(0 if result.status == "PASS" else 1)


def _monitor(given: Given) -> None:
    from rich.live import Live

    from gpuwise.report.doctor import monitor_table

    rounds = api.monitor(**given["settings"])
    try:
        if given.shell.get("as_json"):
            for r in rounds:
                gpus = [{**asdict(g), "hints": list(h)} for g, h in zip(r.readings, r.hints, strict=True)]
                print(json.dumps({"time": r.time_s, "cpu_busy_fraction": r.cpu_busy_fraction, "gpus": gpus},
                                 allow_nan=False), flush=True)
            return
        first = next(rounds)
        with Live(monitor_table(first), console=stdout(), auto_refresh=False) as live:
            for r in rounds:
                live.update(monitor_table(r), refresh=True)
    except KeyboardInterrupt:  # Ctrl-C is how a live view ends; stderr keeps --json output clean
        sys.stderr.write("stopped\n")
    finally:
        rounds.close()  # type: ignore[attr-defined]


def _log_text(given: Given) -> str:
    text, file = given.shell.get("text"), given.args.get("file")
    if text is None and file is None:
        raise ConfigError("give a FILE, '-' for standard input, or --text '...'")
    if text is not None and file is not None:
        raise ConfigError("give a FILE or --text, not both")
    if text is not None:
        return str(text)
    if file == "-":
        return decode(read_bounded(sys.stdin.buffer, what="standard input", max_bytes=MAX_LOG_BYTES),
                      what="standard input").replace("\r\n", "\n")
    return read_text(Path(str(file)), what="log", max_bytes=MAX_LOG_BYTES)


def _diagnose(given: Given) -> None:
    from gpuwise.report.diagnose import diagnosis_json, diagnosis_view

    top = given.shell.get("top")
    top = 5 if top is None else int(top)
    if not 1 <= top <= 100:
        raise ConfigError(f"--top must be from 1 to 100, got {top}")
    report = None
    if given.shell.get("doctor") is not None:
        path = Path(given.shell["doctor"])
        report = parse_json(read_text(path, what="doctor report", max_bytes=MAX_REPORT_BYTES), origin=str(path))
        if not isinstance(report, dict):
            raise ConfigError(f"--doctor {str(path)!r} is not a `gpuwise doctor --json` document (a JSON object whose "
                              "'checks' is a list)")
    result = api.diagnose(_log_text(given), doctor_report=report)
    print_json(diagnosis_json(result)) if given.shell.get("as_json") else stdout().print(
        diagnosis_view(result, top=top))


def register(app: typer.Typer) -> None:
    define(app, "doctor", "Is the card healthy? PCIe link, power, throttling, ECC, memory errors, driver stack.",
           _doctor, sources=[Source.of("settings", DoctorSettings, "doctor")],
           shell=[Opt("save_snapshot", "--save-snapshot", "Write everything the checks read to FILE (JSON), once "
                                                         "they have run.", Path, OUTPUT, "FILE"),
                  Opt("from_file", "--from", "Run the checks on a snapshot saved by --save-snapshot, or show a saved "
                                             "`doctor --json` report.", Path, OUTPUT, "FILE"), JSON, CATALOG],
           doc="Check this machine's GPUs. Exit 0 all pass, 1 warn/fail, 3 no GPU.")
    define(app, "bench", "Measure the card: GEMM per dtype, memory and host bandwidth, vs the datasheet.", _bench,
           sources=[Source.of("settings", BenchSettings, "bench")],
           shell=[Opt("save", "--save", "Write a calibration record that `estimate --calibration FILE` uses.", Path,
                      OUTPUT, "FILE"), JSON, CATALOG])
    define(app, "burn-in", "Sustained load + memory test with telemetry; for a new or used card.", _burn_in,
           sources=[Source.of("settings", BurnInSettings, "burn-in")],
           shell=[Opt("timeline", "--timeline", "Write the samples: .csv, or .html for a chart (needs plotly: "
                                                "gpuwise[web]).", Path, OUTPUT, "FILE"), JSON],
           doc="Exit 0 only for a completed, clean run.")
    define(app, "monitor", "Live view of every GPU with plain hints (input-bound, memory full, throttling).",
           _monitor, sources=[Source.of("settings", MonitorSettings, "monitor")],
           shell=[Opt("as_json", "--json", "One JSON object per reading round (JSON Lines) for scripts.")])
    define(app, "diagnose", "Why did it fail? Causes, how to confirm, fixes and sources for errors in a log.",
           _diagnose, args=[Arg("file", "Log or traceback file; '-' reads standard input.", required=False)],
           shell=[Opt("text", "--text", "The error text itself.", str, OUTPUT, "TEXT"),
                  Opt("doctor", "--doctor", "A `gpuwise doctor --json` report whose findings confirm or rule out "
                                            "causes.", Path, OUTPUT, "FILE"),
                  Opt("top", "--top", "Causes to show (1-100, default 5).", int, OUTPUT, "N"), JSON])
