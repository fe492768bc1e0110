"""Entry point of the `gpuwise` command."""

from __future__ import annotations

import typer

from gpuwise import __version__
from gpuwise.cli import catalog
from gpuwise.cli.estimate import estimate_command, models_command
from gpuwise.cli.hardware import (
    bench_command,
    burn_in_command,
    diagnose_command,
    doctor_command,
    monitor_command,
)
from gpuwise.cli.recommend import tco_command

app = typer.Typer(
    name="gpuwise",
    help="Which GPU to buy or rent for your AI work: will it fit, how fast, what it costs, is the card healthy.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(catalog.app, name="catalog", help="Browse GPUs: datasheet figures with sources, dated prices.")
COMMANDS = (
    ("recommend", "Which GPU? Every GPU x count x buy/rent ranked, with reasons for each rejection.", estimate_command),
    ("tco", "Owning N cards against renting them, year by year, with the break-even usage.", tco_command),
    ("fit", "Will it fit? Memory breakdown, largest batch, and the changes that make it fit.", estimate_command),
    ("estimate", "Per-GPU memory and speed of a job, as a table or the JSON contract (--json).", estimate_command),
    ("scale", "Training speed on 1, 2, 4, 8 GPUs and nodes of 8: what each GPU adds.", estimate_command),
    ("serve-sim", "Serving under load: P50/P90/P99 latency at a request rate, highest rate for an SLO.",
     estimate_command),
    ("doctor", "Is the card healthy? PCIe link, power, throttling, ECC, memory errors, driver stack.", doctor_command),
    ("bench", "Measure the card: GEMM per dtype, memory and host bandwidth, vs the datasheet.", bench_command),
    ("burn-in", "Sustained load + memory test with telemetry; for a new or used card.", burn_in_command),
    ("monitor", "Live view of every GPU with plain hints (input-bound, memory full, throttling).", monitor_command),
    ("diagnose", "Why did it fail? Causes, how to confirm, fixes and sources for errors in a log.", diagnose_command),
    ("models", "List the shipped model presets (work offline).", models_command),
)
"""(name, one-line help, function): `estimate_command` serves five names; it reads its own name from the context."""
for _name, _help, _function in COMMANDS:
    app.command(_name, help=_help)(_function)


@app.command("serve", help="The web app and HTTP API on this machine: charts for fit, recommend, compare, TCO, doctor.")
def serve(
    host: str = typer.Option("127.0.0.1", help="Address to bind (127.0.0.1: this machine only)."),
    port: int = typer.Option(8000, help="Port."),
) -> None:
    """Start the web app (needs the web extra: pip install 'gpuwise[web]'); OpenAPI docs at /docs."""
    try:
        import uvicorn

        from gpuwise.web.app import create_app
    except ImportError:
        typer.echo("error: the web app needs the web extra: pip install 'gpuwise[web]'", err=True)
        raise typer.Exit(3) from None
    uvicorn.run(create_app(), host=host, port=port, log_level="warning")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpuwise {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """gpuwise answers with figures you can trace to a datasheet, a formula or a measurement."""


def run() -> None:
    app()


if __name__ == "__main__":
    run()
