"""A checkpoint's exact weight bytes from its header, read from a local file or over HTTP(S) with range requests:
never the tensors themselves.

- safetensors (huggingface/safetensors, the format's README): an 8-byte little-endian header length N, then N bytes
  of JSON, one entry per tensor with ``dtype``, ``shape`` and ``data_offsets`` [start, end) into the data that
  follows; ``__metadata__`` is not a tensor. A tensor's bytes are end - start, checked against shape x dtype size.
- GGUF (ggml-org/ggml docs/gguf.md): magic ``GGUF``, version, tensor count and metadata count (u64), the metadata
  key/value pairs, then per tensor its name, dimensions, type and offset. A tensor's bytes are its elements over
  the type's block size times the block's bytes (gguf-py's ``GGML_QUANT_SIZES``).

Every length read is bounded (MAX_HEADER_BYTES), and a header that claims more, ends early, or has the wrong magic
is a one-line error.
"""

from __future__ import annotations

import json
import math
import struct
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.errors import ConfigError, ProbeUnavailable

MAX_HEADER_BYTES = 100 * 2**20
MAX_TENSORS = 1_000_000
HTTP_TIMEOUT_S = 20.0
SAFETENSORS_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U64": 8,
                     "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1}


@dataclass(frozen=True)
class ExactWeights:
    source: str
    format: str  # safetensors or gguf
    total_bytes: int
    tensors: int
    by_dtype: dict[str, int]  # bytes per stored dtype (safetensors) or GGML type (GGUF)


class _Source:
    """Bytes at an offset of a local file or a URL (an HTTP range request each read)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.remote = where.startswith(("http://", "https://"))
        if not self.remote and not Path(where).is_file():
            raise ConfigError(f"--weights {where[:200]}: no such file; give a .safetensors or .gguf file or URL")

    def read(self, offset: int, size: int, *, exact: bool = True) -> bytes:
        """``size`` bytes at ``offset`` (``exact``: all of them, else what the file has up to there)."""
        if size < 0 or size > MAX_HEADER_BYTES:
            raise ConfigError(f"{self.where[:200]}: the header claims {size:,} bytes, more than the "
                              f"{MAX_HEADER_BYTES:,} read: not a checkpoint header")
        if not self.remote:
            with open(self.where, "rb") as handle:
                handle.seek(offset)
                data = handle.read(size)
        else:
            request = urllib.request.Request(self.where, headers={"Range": f"bytes={offset}-{offset + size - 1}"})
            try:
                with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
                    data = response.read(size) if response.status == 206 or offset == 0 else b""
            except OSError as exc:
                raise ConfigError(f"--weights {self.where[:200]}: {exc}") from None
        if exact and len(data) < size:
            raise ConfigError(f"{self.where[:200]}: the file ends inside its header (wanted {size:,} bytes at "
                              f"{offset:,}); truncated or not a checkpoint")
        return data


def _safetensors(source: _Source) -> ExactWeights:
    (length,) = struct.unpack("<Q", source.read(0, 8))
    try:
        header = json.loads(source.read(8, length))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise ConfigError(f"{source.where[:200]}: the safetensors header is not JSON") from None
    if not isinstance(header, dict) or len(header) > MAX_TENSORS:
        raise ConfigError(f"{source.where[:200]}: the safetensors header is not a map of tensors")
    by_dtype: Counter[str] = Counter()
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        by_dtype[str(entry.get("dtype"))] += _safetensors_bytes(source.where, name, entry)
    return ExactWeights(source.where, "safetensors", sum(by_dtype.values()), sum(1 for k in header if
                                                                                  k != "__metadata__"),
                        dict(by_dtype))


def _safetensors_bytes(where: str, name: str, entry: Any) -> int:
    try:
        start, end = (int(x) for x in entry["data_offsets"])
        elements = math.prod(int(d) for d in entry["shape"])
        size = SAFETENSORS_BYTES[entry["dtype"]]
    except (KeyError, TypeError, ValueError):
        raise ConfigError(f"{where[:200]}: tensor {str(name)[:80]!r} has no valid dtype, shape and offsets") from None
    if end - start != elements * size or start < 0:
        raise ConfigError(f"{where[:200]}: tensor {str(name)[:80]!r} spans {end - start:,} bytes, not its "
                          f"{elements:,} x {size}")
    return end - start


class _Cursor:
    """Little-endian fields read in order from a GGUF header, fetching more bytes as needed (bounded)."""

    def __init__(self, source: _Source) -> None:
        self.source, self.offset, self.buffer, self.base = source, 0, b"", 0

    def take(self, size: int) -> bytes:
        end = self.offset + size
        if end - self.base > len(self.buffer):
            want = min(max(end - self.base, 2 * len(self.buffer), 2**16), MAX_HEADER_BYTES)
            if end - self.base > want:
                raise ConfigError(f"{self.source.where[:200]}: a GGUF header longer than {MAX_HEADER_BYTES:,} bytes")
            self.buffer = _grow(self.source, self.base, want)
        data = self.buffer[self.offset - self.base:end - self.base]
        if len(data) < size:
            raise ConfigError(f"{self.source.where[:200]}: the file ends inside its GGUF header")
        self.offset = end
        return data

    def number(self, fmt: str) -> Any:
        return struct.unpack("<" + fmt, self.take(struct.calcsize(fmt)))[0]

    def text(self) -> str:
        return self.take(self.number("Q")).decode("utf-8", errors="replace")


def _grow(source: _Source, base: int, want: int) -> bytes:
    """As much of the file as is there, up to ``want`` bytes from ``base``."""
    return source.read(base, want, exact=False)


_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


def _skip_value(cursor: _Cursor, kind: int) -> None:
    if kind in _SCALARS:
        cursor.number(_SCALARS[kind])
    elif kind == 8:
        cursor.text()
    elif kind == 9:
        inner, count = cursor.number("I"), cursor.number("Q")
        if count > MAX_HEADER_BYTES:
            raise ConfigError(f"{cursor.source.where[:200]}: a GGUF array claims {count:,} items")
        for _ in range(count):
            _skip_value(cursor, inner)
    else:
        raise ConfigError(f"{cursor.source.where[:200]}: unknown GGUF value type {kind}")


def _gguf(source: _Source) -> ExactWeights:
    try:
        import gguf
    except ImportError:
        raise ProbeUnavailable("--weights of a GGUF file needs the gguf package: pip install 'gguf>=0.10'") from None
    cursor = _Cursor(source)
    if cursor.take(4) != b"GGUF":
        raise ConfigError(f"{source.where[:200]}: not a GGUF file (its first bytes are not 'GGUF')")
    cursor.number("I")  # version
    tensors, pairs = cursor.number("Q"), cursor.number("Q")
    if tensors > MAX_TENSORS or pairs > MAX_TENSORS:
        raise ConfigError(f"{source.where[:200]}: the GGUF header claims {tensors:,} tensors and {pairs:,} keys")
    for _ in range(pairs):
        cursor.text()
        _skip_value(cursor, cursor.number("I"))
    by_type: Counter[str] = Counter()
    for _ in range(tensors):
        cursor.text()
        dims = [cursor.number("Q") for _ in range(cursor.number("I"))]
        kind, _offset = cursor.number("I"), cursor.number("Q")
        try:
            block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(kind)]
            name = gguf.GGMLQuantizationType(kind).name
        except (ValueError, KeyError):
            raise ConfigError(f"{source.where[:200]}: unknown GGML tensor type {kind}") from None
        by_type[name] += math.prod(dims) // block * size
    return ExactWeights(source.where, "gguf", sum(by_type.values()), tensors, dict(by_type))


def read_weights(where: str) -> ExactWeights:
    """The exact weight bytes of a .safetensors or .gguf file or URL, from its header."""
    source = _Source(where)
    start = source.read(0, 4) if source.remote or Path(where).stat().st_size >= 4 else b""
    if start == b"GGUF":
        return _gguf(source)
    if where.lower().split("?")[0].endswith(".gguf"):
        raise ConfigError(f"{where[:200]}: not a GGUF file (its first bytes are not 'GGUF')")
    return _safetensors(source)
