"""What every command shares: consoles, the error guard, JSON output and the --catalog option."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from gpuwise.errors import GpuwiseError

P = ParamSpec("P")
T = TypeVar("T")

CatalogOption = typer.Option(
    None, "--catalog", metavar="FILE",
    help="YAML file of GPU/offer records that add to or patch the shipped catalog (repeatable).",
)
JsonOption = typer.Option(False, "--json", help="Print machine-readable JSON instead of tables.")


def stdout() -> Console:
    return Console(soft_wrap=False)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print a one-line error on stderr and return the Exit to raise."""
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"[bold red]error:[/bold red] {escape(message)}")
    return typer.Exit(code)


def output_file(path: Path | None) -> Path | None:
    """Option callback for a file a command will write: refuse before any work (and before any file changes) when
    its folder is missing or the path is a folder."""
    if path is None:
        return None
    if path.is_dir():
        raise typer.BadParameter(f"{path} is a folder; give a file name inside it, e.g. {path / 'out.json'}")
    if not path.parent.is_dir():
        raise typer.BadParameter(f"folder {path.parent} does not exist; create it first (mkdir -p {path.parent})")
    return path


def guarded(command: Callable[P, T]) -> Callable[P, T]:
    """Turn a GpuwiseError into its one-line message and exit code instead of a traceback."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return command(*args, **kwargs)
        except GpuwiseError as exc:
            raise fail(str(exc), exc.exit_code) from None
        except OSError as exc:  # a file we were told to write or read: the OS says why in one line
            raise fail(f"{exc.filename or 'file'}: {exc.strerror or exc}", 2) from None

    return wrapper


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def catalog_files(files: list[Path] | None) -> tuple[Path, ...]:
    return tuple(files or ())
