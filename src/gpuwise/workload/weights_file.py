"""A checkpoint's exact weight bytes from its header, read from a local file or over HTTP(S) with range requests:
never the tensors themselves.

- safetensors (huggingface/safetensors, the format's README): an 8-byte little-endian header length N, then N bytes
  of JSON, one entry per tensor with ``dtype``, ``shape`` and ``data_offsets`` [start, end) into the data that
  follows; ``__metadata__`` is a map of strings, not a tensor. The rules are the library's own
  (``safetensors/src/tensor.rs``, ``read_metadata`` and ``Metadata::validate`` at 24b0b28): N at most 100,000,000;
  each tensor's bytes are its elements x the dtype's bits / 8, exactly end - start; the tensors, sorted by offset,
  lie back to back from 0; and the last one ends where the file ends.
- GGUF (ggml-org/ggml docs/gguf.md): see :mod:`gpuwise.workload.weights_gguf`.

Every reader is bounded and total: the header's length, its JSON's depth, the number of tensors, a shape's
dimensions, every name's length and every number are checked as they are read, and a violation is one
:class:`ConfigError` line that names the file (escaped) and the field. A URL is read within an overall deadline
(``deadline_s``), not only a per-read timeout.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, NamedTuple

from gpuwise.errors import ConfigError
from gpuwise.safe_io import excerpt, parse_json
from gpuwise.workload.weights_gguf import read_gguf
from gpuwise.workload.weights_source import (
    HTTP_DEADLINE_S,
    MAX_HEADER_BYTES,
    MAX_NAME_CHARS,
    MAX_TENSORS,
    MAX_WEIGHT_BYTES,
    ExactWeights,
    Source,
    product,
    quoted,
)

__all__ = ["ExactWeights", "read_weights"]

MAX_DIMS = 64  # numpy 2's NPY_MAXDIMS: no framework that loads safetensors holds a tensor of more dimensions
SAFETENSORS_BITS = {  # Dtype::bitsize in safetensors/src/tensor.rs (24b0b28)
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32, "F32": 32,
    "C64": 64, "F64": 64, "I64": 64, "U64": 64}


# ---- safetensors ------------------------------------------------------------------------------------------------
class _Span(NamedTuple):
    name: str
    dtype: str
    start: int
    end: int


def _safetensors(source: Source) -> ExactWeights:
    length = int.from_bytes(source.read(0, 8), "little")
    if length > MAX_HEADER_BYTES or length < 2:
        raise ConfigError(f"{source.label}: the header claims {length:,} bytes, more than the {MAX_HEADER_BYTES:,} "
                          "safetensors allows or too few for JSON: not a checkpoint header")
    header = _header_json(source, source.read(8, length))
    spans = [_span(source.label, name, entry) for name, entry in header.items() if name != "__metadata__"]
    _check_layout(source, spans, data_start=8 + length)
    by_dtype: Counter[str] = Counter()
    for span in spans:
        by_dtype[span.dtype] += span.end - span.start
    return ExactWeights(source.where, "safetensors", sum(by_dtype.values()), len(spans), dict(by_dtype))


def _header_json(source: Source, data: bytes) -> dict[str, Any]:
    """The header's JSON: an object of at most MAX_TENSORS entries, three levels deep at most (header, tensor,
    shape), with ``__metadata__`` a map of strings as the library requires."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source.label}: the safetensors header is not UTF-8 JSON (byte {exc.start:,})") from None
    header = parse_json(text, origin=f"{source.label}: the safetensors header (an object of "
                        "tensors, each an object with a dtype, a shape list and a data_offsets pair)", max_depth=3)
    if not isinstance(header, dict):
        raise ConfigError(f"{source.label}: the safetensors header is {type(header).__name__}, not an object of "
                          "tensors")
    if len(header) > MAX_TENSORS:
        raise ConfigError(f"{source.label}: the safetensors header lists {len(header):,} entries, more than the "
                          f"{MAX_TENSORS:,} gpuwise reads")
    metadata = header.get("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise ConfigError(f"{source.label}: __metadata__ is not a map of strings (the safetensors format's rule)")
    return header


def _span(name_of_file: str, name: str, entry: Any) -> _Span:
    field = f"{name_of_file}: tensor {quoted(name)}"
    if len(name) > MAX_NAME_CHARS:
        raise ConfigError(f"{field}: a name of {len(name):,} characters, more than {MAX_NAME_CHARS:,}")
    if not isinstance(entry, dict):
        raise ConfigError(f"{field} is {type(entry).__name__}, not an object with dtype, shape and data_offsets")
    dtype = entry.get("dtype")
    if not isinstance(dtype, str) or dtype not in SAFETENSORS_BITS:
        raise ConfigError(f"{field}: dtype {excerpt(dtype)} is not a safetensors dtype ({', '.join(SAFETENSORS_BITS)})")
    dims = _counts(field, "shape", entry.get("shape"), most=MAX_DIMS)
    start, end = _counts(field, "data_offsets", entry.get("data_offsets"), least=2, most=2)
    elements = product(dims, limit=MAX_WEIGHT_BYTES)
    if elements is None or end > MAX_WEIGHT_BYTES:
        raise ConfigError(f"{field}: shape {excerpt(dims)} or data_offsets end {end:,} is beyond "
                          f"{MAX_WEIGHT_BYTES:,} bytes: no checkpoint is that large")
    bits = elements * SAFETENSORS_BITS[dtype]
    if start > end or bits % 8 or end - start != bits // 8:
        raise ConfigError(f"{field}: data_offsets [{start:,}, {end:,}) spans {end - start:,} bytes, not its "
                          f"{elements:,} elements x {SAFETENSORS_BITS[dtype]} bits of {dtype}")
    return _Span(name, dtype, start, end)


def _counts(field: str, key: str, value: Any, *, least: int = 0, most: int) -> list[int]:
    """A list of ``least`` to ``most`` whole numbers, none negative (a shape or a pair of offsets)."""
    if not isinstance(value, list) or not least <= len(value) <= most:
        size = f"{len(value):,} items" if isinstance(value, list) else type(value).__name__
        raise ConfigError(f"{field}: {key} is {size}; a list of {least} to {most} whole numbers was expected")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in value):
        raise ConfigError(f"{field}: {key} {excerpt(value)} holds something other than whole numbers of 0 or more")
    return value


def _check_layout(source: Source, spans: list[_Span], *, data_start: int) -> None:
    """The library's rules: sorted by offsets, the tensors lie back to back from 0, and the last ends at the file's
    end (``validate``, then ``buffer_end + N_LEN + n != buffer_len`` is MetadataIncompleteBuffer)."""
    if not spans:
        raise ConfigError(f"{source.label}: the header lists no tensors, so there are no weights to count; give a "
                          "model checkpoint")
    end = 0
    for span in sorted(spans, key=lambda s: (s.start, s.end)):
        if span.start != end:
            raise ConfigError(f"{source.label}: tensor {quoted(span.name)} data_offsets start at {span.start:,}, "
                              f"not at {end:,} where the previous one ends (safetensors stores tensors back to back)")
        end = span.end
    if end == 0:
        raise ConfigError(f"{source.label}: every tensor in the header is empty: no weights to count")
    if data_start + end != source.size():
        raise ConfigError(f"{source.label}: the header's tensors end at byte {data_start + end:,}, but the file "
                          f"has {source.size():,} bytes; truncated, padded or not this header's file")


# ---- either format ----------------------------------------------------------------------------------------------
def read_weights(where: str, *, deadline_s: float = HTTP_DEADLINE_S) -> ExactWeights:
    """The exact weight bytes of a .safetensors or .gguf file or URL, from its header; a URL's every range request
    finishes within ``deadline_s`` seconds in all."""
    source = Source(where, deadline_s=deadline_s)
    if source.read(0, 4, exact=False) == b"GGUF":
        return read_gguf(source)
    if where.lower().split("?")[0].endswith(".gguf"):
        raise ConfigError(f"{source.label}: not a GGUF file (its first bytes are not 'GGUF')")
    return _safetensors(source)
