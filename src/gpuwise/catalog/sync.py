"""Cloud offers from the price files users already have: SkyPilot's catalog CSVs and dstack gpuhunt's offer CSVs.

- SkyPilot (skypilot-org/skypilot-catalog ``catalogs/v8/<cloud>/vms.csv``): a row per instance type and region
  (and zone), ``InstanceType, AcceleratorName, AcceleratorCount, vCPUs, MemoryGiB, Price, SpotPrice, Region``, the
  header's order differing per cloud; GCP lists attachable GPUs on rows of their own (no InstanceType: the price of
  the GPUs alone, the host VM billed apart), and CPU-only rows have no accelerator. The cloud is the folder's name.
- gpuhunt (dstackai/gpuhunt ``storage.py``, ``CATALOG_V2_FIELDS``): ``instance_name, location, price, cpu, memory,
  gpu_count, gpu_name, gpu_memory, spot, disk_size, gpu_vendor, flags[, cpu_arch, provider_data]``, a spot offer on
  a row of its own; the provider is the file's name (``<provider>.csv``).

Each GPU row becomes an offer (on-demand, and spot where priced), its GPU matched by name and memory
(:mod:`gpuwise.catalog.sync_match`). Zones of a region are folded into the region's cheapest zone (recommend ranks
regions, not zones). Files are streamed: memory is bounded by :data:`MAX_SYNCED_OFFERS`, not by the file's size.
A row that cannot be an offer (no GPU, no price, a price or count out of range, an over-long name) is counted by
reason, never guessed; names are kept as printable text. ``as_of`` is a row's own ``as_of``/``date`` column, else
``--as-of``, else a date in the file's path (gpuhunt's catalog version ``YYYYMMDD-N``), else the sync date (noted).
"""

from __future__ import annotations

import csv
import datetime as dt
import itertools
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from gpuwise.catalog.catalog import Catalog, load_catalog
from gpuwise.catalog.loading import MAX_OVERRIDE_BYTES, SYNCED_PREFIX, discover_override_files, user_catalog_dir
from gpuwise.catalog.sync_match import matcher
from gpuwise.catalog.sync_rows import (
    MAX_SYNCED_OFFERS,
    GcpJoin,
    Reading,
    Row,
    Skip,
    Synced,
    gpuhunt_row,
    offer_id_of,
    skypilot_row,
    slug,
)
from gpuwise.errors import CatalogError, ConfigError, InputTooLarge
from gpuwise.safe_io import atomic_write, check_writable
from gpuwise.text import printable

__all__ = ["MAX_SYNCED_OFFERS", "SYNCED_FILE", "Synced", "matching_catalog", "offer_id_of", "read_offers",
           "sync_target", "write_offers"]

MAX_FILE_BYTES = 200 * 2**20
MAX_LINE_CHARS = 1_000_000  # a CSV line; SkyPilot's longest (GpuInfo) are a few hundred characters
MAX_ROWS = 2_000_000
MAX_FILES = 200
SYNCED_FILE = "synced-offers.yaml"
SKYPILOT = ("InstanceType", "AcceleratorName", "AcceleratorCount", "Price", "Region")
GPUHUNT = ("instance_name", "location", "price", "gpu_count", "gpu_name", "spot")


# ---- reading files ----------------------------------------------------------------------------------------
def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ConfigError(f"{path}: no such file or folder; give a SkyPilot vms.csv, a gpuhunt <provider>.csv, or a "
                          "folder of them")
    found = sorted(itertools.islice((p for p in path.rglob("*.csv") if p.is_file()), MAX_FILES + 1))
    if len(found) > MAX_FILES:
        raise ConfigError(f"{path}: more than {MAX_FILES} CSV files; sync a part of it")
    return found


def _lines(handle: IO[str], origin: Path) -> Iterator[str]:
    """The file's lines, each at most :data:`MAX_LINE_CHARS`, all of them at most :data:`MAX_FILE_BYTES` chars."""
    total = 0
    while line := handle.readline(MAX_LINE_CHARS + 1):
        total += len(line)
        if len(line) > MAX_LINE_CHARS:
            raise InputTooLarge(f"{origin}: a line longer than {MAX_LINE_CHARS:,} characters; not a price file")
        if total > MAX_FILE_BYTES:
            raise InputTooLarge(f"{origin}: larger than {MAX_FILE_BYTES:,} bytes, more than gpuwise reads")
        yield line


def _rows(path: Path) -> Iterator[tuple[list[str], Row | None]]:
    """The header (with no row), then each row of a CSV file, streamed; a malformed file is a one-line ConfigError."""
    if path.stat().st_size > MAX_FILE_BYTES:
        raise InputTooLarge(f"{path}: larger than {MAX_FILE_BYTES:,} bytes, more than gpuwise reads")
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(_lines(handle, path))
        try:
            header = [name.strip() for name in reader.fieldnames or ()]
            reader.fieldnames = header
            yield header, None
            for number, row in enumerate(reader, 1):
                if number > MAX_ROWS:
                    raise InputTooLarge(f"{path}: more than {MAX_ROWS:,} rows")
                yield header, row
        except csv.Error as exc:
            raise ConfigError(f"{path}: line {reader.line_num + 1:,} is not CSV ({exc})") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not UTF-8 text (near line {reader.line_num + 1:,}); save it as UTF-8") from None


_PATH_DATE = re.compile(r"(20\d\d)-?(\d\d)-?(\d\d)(?:[-_]\d+)?")


def path_date(path: Path) -> dt.date | None:
    """A date a folder or file name carries: gpuhunt's catalog versions are ``YYYYMMDD-<run>``."""
    for part in reversed(path.parts):
        found = _PATH_DATE.fullmatch(Path(part).stem)
        if found:
            try:
                day = dt.date(*map(int, found.groups()))
            except ValueError:
                continue
            return day if day <= dt.date.today() else None
    return None


# ---- files to offers --------------------------------------------------------------------------------------
def _kind(header: list[str]) -> Callable[[Reading, Row], None] | None:
    if all(col in header for col in SKYPILOT):
        return skypilot_row
    return gpuhunt_row if all(col in header for col in GPUHUNT) else None


def _read_file(reading: Reading, file: Path, *, named: bool) -> bool:
    """Offers of one file into ``reading.out``; False for a CSV of another kind inside a folder (SkyPilot's
    images.csv); a file named vms.csv or given by name must be of a known kind."""
    rows = _rows(file)
    header = next(rows)[0]
    handle = _kind(header)
    if handle is None:
        if file.name.endswith("vms.csv") or named:
            raise ConfigError(f"{file}: not a SkyPilot vms.csv (needs {', '.join(SKYPILOT)}) or a gpuhunt CSV "
                              f"(needs {', '.join(GPUHUNT)})")
        return False
    stream: Iterator[Row] = (row for _, row in rows if row is not None)
    if reading.provider == "gcp" and handle is skypilot_row:
        join = GcpJoin()
        stream = _chain((out for row in stream for out in join.feed(row)), join.rest)
    for row in stream:
        try:
            handle(reading, row)
        except Skip as skip:
            reading.out.skipped[str(skip)] += 1
    return True


def _chain(first: Iterator[Row],
           then: Callable[[], Iterator[Row]]) -> Iterator[Row]:
    yield from first
    yield from then()


def _provider(file: Path) -> str:
    name = file.parent.name if file.stem == "vms" else file.stem
    return slug(name)[:60].rstrip("-") or "unknown"


def _source(file: Path) -> str:
    text = printable(str(file))
    return text if 3 <= len(text) <= 300 else f"...{text[-297:]}" if len(text) > 300 else f"./{text}"


def read_offers(path: Path | str, catalog: Catalog, *, as_of: dt.date | None = None) -> Synced:
    """Every GPU offer in ``path`` (a file or a folder of them); a CSV of another shape is a one-line error.
    ``as_of`` dates the rows that carry no date of their own."""
    out, match, today = Synced(), matcher(catalog), dt.date.today()
    undated = 0
    for file in _files(Path(path)):
        day = as_of or path_date(file)
        reading = Reading(out, match, _provider(file), _source(file), day or today)
        if _read_file(reading, file, named=Path(path).is_file()):
            out.files.append(str(file))
            undated += day is None and reading.dated_by_default > 0
    if not out.files:
        raise CatalogError(f"{path}: no SkyPilot vms.csv or gpuhunt CSV in it")
    if undated:
        out.notes.append(f"{undated} file(s) carry no date: their offers are dated by this sync ({today}); give "
                         "--as-of DATE (when the files were published) to date them yourself")
    return out


# ---- writing ----------------------------------------------------------------------------------------------
def sync_target(target: Path | str | None) -> Path:
    """Where a sync writes: ``target`` (a file in an existing folder) or the user catalog folder's
    :data:`SYNCED_FILE`, that folder created when missing; checked before any reading."""
    if target is not None:
        path = Path(target)
    else:
        path = user_catalog_dir() / SYNCED_FILE
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create the user catalog folder {str(path.parent)!r}: "
                              f"{exc.strerror or exc}") from None
    check_writable(path, what="synced offers")
    return path


def write_offers(found: Synced, path: Path) -> int:
    """Write the offers as JSON (YAML's subset, read by the loader's JSON parser), one record a line, streamed;
    the bytes written, at most the loader's :data:`MAX_OVERRIDE_BYTES` (refused, nothing written, beyond)."""
    written = 0

    def write(handle: IO[bytes]) -> None:
        nonlocal written
        written = handle.write(SYNCED_PREFIX.encode())
        for number, offer in enumerate(found.records()):
            line = json.dumps(offer.model_dump(mode="json", exclude_none=True), separators=(",", ":"),
                              ensure_ascii=False)
            data = (",\n" if number else "\n").encode() + line.encode()
            if written + len(data) + 4 > MAX_OVERRIDE_BYTES:
                raise InputTooLarge(f"the synced offers would take more than {MAX_OVERRIDE_BYTES:,} bytes, more than "
                                    "every command reads; sync a part at a time (a cloud's folder) with --to FILE")
            written += handle.write(data)
        written += handle.write(b"\n]}\n")

    atomic_write(path, write, what="synced offers")
    return written


def matching_catalog(catalog_files: tuple[Path | str, ...] = ()) -> Catalog:
    """The catalog a sync matches names against: the user's files and ``catalog_files``, not a previous sync's
    output (a broken one must not stop the sync that replaces it)."""
    files = [p for p in discover_override_files((), use_user_dir=True) if p.name != SYNCED_FILE]
    return load_catalog([*files, *catalog_files], use_user_dir=False)
