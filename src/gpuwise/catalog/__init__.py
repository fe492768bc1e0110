"""GPU, cloud-offer and interconnect data with sources, their schema, loading and lookup."""

from __future__ import annotations

from gpuwise.catalog.catalog import FEATURES, SEGMENTS, SORT_FIELDS, VENDORS, Catalog, load_catalog, price_usd
from gpuwise.catalog.compare import Comparison, Row, compare
from gpuwise.catalog.schema import GPU, CloudOffer, Interconnect, Price, Software, Source, System

__all__ = [
    "FEATURES",
    "GPU",
    "SEGMENTS",
    "SORT_FIELDS",
    "VENDORS",
    "Catalog",
    "CloudOffer",
    "Comparison",
    "Interconnect",
    "Price",
    "Row",
    "Software",
    "Source",
    "System",
    "compare",
    "load_catalog",
    "price_usd",
]
