"""Read the shipped catalog files and the user's override files into validated records.

Shipped data lives in ``gpuwise/catalog/data/``: ``gpus/<id>.yaml`` (one record each),
``offers/<provider>.yaml`` (lists) and ``interconnects.yaml`` (a list).

Override files (``--catalog FILE`` or ``*.yaml`` in the user's config folder) are mappings with
any of the sections ``gpus``, ``offers``, ``interconnects``, each a list of records. A record
whose id exists is *merged* onto the shipped one (so ``{id: rtx-4090, price: {...}}`` fixes a
stale price); a new id must be a complete record. A file holding one mapping with an ``id`` is
read as one GPU record. A measurement (``measured.gemm.<dtype>``) is replaced whole, never merged
field by field: its figure, source and date go together.

Once validated, each GPU learns the measured matmul fractions of the card that stands for its
architecture and segment (``measured.stands_for``), in the merged catalog: a user's own measurement
of that card moves its siblings too.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from gpuwise.catalog.schema import GPU, CloudOffer, Interconnect, System
from gpuwise.errors import CatalogError, ConfigError
from gpuwise.safe_io import check_size, excerpt, parse_yaml, read_text

R = TypeVar("R", bound=BaseModel)
MAX_OVERRIDE_BYTES = 50_000_000  # a synced price file (catalog sync) holds tens of thousands of offers
SYNCED_PREFIX = '{"offers":['  # how catalog sync's JSON begins (catalog/sync.py writes it, byte for byte)
Raw = dict[str, Any]
SECTIONS: Mapping[str, type[BaseModel]] = {"gpus": GPU, "offers": CloudOffer, "interconnects": Interconnect,
                                           "systems": System}

# the C loader (a SafeLoader: no arbitrary objects) parses the shipped files several times faster
_Loader: type[yaml.SafeLoader] | type[yaml.CSafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def user_catalog_dir() -> Path:
    """``$GPUWISE_CONFIG_DIR/catalog`` or ``$XDG_CONFIG_HOME/gpuwise/catalog`` (``~/.config/...``)."""
    base = os.environ.get("GPUWISE_CONFIG_DIR")
    if base:
        return Path(base) / "catalog"
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(xdg) / "gpuwise" / "catalog"


def _parse_yaml(text: str, origin: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise CatalogError(f"{origin}:{where} is not valid YAML ({getattr(exc, 'problem', exc)})") from None


def validation_message(origin: str, record_id: object, exc: ValidationError) -> str:
    """One line naming the file, the record, the first bad field and what it should be."""
    first = exc.errors()[0]
    field = ".".join(str(p)[:40] for p in first["loc"]) or "(record)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{origin}: record {record_id}: field {field!r}: {str(first['msg'])[:200]}{more}"


def _validate(model: type[R], raw: Raw, origin: str) -> R:
    if not isinstance(raw, dict):
        raise CatalogError(f"{origin}: expected a mapping (a record), got {type(raw).__name__}")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise CatalogError(validation_message(origin, excerpt(raw.get("id"), 40), exc)) from None


@functools.lru_cache(maxsize=1)
def shipped_raw() -> Mapping[str, tuple[tuple[str, Raw], ...]]:
    """The shipped records as raw mappings with their file names, read once per process."""
    root = resources.files("gpuwise.catalog") / "data"
    gpus = [(f"gpus/{p.name}", _parse_yaml(p.read_text("utf-8"), p.name))
            for p in sorted((root / "gpus").iterdir(), key=lambda p: p.name) if p.name.endswith(".yaml")]
    offers: list[tuple[str, Raw]] = []
    for p in sorted((root / "offers").iterdir(), key=lambda p: p.name):
        if p.name.endswith(".yaml"):
            offers += [(f"offers/{p.name}", r) for r in _parse_yaml(p.read_text("utf-8"), p.name) or []]
    links = _parse_yaml((root / "interconnects.yaml").read_text("utf-8"), "interconnects.yaml") or []
    systems = _parse_yaml((root / "systems.yaml").read_text("utf-8"), "systems.yaml") or []
    return {
        "gpus": tuple(gpus),
        "offers": tuple(offers),
        "interconnects": tuple(("interconnects.yaml", r) for r in links),
        "systems": tuple(("systems.yaml", r) for r in systems),
    }


def _json_or_yaml(text: str, origin: str) -> Any:
    """A file in JSON (YAML's subset: what `catalog sync` writes, tens of thousands of offers) through the JSON
    parser, many times faster than the bounded YAML loader; anything else through that loader."""
    if text.lstrip().startswith("{"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            if text.startswith(SYNCED_PREFIX):  # what catalog sync writes, broken (cut short, edited): no YAML retry
                raise CatalogError(f"{origin}: not valid JSON at line {exc.lineno:,} ({exc.msg}); a file catalog sync "
                                   "wrote was cut short or edited: run the sync again") from None
            return parse_yaml(text, origin=origin)
        check_size(data, origin=origin)
        return data
    return parse_yaml(text, origin=origin)


def override_sections(path: Path) -> dict[str, list[Raw]]:
    """Read one override file into its sections; a single mapping with ``id`` is one GPU."""
    text = read_text(path, what="catalog file", max_bytes=MAX_OVERRIDE_BYTES)
    try:
        data = _json_or_yaml(text, str(path))
    except ConfigError as exc:
        raise CatalogError(str(exc)) from None
    if isinstance(data, dict) and "id" in data:
        return {"gpus": [data]}
    if isinstance(data, list):
        return {"gpus": data}
    if not isinstance(data, dict):
        raise CatalogError(f"{path}: expected sections gpus/offers/interconnects/systems, got {type(data).__name__}")
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise CatalogError(f"{path}: unknown section {unknown[0]!r}; use gpus, offers, interconnects or systems")
    sections: dict[str, list[Raw]] = {}
    for name, records in data.items():
        if not isinstance(records, list):
            raise CatalogError(f"{path}: section {name!r} must be a list of records")
        sections[name] = records
    return sections


WHOLE_ENTRIES = (("measured", "gemm"),)  # mappings whose entries an override replaces whole (one measurement each)


def _deep_merge(base: Raw, patch: Raw, path: tuple[str, ...] = ()) -> Raw:
    merged = dict(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict) and path not in WHOLE_ENTRIES:
            merged[key] = _deep_merge(merged[key], value, (*path, str(key)))
        else:
            merged[key] = value
    return merged


def attach_gemm_references(gpus: Sequence[GPU]) -> None:
    """Give each GPU the measured matmul fractions of the card whose ``measured.stands_for`` names it the reference
    of its architecture and segment; two such cards for one pair is an error."""
    references: dict[tuple[str, str], GPU] = {}
    for gpu in gpus:
        if gpu.measured is None or gpu.measured.stands_for is None:
            continue
        key = (gpu.architecture_family, gpu.segment)
        other = references.setdefault(key, gpu)
        if other is not gpu:
            raise CatalogError(f"{gpu.id} and {other.id} both stand for {key[0]} {key[1]} cards (measured.stands_for): "
                               f"one card per architecture and segment; set stands_for: null on the other")
    for gpu in gpus:
        reference = references.get((gpu.architecture_family, gpu.segment))
        if reference is not None:
            gpu.attach_gemm_reference(reference)


def merge_records(
    shipped: Iterable[tuple[str, Raw]], overrides: Iterable[tuple[str, Raw]]
) -> list[tuple[str, Raw]]:
    """Shipped raw records with overrides applied by id (merge) or appended (new id)."""
    by_id: dict[str, tuple[str, Raw]] = {}
    for origin, raw in shipped:
        record_id = str(raw.get("id")) if isinstance(raw, dict) else repr(raw)
        if record_id in by_id:
            raise CatalogError(f"{origin}: duplicate id {record_id!r} (also in {by_id[record_id][0]})")
        by_id[record_id] = (origin, raw)
    for origin, raw in overrides:
        if not isinstance(raw, dict) or "id" not in raw:
            raise CatalogError(f"{origin}: every override record needs an 'id'")
        record_id = str(raw["id"])
        base = by_id.get(record_id)
        by_id[record_id] = (origin, _deep_merge(base[1], raw) if base else raw)
    return list(by_id.values())


def build_records(
    override_files: Sequence[Path],
) -> tuple[list[GPU], list[CloudOffer], list[Interconnect], list[System], tuple[str, ...]]:
    """Validated records of every section and the list of files they came from."""
    shipped = shipped_raw()
    extra: dict[str, list[tuple[str, Raw]]] = {name: [] for name in SECTIONS}
    for path in override_files:
        for name, records in override_sections(path).items():
            extra[name] += [(str(path), r) for r in records]
    out: dict[str, list[Any]] = {}
    for name, model in SECTIONS.items():
        merged = merge_records(shipped[name], extra[name])
        out[name] = [_validate(model, raw, origin) for origin, raw in merged]
    attach_gemm_references(out["gpus"])
    return out["gpus"], out["offers"], out["interconnects"], out["systems"], tuple(str(p) for p in override_files)


def discover_override_files(explicit: Sequence[Path | str] = (), *, use_user_dir: bool = True) -> list[Path]:
    """The user's config-folder files (sorted by name), then the explicit ``--catalog`` files."""
    files: list[Path] = []
    folder = user_catalog_dir()
    if use_user_dir and folder.is_dir():
        files += sorted(folder.glob("*.yaml")) + sorted(folder.glob("*.yml"))
    for item in explicit:
        path = Path(item)
        if path.is_dir():
            raise CatalogError(f"catalog file {str(path)!r} is a folder; give a YAML file of GPU records in it "
                               f"(or put them in {folder}, read on every run)")
        if not path.is_file():
            raise CatalogError(f"catalog file {str(path)!r} does not exist; give a YAML file of GPU records")
        files.append(path)
    return files
