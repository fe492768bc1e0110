"""A GGUF checkpoint's exact weight bytes from its header (ggml-org/ggml docs/gguf.md): magic ``GGUF``, version,
tensor count and metadata count (u64), the metadata key/value pairs, then per tensor its name, dimensions, type and
offset into the data section, which starts at the header's end padded to ``general.alignment``. A tensor's bytes are
its elements over the type's block size times the block's bytes (gguf-py's ``GGML_QUANT_SIZES``).

The rules are ggml's own reader's (``gguf_init_from_reader`` in ggml/src/gguf.cpp, llama.cpp 067d44f): version 2 or
3; keys non-empty and unique; no array of arrays; ``general.alignment`` a u32 power of two; tensor names shorter than
GGML_MAX_NAME (64) and unique; at most GGML_MAX_DIMS (4) dimensions, none negative; a known type whose block divides
the first dimension; each tensor at the offset where the previous one ends, padded to the alignment. And, as
llama.cpp's model loader checks, every tensor's data lies within the file. Arrays are skipped in bulk where their
items have a fixed size, and counted against a bound where they are strings, so a huge array costs no time.

:func:`read_gguf_header` also keeps what a model's architecture is read from (workload/model/gguf_arch.py): every
scalar value, numeric arrays of up to MAX_KEPT_ITEMS items (a per-layer ``head_count_kv``), the length of string
arrays (``tokenizer.ggml.tokens``: the vocabulary), and each tensor's element count.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from gpuwise.errors import ConfigError, ProbeUnavailable
from gpuwise.workload.weights_source import (
    MAX_HEADER_BYTES,
    MAX_NAME_CHARS,
    MAX_TENSORS,
    MAX_WEIGHT_BYTES,
    ExactWeights,
    Source,
    product,
    quoted,
)

GGUF_VERSIONS = (2, 3)  # ggml refuses 1 ("no longer supported") and anything above GGUF_VERSION (3)
GGML_MAX_NAME = 64  # ggml.h; gguf.cpp refuses a tensor name of this length or more
GGML_MAX_DIMS = 4
DEFAULT_ALIGNMENT = 32  # GGUF_DEFAULT_ALIGNMENT
MAX_ARRAY_ITEMS = 2**22  # items of one array: far beyond a tokenizer's vocabulary (a few hundred thousand)
MAX_STRINGS = 2**23  # strings in all arrays together: each is read one by one
_U8, _U32, _I32, _U64, _I64 = (struct.Struct(f"<{c}") for c in "BIiQq")
_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}  # GGUF_TYPE_SIZE; 8 string, 9 array
_STRING, _ARRAY, _UINT32 = 8, 9, 4
_NUMBERS = {k: struct.Struct(f"<{c}") for k, c in zip((0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12), "BbHhIif?Qqd", strict=True)}
MAX_KEPT_ITEMS = 4096  # a numeric array kept whole (one value per layer); longer ones are skipped
MAX_KEPT_CHARS = 4096  # a string value kept (an architecture's or file's name); longer ones are skipped


class Strings(NamedTuple):
    """A string array's length (its items are skipped): ``tokenizer.ggml.tokens`` gives the vocabulary."""

    items: int


class _Cursor:
    """Little-endian fields read in order from a GGUF header, fetching more of the file as needed (bounded)."""

    def __init__(self, source: Source) -> None:
        self.source, self.offset, self.buffer, self.ended, self.strings = source, 0, bytearray(), False, 0

    def need(self, end: int) -> None:
        while end > len(self.buffer):
            if end > MAX_HEADER_BYTES:
                raise ConfigError(f"{self.source.label}: a GGUF header longer than {MAX_HEADER_BYTES:,} bytes")
            if self.ended:
                raise ConfigError(f"{self.source.label}: the file ends inside its GGUF header (at byte "
                                  f"{len(self.buffer):,}); truncated or not a checkpoint")
            want = min(max(end, 2 * len(self.buffer), 2**16), MAX_HEADER_BYTES) - len(self.buffer)
            data = self.source.read(len(self.buffer), want, exact=False)
            self.ended = len(data) < want
            self.buffer += data

    def number(self, field: struct.Struct) -> Any:
        self.need(self.offset + field.size)
        (value,) = field.unpack_from(self.buffer, self.offset)
        self.offset += field.size
        return value

    def skip(self, size: int) -> None:
        self.need(self.offset + size)
        self.offset += size

    def text(self, what: str, *, most: int) -> str:
        size = self.number(_U64)
        if size > most:
            raise ConfigError(f"{self.source.label}: {what} claims {size:,} bytes, more than {most:,}")
        self.need(self.offset + size)
        value = bytes(self.buffer[self.offset:self.offset + size]).decode("utf-8", errors="replace")
        self.offset += size
        return value

    def skip_strings(self, count: int, what: str) -> None:
        self.strings += count
        if self.strings > MAX_STRINGS:
            raise ConfigError(f"{self.source.label}: {what} brings the header's strings past {MAX_STRINGS:,}")
        offset, unpack = self.offset, _U64.unpack_from
        for _ in range(count):  # the one loop that runs per item: kept to a length read and an addition
            if offset + 8 > len(self.buffer):
                self.need(offset + 8)
            (size,) = unpack(self.buffer, offset)
            if size > MAX_HEADER_BYTES:
                raise ConfigError(f"{self.source.label}: {what} holds a string of {size:,} bytes")
            offset += 8 + size
        self.need(offset)
        self.offset = offset


def _skip_value(cursor: _Cursor, kind: int, key: str) -> None:
    what = f"key {quoted(key)}"
    if kind in _SIZES:
        cursor.skip(_SIZES[kind])
    elif kind == _STRING:
        cursor.skip_strings(1, what)
    elif kind == _ARRAY:
        inner, count = cursor.number(_U32), cursor.number(_U64)
        if count > MAX_ARRAY_ITEMS:
            raise ConfigError(f"{cursor.source.label}: {what} is an array of {count:,} items, more than the "
                              f"{MAX_ARRAY_ITEMS:,} gpuwise reads (a tokenizer has a few hundred thousand)")
        if inner in _SIZES:
            cursor.skip(count * _SIZES[inner])
        elif inner == _STRING:
            cursor.skip_strings(count, what)
        else:
            raise ConfigError(f"{cursor.source.label}: {what} is an array of type {inner}; GGUF arrays hold numbers "
                              "or strings (ggml refuses arrays of arrays)")
    else:
        raise ConfigError(f"{cursor.source.label}: {what} has unknown GGUF value type {kind}")


def _value(cursor: _Cursor, kind: int, key: str) -> Any:
    """A scalar, a short numeric array, a string array's length, or None for what is skipped (long values)."""
    if kind in _NUMBERS:
        return cursor.number(_NUMBERS[kind])
    if kind == _STRING:
        cursor.need(cursor.offset + 8)
        (size,) = _U64.unpack_from(cursor.buffer, cursor.offset)
        if size <= MAX_KEPT_CHARS:
            return cursor.text(f"key {quoted(key)}", most=MAX_KEPT_CHARS)
    elif kind == _ARRAY:
        cursor.need(cursor.offset + 12)
        inner, count = _U32.unpack_from(cursor.buffer, cursor.offset)[0], _U64.unpack_from(cursor.buffer,
                                                                                            cursor.offset + 4)[0]
        if inner in _NUMBERS and count <= MAX_KEPT_ITEMS:
            cursor.skip(12)
            return [cursor.number(_NUMBERS[inner]) for _ in range(count)]
        if inner == _STRING:
            _skip_value(cursor, kind, key)
            return Strings(count)
    _skip_value(cursor, kind, key)
    return None


def _metadata(cursor: _Cursor, pairs: int) -> dict[str, Any]:
    """The key/value pairs (long values as None, string arrays as their length), ``general.alignment`` checked."""
    values: dict[str, Any] = {}
    for index in range(pairs):
        key = cursor.text(f"key {index:,}", most=MAX_NAME_CHARS)
        if not key or key in values:
            raise ConfigError(f"{cursor.source.label}: key {index:,} {quoted(key)} is empty or repeated")
        kind = cursor.number(_U32)
        values[key] = _value(cursor, kind, key)
        if key == "general.alignment":
            alignment = values[key] if kind == _UINT32 else 0
            if alignment <= 0 or alignment & (alignment - 1):
                raise ConfigError(f"{cursor.source.label}: general.alignment is not a u32 power of two")
    return values


class TensorInfo(NamedTuple):
    name: str
    type_name: str
    offset: int
    nbytes: int
    elements: int


@dataclass(frozen=True)
class GgufHeader:
    """One GGUF file's header: its metadata (see :func:`_value`) and its tensors as the header lists them."""

    label: str
    values: dict[str, Any]
    tensors: tuple[TensorInfo, ...]


def _tensor_info(cursor: _Cursor, gguf: Any, index: int, names: set[str]) -> TensorInfo:
    label = cursor.source.label
    name = cursor.text(f"tensor {index:,}'s name", most=GGML_MAX_NAME - 1)
    if name in names:
        raise ConfigError(f"{label}: tensor {quoted(name)} appears twice")
    names.add(name)
    n_dims = cursor.number(_U32)
    if n_dims > GGML_MAX_DIMS:
        raise ConfigError(f"{label}: tensor {quoted(name)} has {n_dims:,} dimensions; GGUF allows {GGML_MAX_DIMS}")
    dims = [cursor.number(_I64) for _ in range(n_dims)]
    kind = cursor.number(_I32)
    try:
        block, size = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(kind)]
        type_name = gguf.GGMLQuantizationType(kind).name
    except (ValueError, KeyError):
        raise ConfigError(f"{label}: tensor {quoted(name)} has unknown GGML type {kind}") from None
    elements = product(dims, limit=MAX_WEIGHT_BYTES) if min(dims, default=0) >= 0 else None
    if elements is None or (dims[0] if dims else 1) % block:
        raise ConfigError(f"{label}: tensor {quoted(name)} has dimensions {dims}; they must be 0 or more, the first "
                          f"a multiple of {type_name}'s block of {block}, under {MAX_WEIGHT_BYTES:,} elements in all")
    return TensorInfo(name, type_name, cursor.number(_U64), elements // block * size, elements)


def _check_layout(cursor: _Cursor, infos: list[TensorInfo], alignment: int) -> None:
    """Each tensor where the previous one ends, padded to ``alignment`` (gguf.cpp), and all of them in the file (a
    split's part may hold none: llama.cpp's gguf-split can leave the first part metadata only)."""
    label = cursor.source.label
    if not infos:
        return
    end = 0
    for info in infos:
        if info.offset != end:
            raise ConfigError(f"{label}: tensor {quoted(info.name)} starts at data offset {info.offset:,}, not at "
                              f"{end:,} where the previous one ends (padded to {alignment})")
        end = info.offset + -(-info.nbytes // alignment) * alignment
    data_start = -(-cursor.offset // alignment) * alignment
    last = data_start + infos[-1].offset + infos[-1].nbytes
    if last > cursor.source.size():
        raise ConfigError(f"{label}: the header's tensors end at byte {last:,}, beyond the file's "
                          f"{cursor.source.size():,}; truncated, or not this header's file")


def read_gguf_header(source: Source) -> GgufHeader:
    """The checked header of a GGUF file (its magic included); a one-line ConfigError when it is not one."""
    try:
        import gguf
    except ImportError:
        raise ProbeUnavailable("a GGUF file needs the gguf package: pip install 'gguf>=0.10'") from None
    cursor = _Cursor(source)
    cursor.need(4)
    if bytes(cursor.buffer[:4]) != b"GGUF":
        raise ConfigError(f"{source.label}: not a GGUF file (its first bytes are {bytes(cursor.buffer[:4])!r}, not "
                          "b'GGUF')")
    cursor.skip(4)
    version = cursor.number(_U32)
    if version not in GGUF_VERSIONS:
        raise ConfigError(f"{source.label}: GGUF version {version:,}; ggml reads versions 2 and 3")
    tensors, pairs = cursor.number(_U64), cursor.number(_U64)
    if tensors > MAX_TENSORS or pairs > MAX_TENSORS:
        raise ConfigError(f"{source.label}: the GGUF header claims {tensors:,} tensors and {pairs:,} keys, more "
                          f"than the {MAX_TENSORS:,} gpuwise reads")
    values = _metadata(cursor, pairs)
    names: set[str] = set()
    infos = [_tensor_info(cursor, gguf, index, names) for index in range(tensors)]
    _check_layout(cursor, infos, int(values.get("general.alignment") or DEFAULT_ALIGNMENT))
    return GgufHeader(source.label, values, tuple(infos))


def by_type(infos: Sequence[TensorInfo]) -> dict[str, int]:
    """Bytes per GGML type."""
    totals: Counter[str] = Counter()
    for info in infos:
        totals[info.type_name] += info.nbytes
    return dict(totals)


def read_gguf(source: Source) -> ExactWeights:
    header = read_gguf_header(source)
    if not any(info.nbytes for info in header.tensors):
        raise ConfigError(f"{source.label}: the header lists no tensors with data, so there are no weights to count; "
                          "give a model checkpoint")
    totals = by_type(header.tensors)
    return ExactWeights(source.where, "gguf", sum(totals.values()), len(header.tensors), totals)
