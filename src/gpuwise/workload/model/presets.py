"""Shipped model presets: real ``config.json`` files with their source, usable offline.

Each file ``presets/<id>.json`` is the model's config.json plus a ``_preset`` block naming its Hugging
Face repo ids, the URL it was copied from and, where one is published, the exact parameter count
(``published_params``) or the vendor's rounded figures (``published``: "30.5B" total, "3.3B" active, with how the
vendor counted them -- e.g. ``-embedding`` when the active figure leaves the embedding table out).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gpuwise.errors import ConfigError


@dataclass(frozen=True)
class Published:
    """A vendor's rounded parameter figures ("671B", "37B") and what they leave out or add (``-embedding``,
    ``-head``, ``-tower``, ``+mtp``), with the page or report that states them."""

    total: str | None
    active: str | None
    total_convention: tuple[str, ...]
    active_convention: tuple[str, ...]
    source: str
    quote: str


@dataclass(frozen=True)
class Preset:
    id: str
    hub_ids: tuple[str, ...]
    source: str
    published_params: int | None
    config: Mapping[str, Any]
    published: Published | None = None
    notes: str = ""


def _published(meta: Mapping[str, Any]) -> Published | None:
    block = meta.get("published")
    if not isinstance(block, dict):
        return None
    return Published(total=block.get("total"), active=block.get("active"),
                     total_convention=tuple(block.get("total_convention", ())),
                     active_convention=tuple(block.get("active_convention", ())),
                     source=str(block.get("source", "")), quote=str(block.get("quote", "")))


def _read(name: str, text: str) -> Preset:
    data = json.loads(text)
    meta = data.pop("_preset", None)
    if not isinstance(meta, dict) or "id" not in meta:
        raise ConfigError(f"preset file {name} lacks its _preset block")
    return Preset(
        id=str(meta["id"]),
        hub_ids=tuple(str(h) for h in meta.get("hub_ids", ())),
        source=str(meta.get("source", "")),
        published_params=meta.get("published_params"),
        config=data,
        published=_published(meta),
        notes=str(meta.get("notes", "")),
    )


@functools.lru_cache(maxsize=1)
def presets() -> Mapping[str, Preset]:
    """Every shipped preset by id, read once per process."""
    folder = resources.files("gpuwise.workload.model") / "presets"
    found = {}
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".json"):
            preset = _read(entry.name, entry.read_text("utf-8"))
            found[preset.id] = preset
    return found


@functools.lru_cache(maxsize=1)
def hub_index() -> Mapping[str, str]:
    """Lower-cased preset ids and hub ids -> preset id."""
    index: dict[str, str] = {}
    for preset in presets().values():
        index[preset.id.lower()] = preset.id
        for hub_id in preset.hub_ids:
            index[hub_id.lower()] = preset.id
    return index
