"""Entry point of the `gpuwise` command."""

from __future__ import annotations

import typer

from gpuwise import __version__
from gpuwise.cli import catalog

app = typer.Typer(
    name="gpuwise",
    help="Which GPU to buy or rent for your AI work: will it fit, how fast, what it costs, is the card healthy.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(catalog.app, name="catalog", help="Browse GPUs: datasheet figures with sources, dated prices.")


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
