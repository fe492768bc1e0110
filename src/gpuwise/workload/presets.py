"""Shipped model presets: real ``config.json`` files with their source, usable offline.

Each file ``presets/<id>.json`` is the model's config.json plus a ``_preset`` block naming its Hugging
Face repo ids, the URL it was copied from and, where one is published, the exact parameter count.
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
class Preset:
    id: str
    hub_ids: tuple[str, ...]
    source: str
    published_params: int | None
    config: Mapping[str, Any]


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
    )


@functools.lru_cache(maxsize=1)
def presets() -> Mapping[str, Preset]:
    """Every shipped preset by id, read once per process."""
    folder = resources.files("gpuwise.workload") / "presets"
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
