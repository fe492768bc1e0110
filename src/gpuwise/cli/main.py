"""Entry point of the `gpuwise` command: every command built from the typed models, errors as one line."""

from __future__ import annotations

import typer

import gpuwise
from gpuwise.cli import catalog, fleet, hardware, jobs, mcp_server, recommend, validate
from gpuwise.cli.build import Given, GpuwiseGroup, Source, define
from gpuwise.errors import ProbeUnavailable

app = typer.Typer(
    name="gpuwise",
    cls=GpuwiseGroup,
    help="Which GPU to buy or rent for your AI work: will it fit, how fast, what it costs, is the card healthy.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(catalog.app, name="catalog", help="Browse GPUs: datasheet figures with sources, dated prices.")
recommend.register(app)
jobs.register(app)
hardware.register(app)
fleet.register(app)
validate.register(app)
validate.register_calibrate(app)


def _serve(given: Given) -> None:
    """Start the web app (needs the web extra: pip install 'gpuwise[web]'); OpenAPI docs at /docs."""
    import sys

    from gpuwise.flags import build
    from gpuwise.web.settings import ServeSettings

    settings = build(ServeSettings, given["server"])
    try:
        import uvicorn

        from gpuwise.web.app import create_app
    except ImportError:
        raise ProbeUnavailable("the web app needs the web extra: pip install 'gpuwise[web]'") from None
    if not settings.loopback:
        sys.stderr.write(f"warning: binding {settings.host} makes gpuwise reachable from other machines; it has no "
                         "authentication. Bind 127.0.0.1 and put a proxy with TLS and login in front of it.\n")
    sys.stderr.write(f"gpuwise {gpuwise.__version__} at {settings.url} (API docs at {settings.url}docs); Ctrl-C "
                     "stops it\n")
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port,
                log_level="warning" if settings.quiet else "info", access_log=not settings.quiet,
                timeout_graceful_shutdown=5)


def _register_serve() -> None:
    from gpuwise.web.settings import ServeSettings

    define(app, "serve", "The web app and HTTP API on this machine: charts for fit, recommend, compare, TCO, doctor.",
           _serve, sources=[Source.of("server", ServeSettings, "serve")])


_register_serve()


mcp_server.register(app)  # its --allow-url may stand alone, which a flag built by define cannot


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpuwise {gpuwise.__version__}")  # read from the metadata only when asked
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """gpuwise answers with figures you can trace to a datasheet, a formula or a measurement."""


def run() -> None:
    """The `gpuwise` command: its exit code is the command's own, and an answer that cannot be written to standard
    output (full, closed) ends with one line and a defined code instead of a traceback (cli/output.py)."""
    import sys

    from gpuwise.cli.build import canonical_argv
    from gpuwise.cli.output import answer_not_written, finish, open_stdout, stream_failed

    had_stdout = open_stdout()
    try:
        app(args=canonical_argv(sys.argv[1:]))
        code: object = 0
    except SystemExit as done:
        code = done.code
    except OSError as exc:  # --help, --version or a usage error printed outside a command's guard
        if not stream_failed(exc):
            raise
        code = answer_not_written(exc)
    sys.exit(finish(code if isinstance(code, int) else 0 if code is None else 1, had_stdout=had_stdout))


if __name__ == "__main__":
    run()
