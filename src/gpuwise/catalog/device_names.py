"""GPU names as tools print them (``nvidia-smi``, NVML, DCGM, ``rocm-smi``/``amd-smi``, ``hl-smi``, llama-bench's
``gpu_info``) mapped to catalog ids, from one sourced table: ``data/gpu_names.yaml``.

A printed name is looked up exactly (case and runs of spaces aside) in that table; a name it lacks falls back to the
catalog's own loose lookup (ids, product names, aliases: lookup.py). llama-bench joins several devices with ", "
(builds of 2023-24 with "/"); each device is resolved and all must be the same card. A MIG slice is refused: its
rates are a fraction of the card's. Every refusal is one line that says how to name the card instead (``--gpu``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from gpuwise.catalog.catalog import Catalog
from gpuwise.errors import AmbiguousGPU, CatalogError, ConfigError, UnknownGPU
from gpuwise.safe_io import parse_yaml

MAX_DEVICES = 64  # GPUs one printed list may name (llama-bench on one host)
# ", " (llama-bench); "/" between two names, no spaces around it (its 2023-24 builds: "...RTX 3090/NVIDIA ...")
_DEVICE_SEPARATOR = re.compile(r",\s+|(?<=[A-Za-z0-9])/(?=[A-Z])")
_MIG = re.compile(r"\bMIG\s+\d+g\.\d+gb\b", re.IGNORECASE)
GIVE_GPU = "give --gpu ID, the card's catalog id (`gpuwise catalog list`, e.g. --gpu a100-sxm-80gb)"


@dataclass(frozen=True)
class PrintedName:
    """One row of the table: a name as a tool prints it, the catalog ids it stands for and where it was seen."""

    name: str
    gpus: tuple[str, ...]
    source: str
    note: str = ""


@dataclass(frozen=True)
class NameTable:
    as_of: str
    sources: Mapping[str, Mapping[str, str]]
    rows: Mapping[str, PrintedName]  # by normalized name


@dataclass(frozen=True)
class DeviceMatch:
    """What a printed name (one device or a list of them) resolves to."""

    gpu: str
    count: int
    how: str  # "table" (gpu_names.yaml) or "catalog" (ids, product names and aliases)
    note: str = ""


def normalized(name: str) -> str:
    """``"NVIDIA  GeForce RTX 4090 "`` -> ``"nvidia geforce rtx 4090"``: case and runs of spaces do not count."""
    return " ".join(name.split()).casefold()


def _row(entry: Any, sources: Mapping[str, Any]) -> PrintedName:
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or entry.get("source") not in sources:
        raise CatalogError(f"gpu_names.yaml: entry {entry!r:.80} needs a name and a source listed under sources")
    gpus = entry.get("gpus") or [entry.get("gpu")]
    if not all(isinstance(g, str) and g for g in gpus):
        raise CatalogError(f"gpu_names.yaml: {entry['name']!r} needs gpu: ID or gpus: [ID, ...]")
    return PrintedName(entry["name"], tuple(gpus), entry["source"], str(entry.get("note") or ""))


@functools.cache
def name_table() -> NameTable:
    """The shipped table, read once (on first use, not at import)."""
    text = (resources.files("gpuwise.catalog") / "data" / "gpu_names.yaml").read_text("utf-8")
    data = parse_yaml(text, origin="gpu_names.yaml")
    sources = data.get("sources") if isinstance(data, dict) else None
    if not isinstance(sources, dict) or not isinstance(data.get("names"), list):
        raise CatalogError("gpu_names.yaml: needs sources: {...} and names: [...]")
    rows = [_row(entry, sources) for entry in data["names"]]
    return NameTable(str(data.get("as_of", "")), sources, {normalized(r.name): r for r in rows})


def split_devices(printed: str) -> list[str]:
    """The device names in a printed list: ``"A, A"`` -> ``["A", "A"]``; ``"MI250X / MI250"`` stays whole."""
    return [part.strip() for part in _DEVICE_SEPARATOR.split(printed) if part.strip()]


def _ambiguous(printed: str, candidates: tuple[str, ...]) -> ConfigError:
    return ConfigError(f"the GPU name {printed[:80]!r} stands for several cards ({', '.join(candidates)}): give "
                       f"--gpu with the one the run had, e.g. --gpu {candidates[0]}")


def _one(printed: str, catalog: Catalog) -> tuple[str, str, str]:
    """(catalog id, note, how) of one device name."""
    if _MIG.search(printed):
        raise ConfigError(f"{printed[:80]!r} is a MIG slice, with a fraction of the card's rates, and gpuwise models "
                          "whole cards: calibrate from a run on the whole card")
    row = name_table().rows.get(normalized(printed))
    known = tuple(g for g in row.gpus if g in catalog.gpus) if row else ()
    if row and len(known) == 1:
        return known[0], row.note, "table"
    if len(known) > 1:
        raise _ambiguous(printed, known)
    try:
        return catalog.gpu(printed).id, "", "catalog"
    except AmbiguousGPU as exc:
        raise _ambiguous(printed, exc.candidates) from None
    except UnknownGPU as exc:
        near = f" (nearest: {', '.join(exc.suggestions)})" if exc.suggestions else ""
        raise ConfigError(f"the GPU name {printed[:80]!r} is not one gpuwise knows{near}: {GIVE_GPU}") from None


def match_device(printed: str, catalog: Catalog) -> DeviceMatch:
    """The catalog card a tool's printed name (one device, or llama-bench's list of them) designates, and how many
    devices it lists; a one-line ConfigError when the name is unknown, ambiguous, a MIG slice or mixed cards."""
    parts = split_devices(printed)[: MAX_DEVICES + 1]
    if not parts or len(parts) > MAX_DEVICES:
        raise ConfigError(f"the GPU name {printed[:80]!r} lists no device or more than {MAX_DEVICES}: {GIVE_GPU}")
    resolved = [_one(part, catalog) for part in parts]
    ids = sorted({gpu for gpu, _, _ in resolved})
    if len(ids) > 1:
        raise ConfigError(f"the GPU name {printed[:80]!r} lists different cards ({', '.join(ids)}); gpuwise "
                          f"calibrates one kind of card: {GIVE_GPU}")
    gpu, note, how = resolved[0]
    return DeviceMatch(gpu, len(parts), how, note)
