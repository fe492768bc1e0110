"""The catalog through the public API: lookup, filtered lists, side-by-side comparison."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuwise.catalog import GPU, Catalog, Comparison, compare
from gpuwise.catalog import load_catalog as _load_catalog
from gpuwise.errors import ConfigError

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
    """What `catalog sync` wrote: offers per provider and tier, the names it could not place, the file."""

    written: str | None
    offers: int
    by_provider: Mapping[str, int]
    spot: int
    unmapped: Mapping[str, int]
    files: tuple[str, ...]
    skipped_rows: int


SYNCED_FILE = "synced-offers.yaml"


def sync_offers(source: Path | str, *, target: Path | str | None = None, dry_run: bool = False,
                catalog_files: CatalogFiles = ()) -> SyncResult:
    """Read SkyPilot catalog CSVs or gpuhunt offer CSVs and write their GPU offers (on-demand and spot, per region)
    into the user's catalog folder (``target``: another YAML file), which every command then reads."""
    import json

    from gpuwise.catalog.loading import user_catalog_dir
    from gpuwise.catalog.sync import read_offers
    from gpuwise.safe_io import atomic_write_text, check_writable

    found = read_offers(source, load_catalog(catalog_files=catalog_files))
    path = Path(target) if target is not None else user_catalog_dir() / SYNCED_FILE
    if not dry_run:
        check_writable(path, what="synced offers")
        path.parent.mkdir(parents=True, exist_ok=True)
        records = [o.model_dump(mode="json", exclude_none=True) for o in found.offers]
        # JSON, YAML's subset: read by the JSON parser, fast at tens of thousands of offers (catalog/loading.py)
        text = json.dumps({"offers": records}, separators=(",", ":"))
        atomic_write_text(path, text.replace('},{"id"', '},\n{"id"') + "\n", what="synced offers")
    by_provider = Counter(o.provider for o in found.offers)
    return SyncResult(None if dry_run else str(path), len(found.offers), dict(by_provider),
                      sum(o.tier == "spot" for o in found.offers), dict(found.unmapped.most_common()),
                      tuple(found.files), found.skipped_rows)
