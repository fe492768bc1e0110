"""The catalog through the public API: lookup, filtered lists, side-by-side comparison."""

from __future__ import annotations

from collections.abc import Sequence
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
