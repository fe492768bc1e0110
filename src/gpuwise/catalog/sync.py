"""Cloud offers from the price files users already have: SkyPilot's catalog CSVs and dstack gpuhunt's offer CSVs.

- SkyPilot (skypilot-org/skypilot-catalog ``catalogs/v8/<cloud>/vms.csv``): a row per instance type and region
  (and zone), ``InstanceType, AcceleratorName, AcceleratorCount, vCPUs, MemoryGiB, Price, SpotPrice, Region``, the
  header's order differing per cloud; GCP lists attachable GPUs on rows of their own (no InstanceType: the price of
  the GPUs alone, the host VM billed apart), and CPU-only rows have no accelerator. The cloud is the folder's name.
- gpuhunt (dstackai/gpuhunt, its catalog's ``<provider>.csv``): ``instance_name, location, price, cpu, memory,
  gpu_count, gpu_name, gpu_memory, spot, disk_size, gpu_vendor[, flags]``, a spot offer on a row of its own.

Each GPU row becomes an offer (on-demand, and spot where priced), its GPU matched to the catalog by name and memory;
``as_of`` is the file's date, ``source`` the file. What cannot be matched is counted by name, not guessed.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpuwise.catalog.catalog import Catalog
from gpuwise.catalog.schema import GPU, CloudOffer
from gpuwise.errors import AmbiguousGPU, CatalogError, ConfigError, UnknownGPU
from gpuwise.safe_io import read_text

MAX_FILE_BYTES = 200 * 2**20
MAX_ROWS = 2_000_000
MAX_FILES = 200
SKYPILOT = ("InstanceType", "AcceleratorName", "AcceleratorCount", "Price", "Region")
GPUHUNT = ("instance_name", "location", "price", "gpu_count", "gpu_name", "spot")


@dataclass
class Synced:
    """What a sync read: offers by file, and the accelerator names it could not place, with their row counts."""

    offers: list[CloudOffer] = field(default_factory=list)
    unmapped: Counter[str] = field(default_factory=Counter)
    files: list[str] = field(default_factory=list)
    skipped_rows: int = 0  # CPU-only rows, rows without a price, more than 16 GPUs per instance


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "x"


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and value > 0 and value == value and value != float("inf") else None


def _matcher(catalog: Catalog) -> Callable[[str, float | None], GPU | None]:
    """match_gpu with its answers kept: a price file repeats a few names over thousands of rows."""
    seen: dict[tuple[str, float | None], GPU | None] = {}

    def match(name: str, memory_gib: float | None) -> GPU | None:
        key = (name, memory_gib)
        if key not in seen:
            seen[key] = match_gpu(name, memory_gib, catalog)
        return seen[key]

    return match


def match_gpu(name: str, memory_gib: float | None, catalog: Catalog) -> GPU | None:
    """The catalog GPU an accelerator name stands for ("A100-80GB", "H100", "L4"), a shared name settled by memory."""
    for candidate in (name, name.replace("-", " "), re.sub(r"(\d+)GB$", r" \1GB", name)):
        try:
            return catalog.gpu(candidate)
        except AmbiguousGPU as exc:
            cards = [catalog.gpus[c] for c in exc.candidates]
            if memory_gib:
                # the nearest memory; on a tie the SXM part (a bare "H100" is the SXM one in both catalogs)
                cards.sort(key=lambda g: (abs(g.memory_gb - memory_gib), g.form_factor != "sxm"))
                return cards[0]
            sxm = sorted((g for g in cards if g.form_factor == "sxm"), key=lambda g: g.memory_gb)
            return sxm[0] if sxm else None  # a bare "A100" is the base SXM part (SkyPilot: A100 vs A100-80GB)
        except UnknownGPU:
            continue
    return None


def _offer(provider: str, instance: str, gpu: GPU, count: int, price: float, tier: str, region: str,
           as_of: dt.date, source: str, note: str | None = None) -> CloudOffer:
    return CloudOffer(id=_slug(f"{provider}-{instance}-{region}-{tier}")[:120], provider=_slug(provider),
                      instance=instance or f"{count}x {gpu.name}", gpu=gpu.id, gpus=count, usd_per_hour=price,
                      tier=tier, region=region or "-", as_of=as_of, source=source, note=note)


GCP_FAMILIES = {"A100": "a2-highgpu", "A100-80GB": "a2-ultragpu", "H100": "a3-highgpu", "H100-MEGA": "a3-megagpu",
                "H200": "a3-ultragpu", "B200": "a4-highgpu"}
"""GCP's accelerator-optimized machine types, named ``<family>-<GPUs>g`` (cloud.google.com/compute/docs/
accelerator-optimized-machines; a2-megagpu-16g for sixteen A100s): SkyPilot prices their GPUs on rows of their own."""


def _gcp_joined(rows: list[Mapping[str, str]]) -> Iterator[Mapping[str, str]]:
    """GCP rows with each GPU-only row joined to its machine type in the same zone (VM price + GPUs' price); a GPU
    that attaches to a VM of the user's choice (T4, L4, V100) has no machine to join and stays GPU-only."""
    vms = {(r.get("InstanceType"), r.get("AvailabilityZone")): r for r in rows if r.get("InstanceType")}
    for row in rows:
        if row.get("InstanceType") or not row.get("AcceleratorName"):
            yield row
            continue
        count = int(_number(row.get("AcceleratorCount")) or 0)
        family = GCP_FAMILIES.get(row["AcceleratorName"])
        name = "a2-megagpu-16g" if family == "a2-highgpu" and count == 16 else f"{family}-{count}g"
        vm = vms.get((name, row.get("AvailabilityZone"))) if family else None
        if vm is None:
            yield row
            continue
        joined = {**row, "InstanceType": name}
        for key in ("Price", "SpotPrice"):
            both = (_number(vm.get(key)), _number(row.get(key)))
            joined[key] = str(both[0] + both[1]) if None not in both else ""  # type: ignore[operator]
        yield joined


def _skypilot_rows(rows: Iterable[Mapping[str, str]], provider: str, catalog: Catalog, as_of: dt.date,
                   source: str, out: Synced) -> None:
    match = _matcher(catalog)
    if provider == "gcp":
        rows = _gcp_joined(list(rows))
    for row in rows:
        name, count = row.get("AcceleratorName") or "", _number(row.get("AcceleratorCount"))
        if not name or not count:
            out.skipped_rows += 1
            continue
        gpu = _placed(match, provider, name, _gpu_memory_gib(row.get("GpuInfo")), out)
        if gpu is None:
            continue
        gpus, instance = int(count), row.get("InstanceType") or ""
        if not instance:  # a GPU priced alone (GCP's attachable GPUs): its VM is the user's choice, not priced here
            out.unmapped[f"{provider}: {name} (priced without its VM)"] += 1
            continue
        region = "/".join(x for x in (row.get("Region"), row.get("AvailabilityZone")) if x)
        for price, tier in ((_number(row.get("Price")), "on-demand"), (_number(row.get("SpotPrice")), "spot")):
            if price is None or not 1 <= gpus <= 16:
                out.skipped_rows += price is None and tier == "on-demand"
                continue
            out.offers.append(_offer(provider, instance, gpu, gpus, price, tier, region, as_of, source))


def _placed(match: Callable[[str, float | None], GPU | None], provider: str, name: str, memory_gib: float | None,
            out: Synced) -> GPU | None:
    """The catalog GPU of a row's accelerator, or None with the name counted among those it could not place."""
    gpu = match(name, memory_gib)
    if gpu is None:
        out.unmapped[f"{provider}: {name}"] += 1
    return gpu


def _gpu_memory_gib(info: str | None) -> float | None:
    """SkyPilot's GpuInfo: ``{'Gpus': [{... 'MemoryInfo': {'SizeInMiB': 16384}}], ...}`` -> 16.0."""
    found = re.search(r"'SizeInMiB':\s*([0-9.]+)", info or "")
    return float(found.group(1)) / 1024 if found else None


def _gpuhunt_rows(rows: Iterable[Mapping[str, str]], provider: str, catalog: Catalog, as_of: dt.date,
                  source: str, out: Synced) -> None:
    match = _matcher(catalog)
    for row in rows:
        name, count, price = row.get("gpu_name") or "", _number(row.get("gpu_count")), _number(row.get("price"))
        if not name or not count or price is None:
            out.skipped_rows += 1
            continue
        gpu = _placed(match, provider, name, _number(row.get("gpu_memory")), out)
        if gpu is None:
            continue
        if not 1 <= int(count) <= 16:
            out.skipped_rows += 1
            continue
        tier = "spot" if (row.get("spot") or "").strip().lower() == "true" else "on-demand"
        out.offers.append(_offer(provider, row.get("instance_name") or "", gpu, int(count), price, tier,
                                 row.get("location") or "", as_of, source))


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise ConfigError(f"{path}: no such file or folder; give a SkyPilot vms.csv, a gpuhunt <provider>.csv, or a "
                          "folder of them")
    found = sorted(p for p in path.rglob("*.csv") if p.is_file())[:MAX_FILES + 1]
    if len(found) > MAX_FILES:
        raise ConfigError(f"{path}: more than {MAX_FILES} CSV files; sync a part of it")
    return found


def _rows(text: str, origin: Path) -> Iterator[dict[str, str]]:
    reader = csv.DictReader(io.StringIO(text))
    for number, row in enumerate(reader):
        if number >= MAX_ROWS:
            raise ConfigError(f"{origin}: more than {MAX_ROWS:,} rows")
        yield row


def read_offers(path: Path | str, catalog: Catalog) -> Synced:
    """Every GPU offer in ``path`` (a file or a folder of them); a CSV of another shape is a one-line error."""
    out = Synced()
    for file in _files(Path(path)):
        text = read_text(file, what="price file", max_bytes=MAX_FILE_BYTES)
        header = next(csv.reader(io.StringIO(text)), [])
        as_of = dt.date.fromtimestamp(file.stat().st_mtime)
        provider = file.parent.name if file.stem == "vms" else file.stem
        if all(col in header for col in SKYPILOT):
            _skypilot_rows(_rows(text, file), provider, catalog, as_of, str(file), out)
        elif all(col in header for col in GPUHUNT):
            _gpuhunt_rows(_rows(text, file), provider, catalog, as_of, str(file), out)
        elif file.name.endswith("vms.csv") or Path(path).is_file():
            raise ConfigError(f"{file}: not a SkyPilot vms.csv (needs {', '.join(SKYPILOT)}) or a gpuhunt CSV "
                              f"(needs {', '.join(GPUHUNT)})")
        else:
            continue  # a folder's other CSVs (SkyPilot's images.csv, accelerators.csv)
        out.files.append(str(file))
    if not out.files:
        raise CatalogError(f"{path}: no SkyPilot vms.csv or gpuhunt CSV in it")
    return out
