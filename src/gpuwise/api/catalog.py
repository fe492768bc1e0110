"""The catalog through the public API: lookup, filtered lists, side-by-side comparison."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpuwise.catalog import GPU, Catalog, Comparison, compare
from gpuwise.catalog import load_catalog as _load_catalog
from gpuwise.errors import ConfigError
from gpuwise.safe_io import excerpt

CatalogFiles = Sequence[Path | str]
MAX_COMPARED = 8


def load_catalog(*, catalog_files: CatalogFiles = ()) -> Catalog:
    """The catalog with the user's config-folder overrides and ``catalog_files`` applied."""
    return _load_catalog(catalog_files)


def find_gpu(name: str, *, catalog_files: CatalogFiles = ()) -> GPU:
    """The GPU record an id, alias or loose name designates; raises UnknownGPU / AmbiguousGPU."""
    return _load_catalog(catalog_files).gpu(name)


def list_gpus(
    *,
    vendor: str | None = None,
    segment: str | None = None,
    min_memory_gb: float | None = None,
    features: Sequence[str] = (),
    sort: str | None = None,
    descending: bool = True,
    catalog_files: CatalogFiles = (),
) -> list[GPU]:
    """GPUs matching every filter, sorted by a numeric field (see ``gpuwise.catalog.SORT_FIELDS``)."""
    return _load_catalog(catalog_files).select(
        vendor=vendor, segment=segment, min_memory_gb=min_memory_gb,
        features=features, sort=sort, descending=descending,
    )


def compare_gpus(names: Sequence[str], *, catalog_files: CatalogFiles = ()) -> Comparison:
    """Side-by-side figures of two to eight GPUs with ratios to the first."""
    if len(names) > MAX_COMPARED:
        raise ConfigError(f"compare takes 2 to {MAX_COMPARED} GPUs, got {len(names)}")
    cat = _load_catalog(catalog_files)
    return compare([cat.gpu(n) for n in names])


@dataclass(frozen=True)
class SyncResult:
    """What `catalog sync` wrote: offers per provider and tier, the names it could not place, the rows it skipped
    (by reason), the dates the offers carry, and notes (an undated file dated by the sync), the file."""

    written: str | None
    offers: int
    by_provider: Mapping[str, int]
    spot: int
    unmapped: Mapping[str, int]
    files: tuple[str, ...]
    skipped_rows: int
    skipped: Mapping[str, int] = field(default_factory=dict)
    folded_rows: int = 0
    as_of: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    bytes_written: int = 0


def sync_offers(source: Path | str, *, target: Path | str | None = None, dry_run: bool = False,
                as_of: dt.date | str | None = None, catalog_files: CatalogFiles = ()) -> SyncResult:
    """Read SkyPilot catalog CSVs or gpuhunt offer CSVs and write their GPU offers (on-demand and spot, per region)
    into the user's catalog folder, created if missing (``target``: another file), which every command then reads.
    ``as_of`` (a date or ``YYYY-MM-DD``) dates the rows that carry no date of their own."""
    from gpuwise.catalog.sync import matching_catalog, read_offers, sync_target, write_offers

    day = _sync_date(as_of)
    path = None if dry_run else sync_target(target)
    found = read_offers(source, matching_catalog(tuple(catalog_files)), as_of=day)
    size = write_offers(found, path) if path is not None else 0
    kept = list(found.kept.values())
    return SyncResult(None if path is None else str(path), len(kept), dict(Counter(o.provider for o in kept)),
                      sum(o.tier == "spot" for o in kept), dict(found.unmapped.most_common()), tuple(found.files),
                      found.skipped_rows, dict(found.skipped.most_common()), found.folded_rows,
                      tuple(sorted({str(o.as_of) for o in kept})), tuple(found.notes), size)


def _sync_date(as_of: dt.date | str | None) -> dt.date | None:
    if as_of is None or isinstance(as_of, dt.date):
        day = as_of
    else:
        try:
            day = dt.date.fromisoformat(str(as_of).strip())
        except ValueError:
            raise ConfigError(f"--as-of {excerpt(as_of, 40)} is not a date; give YYYY-MM-DD (the day the price files "
                              "were published)") from None
    if day is not None and day > dt.date.today():
        raise ConfigError(f"--as-of {day} is after today; give the day the price files were published")
    return day
