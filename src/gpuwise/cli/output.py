"""What every command prints: tables on a console, JSON for scripts, and errors as one line (or one JSON object).

Two promises hold for every command, whatever it prints:

- **Text is text.** An error message may quote a file's name or contents; before it reaches a terminal or a JSON
  line it loses its control characters (ESC, so no colour, cursor or OSC hyperlink sequence; C1 bytes; carriage
  returns), bidirectional overrides and lone surrogates (:func:`printable`), and rich markup in it is escaped.
- **A full or closed standard output is not a traceback.** When the answer cannot be written (``> /dev/full``,
  a disk quota, a reader that closed the pipe, a process started with ``>&-``), standard output is pointed at the
  null device so nothing is tried again at exit, and the command ends with a defined code
  (:func:`answer_not_written`): 1 and one line on stderr, or 1 quietly for a closed pipe (the reader chose to stop,
  as click does); an error being reported keeps its own code and still says its line on stderr.
"""

from __future__ import annotations

import errno
import functools
import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from gpuwise.errors import GpuwiseError, exit_code_for
from gpuwise.text import printable as _printable

MAX_ERROR_CHARS = 600
WRITE_FAILED = 1  # the exit code of a command whose answer could not be written to standard output
# errors of a write that cannot succeed later; a file gpuwise writes goes through safe_io, which names the file
# (ConfigError), so one of these with no file name is a standard stream's
_STREAM_ERRNOS = frozenset({errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
def stdout() -> Console:
    return Console(soft_wrap=False)


def printable(text: str) -> str:
    """``text`` as one line that cannot move a terminal's cursor, colour it, link it or reorder what follows
    (gpuwise/text.py, the rule every reader applies too)."""
    return _printable(text, one_line=True)


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


def stream_failed(exc: BaseException) -> bool:
    """Whether ``exc`` is a standard stream that cannot take more: full, over quota, or a pipe nobody reads."""
    return isinstance(exc, OSError) and exc.errno in _STREAM_ERRNOS and exc.filename is None


def _silence_stdout() -> None:
    """Point standard output at the null device: what is still buffered would fail again at exit, where the
    interpreter prints 'Exception ignored' and exits 120."""
    try:
        target = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):  # not a real file (a test's capture): nothing fails at exit
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, target)
    os.close(null)


def _say(line: str) -> None:
    """``error: line`` on stderr; a stderr that cannot take it either is left alone (nowhere else to say it)."""
    with suppress(OSError):
        Console(stderr=True, highlight=False, soft_wrap=True).print(f"[bold red]error:[/bold red] {escape(line)}")


def answer_not_written(exc: OSError) -> int:
    """The exit code of a command whose answer could not be written (:data:`WRITE_FAILED`), after one line on
    stderr that says why; a closed pipe ends quietly."""
    _silence_stdout()
    if exc.errno != errno.EPIPE:
        _say(f"could not write the answer to standard output: {os.strerror(exc.errno or errno.EIO)}")
    return WRITE_FAILED


def emit_error(message: str, code: int, *, as_json: bool) -> None:
    """One line on stderr; with ``--json`` also ``{"error": message, "exit_code": code}`` as one line on stdout
    (where standard output cannot take it, the line on stderr still says the error)."""
    line = printable(message)
    if len(line) > MAX_ERROR_CHARS:  # a usage error quotes the value typed: never echo more than an excerpt
        line = line[: MAX_ERROR_CHARS - 3] + "..."
    if as_json:
        try:
            sys.stdout.write(json.dumps({"error": line, "exit_code": code}, ensure_ascii=False) + "\n")
            sys.stdout.flush()
        except OSError as exc:
            if not stream_failed(exc):
                raise
            _silence_stdout()
    _say(line)


def open_stdout() -> bool:
    """Whether the process has a standard output; one started without (``>&-``) gets the null device, so that
    commands write as usual and :func:`finish` says the answer went nowhere."""
    if sys.stdout is not None:
        return True
    sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 -- the process's stdout until it exits
    return False


def finish(code: int, *, had_stdout: bool = True) -> int:
    """The process's exit code once what is buffered for standard output is written: ``code``, or
    :data:`WRITE_FAILED` where a successful answer could not be written (or there was no standard output). A
    command that already failed keeps its code, and its own line on stderr says why."""
    try:
        if not had_stdout:
            raise OSError(errno.EBADF, os.strerror(errno.EBADF))
        sys.stdout.flush()
    except OSError as exc:
        if not (stream_failed(exc) or exc.errno == errno.EBADF):
            raise
        if code != 0:
            _silence_stdout()
            return code
        return answer_not_written(exc)
    return code


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
        if stream_failed(exc):
            raise typer.Exit(answer_not_written(exc)) from None
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
