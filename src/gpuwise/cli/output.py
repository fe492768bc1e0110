"""What every command prints: tables on a console, JSON for scripts, and errors as one line (or one JSON object)."""

from __future__ import annotations

import functools
import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from gpuwise.errors import GpuwiseError, exit_code_for

MAX_ERROR_CHARS = 600


def stdout() -> Console:
    return Console(soft_wrap=False)


def finite(value: Any) -> Any:
    """JSON has no NaN or Infinity: a figure that is not finite (a saturated queue's latency) is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(finite(value), indent=2, ensure_ascii=False, allow_nan=False) + "\n")


def emit_error(message: str, code: int, *, as_json: bool) -> None:
    """One line on stderr; with ``--json`` also ``{"error": message, "exit_code": code}`` as one line on stdout."""
    line = " ".join(message.split())
    if len(line) > MAX_ERROR_CHARS:  # a usage error quotes the value typed: never echo more than an excerpt
        line = line[: MAX_ERROR_CHARS - 3] + "..."
    if as_json:
        sys.stdout.write(json.dumps({"error": line, "exit_code": code}, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"[bold red]error:[/bold red] {escape(line)}")


@contextmanager
def guard(*, as_json: bool) -> Iterator[None]:
    """Turn errors into their one-line message and exit code instead of a traceback."""
    try:
        yield
    except typer.Exit:
        raise
    except GpuwiseError as exc:
        emit_error(str(exc), exit_code_for(exc), as_json=as_json)
        raise typer.Exit(exit_code_for(exc)) from None
    except OSError as exc:  # a file we were told to read or write: the OS says why in one line
        emit_error(f"{exc.filename or 'file'}: {exc.strerror or exc}", 2, as_json=as_json)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        sys.stderr.write("stopped\n")
        raise typer.Exit(130) from None
    except Exception as exc:
        if os.environ.get("GPUWISE_DEBUG"):
            raise
        emit_error(f"internal error ({type(exc).__name__}: {exc}); this is a bug in gpuwise: please report the "
                   "command (GPUWISE_DEBUG=1 shows the traceback)", 1, as_json=as_json)
        raise typer.Exit(1) from None


P = ParamSpec("P")
T = TypeVar("T")


def guarded(command: Callable[P, T]) -> Callable[P, T]:
    """The :func:`guard` of a hand-written typer command (its ``as_json`` keyword says whether to answer in JSON)."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        with guard(as_json=bool(kwargs.get("as_json"))):
            return command(*args, **kwargs)

    return wrapper
