"""Where a checkpoint's header comes from (a local file, or a URL read by HTTP range requests within one overall
deadline), the bounds every header reader keeps, and the names an error message quotes from a file, escaped."""

from __future__ import annotations

import os
import stat
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass

from gpuwise.errors import ConfigError
from gpuwise.safe_io import read_url_range

MAX_HEADER_BYTES = 100_000_000  # safetensors' MAX_HEADER_SIZE (tensor.rs); a GGUF header is held to the same
MAX_TENSORS = 1_000_000  # tensors (or GGUF keys) in one header: far more than any checkpoint file holds
MAX_WEIGHT_BYTES = 10**15  # 1 PB, as InferJob.weights_bytes allows: far beyond any checkpoint
MAX_NAME_CHARS = 65_535  # a tensor's or key's name: no model names a tensor at such length
HTTP_DEADLINE_S = 60.0  # the whole header of a URL, every range request together


@dataclass(frozen=True)
class ExactWeights:
    source: str
    format: str  # safetensors or gguf
    total_bytes: int
    tensors: int
    by_dtype: dict[str, int]  # bytes per stored dtype (safetensors) or GGML type (GGUF)


def label(where: str) -> str:
    """A file or URL as an error message names it: at most 200 characters, control characters escaped, and a URL
    without its user, password, query and fragment (a signed URL's token or a password is not repeated)."""
    if "://" in where:
        parts = urllib.parse.urlsplit(where[:2000])
        host = parts.hostname or ""
        where = urllib.parse.urlunsplit((parts.scheme, host + (f":{parts.port}" if _port(parts) else ""),
                                         parts.path, "", ""))
    return repr(where[:200] + ("..." if len(where) > 200 else ""))


def _port(parts: urllib.parse.SplitResult) -> int | None:
    try:
        return parts.port
    except ValueError:  # a port that is not a number: left out of the label
        return None


def quoted(name: str) -> str:
    """A tensor's or key's name from a file, for an error message: short, control characters escaped."""
    return repr(name[:80] + ("..." if len(name) > 80 else ""))


def product(dims: list[int], *, limit: int) -> int | None:
    """The product of ``dims``, or None as soon as it passes ``limit`` (no huge integer is ever built)."""
    total = 1
    for dim in dims:
        total *= dim
        if total > limit:
            return None
    return total


class Source:
    """Bytes at an offset of a local file or a URL (an HTTP range request each read, all within one deadline)."""

    def __init__(self, where: str, *, deadline_s: float = HTTP_DEADLINE_S, what: str = "--weights",
                 headers: Mapping[str, str] | None = None) -> None:
        self.where, self.label, self.headers = where, f"{what} {label(where)}", dict(headers or {})
        self.remote = where.startswith(("http://", "https://"))
        self.deadline = time.monotonic() + deadline_s
        self.file_bytes: int | None = None
        if not self.remote:
            self.file_bytes = _regular_file_bytes(where, self.label)

    def read(self, offset: int, size: int, *, exact: bool = True) -> bytes:
        """``size`` bytes at ``offset`` (``exact``: all of them, else what the file has up to there)."""
        if self.remote:
            reply = read_url_range(self.where, first=offset, size=size, deadline=self.deadline, what=self.label,
                                   headers=self.headers)
            self.file_bytes = reply.file_bytes if self.file_bytes is None else self.file_bytes
            data = reply.data
        else:
            with open(self.where, "rb") as handle:
                handle.seek(offset)
                data = handle.read(size)
        if exact and len(data) < size:
            raise ConfigError(f"{self.label}: the file ends inside its header (wanted {size:,} bytes at {offset:,});"
                              " truncated or not a checkpoint")
        return data

    def size(self) -> int:
        """The whole file's bytes, which the header's tensors must fit (a server that does not say is refused)."""
        if self.file_bytes is None:
            raise ConfigError(f"{self.label}: the server does not give the file's size (Content-Range), so its "
                              "tensors cannot be checked against it; download the file and give its path")
        return self.file_bytes


def _regular_file_bytes(where: str, name: str) -> int:
    try:
        info = os.stat(where)
    except (OSError, ValueError):
        raise ConfigError(f"{name}: no such file; give a .safetensors or .gguf file or an http(s) URL") from None
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{name} is not a regular file (a folder, device or pipe); give a .safetensors or .gguf "
                          "file")
    return info.st_size
