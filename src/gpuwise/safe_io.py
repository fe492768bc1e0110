"""Reading what comes from outside without trusting it, and writing files so that no reader sees half of one.

Every read is capped in size, every parsed structure in depth and (YAML) in alias expansion, and every error
message quotes at most a short excerpt of the input. Every write goes to a temporary file in the same folder,
is flushed to disk and renamed over the target, so a reader sees the old file or the new one, never a part; SIGINT,
SIGTERM and SIGHUP during the write remove the temporary file before the process exits (130, 143, 129).
A network read (an HTTP range request) is bounded in time as a whole, by a deadline, not only per read.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import reprlib
import signal
import stat
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from http.client import HTTPException, HTTPResponse
from pathlib import Path
from types import FrameType
from typing import IO, Any

import yaml

from gpuwise.errors import ConfigError, GpuwiseError, InputTooLarge
from gpuwise.hosts import GuardedRedirects

MAX_DEPTH = 32  # no config.json, scenario, catalog or snapshot gpuwise reads nests deeper than a dozen levels
MAX_YAML_ALIASES = 200
MAX_NODES = 200_000  # values in one parsed document, aliases counted each time they are used
MAX_DIGITS = 40  # digits of one number: far beyond any count or price, far below int()'s 4,300-digit limit
HTTP_READ_TIMEOUT_S = 20.0  # one network read's silence before it fails; the caller's deadline bounds the whole

_EXCERPT = reprlib.Repr()
_EXCERPT.maxlevel, _EXCERPT.maxdict, _EXCERPT.maxlist, _EXCERPT.maxstring, _EXCERPT.maxother = 2, 4, 4, 40, 40


def excerpt(value: object, limit: int = 60) -> str:
    """A short, safe repr of a user's value for an error message (huge ints, deep or shared structures included)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 3 * MAX_DIGITS:
        return f"<a {int(value.bit_length() * 0.30103) + 1:,}-digit number>"  # log10(2) digits per bit
    try:
        text = _EXCERPT.repr(value)
    except (ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def outside(fields: Iterable[tuple[str, object]], low: float, high: float) -> str | None:
    """The first number among ``fields`` (a pydantic model iterates as its fields) outside [low, high], said as an
    error message; None when every one is inside."""
    for name, value in fields:
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not low <= value <= high:
            return f"{name} {value:g} is outside {low:g} to {high:g}"
    return None


# ---- reading ---------------------------------------------------------------------------------------------
def read_text(path: Path, *, what: str, max_bytes: int) -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes``; a one-line ConfigError naming the file otherwise."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise ConfigError(f"{what} {str(path)!r} is {kind}; give a file")
        with path.open("rb") as handle:
            return decode(read_bounded(handle, what=f"{what} {str(path)!r}", max_bytes=max_bytes),
                          what=f"{what} {str(path)!r}")
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {str(path)!r}: {exc.strerror or exc}") from None


def read_bounded(handle: IO[bytes], *, what: str, max_bytes: int) -> bytes:
    """At most ``max_bytes`` from a binary stream (a file, standard input); InputTooLarge beyond that."""
    data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputTooLarge(f"{what} is larger than {max_bytes:,} bytes, more than gpuwise reads")
    return data


def decode(data: bytes, *, what: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} is not UTF-8 text (byte {exc.start:,}); save it as UTF-8") from None


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = re.compile(r"[\[\]{}]")


def json_depth(text: str) -> int:
    """Deepest nesting of ``[`` and ``{`` outside strings, in linear time (checked before any recursive parser)."""
    depth = deepest = 0
    for bracket in _BRACKETS.findall(_JSON_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise ConfigError(f"a number of {len(text):,} digits; no figure gpuwise reads has more than {MAX_DIGITS}")
    return int(text)


def _no_constant(name: str) -> float:
    raise ConfigError(f"{name} is not a number gpuwise accepts (JSON has no NaN or Infinity)")


def _infinity(name: str) -> float:
    if name == "NaN":
        return _no_constant(name)
    return float(name)  # "Infinity" / "-Infinity"


def parse_json(text: str, *, origin: str, max_depth: int = MAX_DEPTH, infinity: bool = False) -> Any:
    """JSON with bounded depth and number length, no NaN (nor Infinity unless ``infinity``: transformers writes
    ``Infinity`` into some config.json files, e.g. Mamba-2's time_step_limit); a one-line ConfigError naming
    ``origin``."""
    if json_depth(text) > max_depth:
        raise InputTooLarge(f"{origin}: nested more than {max_depth} levels deep")
    try:
        return json.loads(text, parse_int=_bounded_int, parse_constant=_infinity if infinity else _no_constant)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{origin}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except GpuwiseError as exc:
        raise ConfigError(f"{origin}: {exc}") from None
    except (ValueError, RecursionError) as exc:  # float overflow text, a deep structure the scan missed
        raise ConfigError(f"{origin}: not valid JSON ({excerpt(str(exc))})") from None


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader (no arbitrary objects) that refuses deep nesting and many aliases while composing."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0
        self.aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_YAML_ALIASES:
                raise InputTooLarge(f"more than {MAX_YAML_ALIASES} YAML aliases (*name)")
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise InputTooLarge(f"nested more than {MAX_DEPTH} levels deep")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def _int_or_refuse(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    digits = str(node.value).lstrip("+-")
    if len(digits.replace("_", "")) > MAX_DIGITS:
        raise ConfigError(f"a number of {len(digits):,} digits; no figure gpuwise reads has more than {MAX_DIGITS}")
    return yaml.SafeLoader.construct_yaml_int(loader, node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _int_or_refuse)


def parse_yaml(text: str, *, origin: str) -> Any:
    """YAML through a bounded safe loader; the parsed value is walked once more so that aliases cannot expand
    past :data:`MAX_NODES` values in whatever reads it later."""
    try:
        data = yaml.load(text, Loader=_BoundedLoader)
    except InputTooLarge as exc:
        raise InputTooLarge(f"{origin}: {exc}") from None
    except GpuwiseError as exc:
        raise ConfigError(f"{origin}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"{origin}:{where} is not valid YAML ({excerpt(getattr(exc, 'problem', None) or exc)})"
                          ) from None
    except (ValueError, RecursionError, OverflowError) as exc:
        raise ConfigError(f"{origin}: unreadable value ({excerpt(str(exc))})") from None
    check_size(data, origin=origin)
    return data


def check_size(data: Any, *, origin: str, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> None:
    """Refuse a parsed structure deeper than ``max_depth`` or with more than ``max_nodes`` values (a shared or
    recursive one counts every time it is reached). Iterative: bounded by ``max_nodes`` whatever the input."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    seen = 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > max_nodes or depth > max_depth:
            what = f"more than {max_nodes:,} values" if seen > max_nodes else f"nested more than {max_depth} deep"
            raise InputTooLarge(f"{origin}: {what}")
        if isinstance(value, dict):
            stack += [(v, depth + 1) for v in value.values()]
            stack += [(k, depth + 1) for k in value if isinstance(k, (tuple, frozenset))]
        elif isinstance(value, (list, tuple)):
            stack += [(v, depth + 1) for v in value]


# ---- reading over HTTP ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class UrlRange:
    data: bytes
    file_bytes: int | None  # the whole file's size as the server states it (Content-Range, or a 200's length)


def read_url_range(url: str, *, first: int, size: int, deadline: float, what: str,
                   headers: Mapping[str, str] | None = None) -> UrlRange:
    """At most ``size`` bytes of ``url`` from byte ``first`` (one HTTP range request), finished by ``deadline`` (a
    ``time.monotonic()`` value) whatever the server's pace: a server that drips one byte a second is cut off at the
    deadline, not only after ``HTTP_READ_TIMEOUT_S`` of silence. The request runs in a daemon thread that the caller
    stops waiting for at the deadline; the thread itself ends at its next chunk or read timeout. ``headers`` (a token)
    go to ``url``'s host only, never along a redirect (urllib's unredirected headers)."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise ConfigError(f"{what}: the deadline for reading it passed; try again, or download the file and give "
                          "its path")
    outcome: list[UrlRange | Exception] = []
    stop = threading.Event()

    def work() -> None:
        try:
            outcome.append(_fetch_range(url, first, size, min(HTTP_READ_TIMEOUT_S, remaining), stop, what,
                                        headers or {}))
        except Exception as exc:  # raised again in the caller's thread, whatever it is
            outcome.append(exc)

    worker = threading.Thread(target=work, name="gpuwise-url-range", daemon=True)
    worker.start()
    worker.join(remaining)
    if worker.is_alive() or not outcome:
        stop.set()
        raise ConfigError(f"{what}: the server had not sent {size:,} bytes from byte {first:,} when the deadline "
                          f"for reading it passed, {remaining:.3g} s after this request began; it is too slow or "
                          "stalled: try again, or download the file and give its path")
    if isinstance(outcome[0], Exception):
        raise outcome[0]
    return outcome[0]


def _opener() -> urllib.request.OpenerDirector:
    """urllib's HTTP(S) handlers and proxies, and redirects only to http(s) and, from a public host, only to public
    hosts (hosts.GuardedRedirects)."""
    opener = urllib.request.OpenerDirector()
    for handler in (urllib.request.ProxyHandler(), urllib.request.UnknownHandler(), urllib.request.HTTPHandler(),
                    urllib.request.HTTPSHandler(), urllib.request.HTTPDefaultErrorHandler(),
                    GuardedRedirects(), urllib.request.HTTPErrorProcessor()):
        opener.add_handler(handler)
    return opener


def _fetch_range(url: str, first: int, size: int, timeout: float, stop: threading.Event, what: str,
                 headers: Mapping[str, str]) -> UrlRange:
    request = urllib.request.Request(url, headers={"Range": f"bytes={first}-{first + size - 1}",
                                                   "Accept-Encoding": "identity"})
    for name, value in headers.items():
        request.add_unredirected_header(name, value)
    try:
        with _opener().open(request, timeout=timeout) as response:
            file_bytes = _file_bytes(response, first, what)
            chunks: list[bytes] = []
            got = 0
            while got < size and not stop.is_set():
                chunk = response.read1(min(size - got, 2**20))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
            return UrlRange(b"".join(chunks)[:size], file_bytes)
    except urllib.error.HTTPError as exc:
        with contextlib.closing(exc):  # its response's socket, which nothing else closes
            if exc.code == 416:  # asked from the file's end or beyond: nothing there
                return UrlRange(b"", _range_total(exc.headers.get("Content-Range", "")))
            raise ConfigError(f"{what}: the server answered HTTP {exc.code} {excerpt(str(exc.reason))}") from None
    except (OSError, HTTPException, ValueError) as exc:
        raise ConfigError(f"{what}: cannot read it ({excerpt(str(exc), 120)})") from None


_CONTENT_RANGE = re.compile(r"bytes (\d{1,20})-(\d{1,20})/(\d{1,20}|\*)")


def _file_bytes(response: HTTPResponse, first: int, what: str) -> int | None:
    """The file's size from a 206's Content-Range (which must start where asked) or a 200's Content-Length."""
    if response.status == 200:
        if first > 0:
            raise ConfigError(f"{what}: the server does not answer range requests (HTTP 200 for bytes from "
                              f"{first:,}); download the file and give its path")
        length = response.getheader("Content-Length", "")
        return int(length) if length.isdigit() and len(length) <= 20 else None
    if response.status != 206:
        raise ConfigError(f"{what}: the server answered HTTP {response.status}, not 206 (a range of the file)")
    match = _CONTENT_RANGE.fullmatch(response.getheader("Content-Range", "").strip())
    if match is None or int(match[1]) != first:
        raise ConfigError(f"{what}: the server sent another range than bytes from {first:,} (Content-Range "
                          f"{excerpt(response.getheader('Content-Range'))})")
    return None if match[3] == "*" else int(match[3])


def _range_total(header: str) -> int | None:
    match = re.fullmatch(r"bytes \*/(\d{1,20})", header.strip())
    return int(match[1]) if match else None


# ---- writing ---------------------------------------------------------------------------------------------
def check_writable(path: Path, *, what: str) -> None:
    """Refuse, before any work, a target that is a folder, a link, a device or a pipe (an atomic rename would replace
    it with a plain file: /dev/null among them), or lies in a folder that does not exist."""
    if path.is_dir():
        raise ConfigError(f"{what} {str(path)!r} is a folder; give a file name inside it, e.g. {path / 'out.json'}")
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise ConfigError(f"{what} {str(path)!r} is a link, device or pipe, not a plain file; give a file path "
                          "(gpuwise writes files whole, by renaming a finished copy over the target)")
    if not path.parent.is_dir():
        raise ConfigError(f"folder {str(path.parent)!r} for the {what} does not exist; create it first "
                          f"(mkdir -p {path.parent})")


def atomic_write_text(path: Path, text: str, *, what: str) -> None:
    """Write ``text`` to ``path`` atomically: a temporary file in the same folder, fsync, rename over the target."""
    atomic_write(path, lambda handle: handle.write(text.encode("utf-8")), what=what)


def _stop(signum: int, frame: FrameType | None) -> None:
    del frame
    raise SystemExit(128 + signum)  # 143 for SIGTERM, as a shell reports a process the signal ended


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """While a file is written, SIGTERM and SIGHUP raise SystemExit(128 + signal number) like SIGINT raises
    KeyboardInterrupt, so the writer's cleanup runs and no temporary file stays behind. Python installs handlers only
    in the main thread; elsewhere (a server's worker) this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)) if sig}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


def atomic_write(path: Path, write: Callable[[IO[bytes]], object], *, what: str) -> None:
    check_writable(path, what=what)
    with signals_raise():
        _atomic_write(path, write, what=what)


def _atomic_write(path: Path, write: Callable[[IO[bytes]], object], *, what: str) -> None:
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644
    try:
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise ConfigError(f"cannot write {what} {str(path)!r}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise ConfigError(f"cannot write {what} {str(path)!r}: {exc.strerror or exc}") from None
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    _fsync_folder(path.parent)


def _fsync_folder(folder: Path) -> None:
    """Make the rename itself durable (POSIX); a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):  # a filesystem that cannot sync a folder keeps the rename as it is
            os.fsync(fd)
    finally:
        os.close(fd)
