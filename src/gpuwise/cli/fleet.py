"""`gpuwise exporter`, `gpuwise fleet report` and `gpuwise bench collective`: from one card to a fleet."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import typer

from gpuwise import api
from gpuwise.api.shell import CollectiveSettings, ExporterSettings
from gpuwise.cli.build import CATALOG, JSON, OUTPUT, Arg, Given, Opt, Source, define
from gpuwise.cli.output import print_json, stdout
from gpuwise.errors import ConfigError, ProbeUnavailable
from gpuwise.flags import build
from gpuwise.safe_io import atomic_write_text

Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _host_checked(app: Wsgi, settings: ExporterSettings) -> Wsgi:
    """Bound to loopback, answer only requests addressed to loopback (a web page cannot make a browser read
    /metrics through a rebound DNS name); bound wider, Prometheus scrapes by whatever address it knows."""
    allowed = {"127.0.0.1", "localhost", "[::1]"}

    def checked(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        host = str(environ.get("HTTP_HOST", ""))
        name = host if host.startswith("[") and host.endswith("]") else host.rsplit(":", 1)[0]
        if settings.loopback and name not in allowed:
            start_response("421 Misdirected Request", [("Content-Type", "text/plain")])
            return [b"this exporter answers requests addressed to 127.0.0.1 or localhost\n"]
        return app(environ, start_response)

    return checked


def _exporter(given: Given) -> None:
    settings = build(ExporterSettings, given["settings"])
    read = api.exporter_reader(snapshot_file=given.shell.get("from_file"), bench_file=given.shell.get("bench"),
                               catalog_files=tuple(given.shell.get("catalog") or ()))
    try:
        from prometheus_client import CollectorRegistry, generate_latest, make_wsgi_app
    except ImportError:
        raise ProbeUnavailable("the exporter needs prometheus_client: pip install 'gpuwise[fleet]'") from None
    from gpuwise.report.prometheus import Collector

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector(read, settings.interval, time.monotonic))
    if given.shell.get("once"):
        sys.stdout.write(generate_latest(registry).decode())
        return
    _serve(_host_checked(make_wsgi_app(registry), settings), settings)


def _serve(app: Wsgi, settings: ExporterSettings) -> None:
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    class Quiet(WSGIRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            """Scrapes are not logged: Prometheus asks every 30 s on every node."""

    try:
        server = make_server(settings.host.strip("[]"), settings.port, app, handler_class=Quiet)
    except OSError as error:
        raise ConfigError(f"cannot listen on {settings.host}:{settings.port}: {error.strerror}; choose another "
                          "--port or --host") from None
    sys.stderr.write(f"serving http://{settings.host}:{server.server_port}/metrics (Ctrl-C stops)\n")
    sys.stderr.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        sys.stderr.write("stopped\n")
    finally:
        server.server_close()


def _fleet_report(given: Given) -> None:
    from gpuwise.report.fleet import fleet_html, fleet_json, fleet_view

    target = given.shell.get("html")
    if target is not None and Path(target).suffix != ".html":
        raise ConfigError(f"--html {str(target)!r}: name a .html file")
    report = api.fleet_report(Path(given.args["directory"]), catalog_files=tuple(given.shell.get("catalog") or ()))
    if target is not None:
        atomic_write_text(Path(target), fleet_html(report), what="fleet report")
    print_json(fleet_json(report)) if given.shell.get("as_json") else stdout().print(fleet_view(report))
    raise typer.Exit(1 if any(n.verdict != "PASS" for n in report.nodes) else 0)


def _collective(given: Given) -> None:
    from gpuwise.report.bench import collective_json, collective_view

    run = api.bench_collective(**given["settings"])
    print_json(collective_json(run)) if given.shell.get("as_json") else stdout().print(collective_view(run))


def register(app: typer.Typer) -> None:
    define(app, "exporter", "Prometheus /metrics for this machine's GPUs: NVML gauges, doctor checks, bench ratios.",
           _exporter, sources=[Source.of("settings", ExporterSettings, "exporter")],
           shell=[Opt("from_file", "--from", "Serve a recorded snapshot (`doctor --save-snapshot`, or a `doctor "
                                             "--json` report: without readings, its checks only) instead of "
                                             "reading NVML.", Path, OUTPUT, "FILE"),
                  Opt("bench", "--bench", "A saved `bench --json` (or `bench --save`) whose ratios to the catalog "
                                          "become gpuwise_bench_ratio.", Path, OUTPUT, "FILE"),
                  Opt("once", "--once", "Print the metrics once (Prometheus text format) and exit: for node_exporter's "
                                        "textfile collector or a cron job."), CATALOG],
           doc="Serve /metrics until stopped. Metric names follow dcgm-exporter's where they mean the same.")
    fleet = typer.Typer(help="Many nodes at once: outliers against the catalog and against the fleet.",
                        no_args_is_help=True)
    define(fleet, "report", "Judge a folder of nodes (doctor.json, bench.json, burnin.json each) and name outliers.",
           _fleet_report, args=[Arg("directory", "Folder with one subfolder per node.", metavar="DIR")],
           shell=[Opt("html", "--html", "Also write a self-contained HTML report with a chart per metric (needs "
                                        "plotly: gpuwise[web]).", Path, OUTPUT, "FILE"), JSON, CATALOG],
           doc="Exit 0 when every node passes, 1 when any node is an outlier.")
    app.add_typer(fleet, name="fleet")
    define(app, "bench-collective", "All-reduce, all-gather and reduce-scatter bus bandwidth over N processes, as "
                                    "nccl-tests counts it (also: gpuwise bench collective).", _collective,
           sources=[Source.of("settings", CollectiveSettings, "bench-collective")], shell=[JSON])
