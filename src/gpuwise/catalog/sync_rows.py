"""One row of a price file to an offer: what its fields say, checked, and where the offer is kept.

Every field is read as text from an untrusted file: names become one line of printable text of at most
:data:`MAX_NAME_CHARS`, counts whole numbers from 1 to 16, prices within the catalog's figure range
(:data:`~gpuwise.catalog.schema.FIGURE_MIN` to :data:`~gpuwise.catalog.schema.FIGURE_MAX` USD/h). A row that
fails one is skipped and counted by its reason (:class:`Skip`), so a record built from a kept row always validates.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from pydantic import ValidationError

from gpuwise.catalog.loading import validation_message
from gpuwise.catalog.schema import FIGURE_MAX, FIGURE_MIN, GPU, CloudOffer
from gpuwise.catalog.sync_match import Hints, form_factor_of, skypilot_hints
from gpuwise.errors import CatalogError, InputTooLarge
from gpuwise.text import printable

MAX_NAME_CHARS = 200
MAX_SYNCED_OFFERS = 100_000
"""Distinct offers one sync keeps (about 300 bytes each written): memory stays bounded whatever the input, and what
is written stays under the loader's :data:`~gpuwise.catalog.loading.MAX_OVERRIDE_BYTES`, checked as it is written."""
MAX_UNMAPPED_NAMES = 1_000
DATE_COLUMNS = ("as_of", "date")
Row = Mapping[str, "str | None"]


class Skip(Exception):
    """A row that cannot be an offer, with the reason it is counted under."""


class Offer(NamedTuple):
    """A kept offer before it becomes a record (a tuple: a hundred thousand stay small)."""

    provider: str
    instance: str
    gpu: str
    gpus: int
    usd_per_hour: float
    tier: str
    region: str
    as_of: dt.date
    source: str


@dataclass
class Synced:
    """What a sync read: the kept offers, the accelerator names it could not place and the rows it skipped, by
    reason, with their counts."""

    kept: dict[tuple[str, ...], Offer] = field(default_factory=dict)
    unmapped: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    files: list[str] = field(default_factory=list)
    folded_rows: int = 0  # rows of another zone (or a duplicate) of a kept offer's instance, region and tier
    notes: list[str] = field(default_factory=list)

    @property
    def skipped_rows(self) -> int:
        return sum(self.skipped.values())

    @functools.cached_property
    def offers(self) -> list[CloudOffer]:
        return list(self.records())

    def records(self) -> Iterator[CloudOffer]:
        """Each kept offer as a validated record, ids unique (a long or clashing id ends in a digest of its key)."""
        used: set[str] = set()
        for offer in self.kept.values():
            offer_id = offer_id_of(offer)
            if offer_id in used:
                offer_id = offer_id_of(offer, hashed=True)
            used.add(offer_id)
            yield record_of(offer_id, offer)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def offer_id_of(offer: Offer, *, hashed: bool = False, limit: int = 64) -> str:
    """``provider-instance-region-tier`` as an id; past ``limit`` characters (or ``hashed``) a cut of it that ends
    on a letter or digit, then 10 hex digits of SHA-256 of the whole key, so distinct offers keep distinct ids."""
    key = f"{offer.provider}-{offer.instance}-{offer.region}-{offer.tier}"
    text = slug(key)
    if text and len(text) <= limit and not hashed:
        return text
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{text[:limit - 11].rstrip('-') or 'offer'}-{digest}"


def record_of(offer_id: str, offer: Offer) -> CloudOffer:
    try:
        return CloudOffer(id=offer_id, **offer._asdict())
    except ValidationError as exc:  # every field is checked as the row is read; kept as a one-line answer
        raise CatalogError(validation_message(offer.source, offer_id, exc)) from None


# ---- what a row says --------------------------------------------------------------------------------------
def _name(row: Row, key: str) -> str:
    """A name from the file as one line of printable text."""
    text = printable(row.get(key) or "", one_line=True)
    if len(text) > MAX_NAME_CHARS:
        raise Skip(f"a name longer than {MAX_NAME_CHARS} characters")
    return text


def _number(text: str | None) -> float | None:
    """A positive finite number, or None for an empty, zero or unreadable field."""
    try:
        value = float((text or "").strip()[:40]) if (text or "").strip() else None
    except ValueError:
        return None
    return value if value is not None and 0 < value < float("inf") else None


def _price(text: str | None) -> float | None:
    """USD per hour, or None for an empty or zero field (SkyPilot writes 0.0 for a price it does not know)."""
    raw = (text or "").strip()
    try:
        value = float(raw[:40]) if raw else 0.0
    except ValueError:
        raise Skip("a price that is not a number") from None
    if value == 0:
        return None
    if not FIGURE_MIN <= value <= FIGURE_MAX:  # NaN and infinities fail too
        raise Skip(f"a price outside {FIGURE_MIN:g} to {FIGURE_MAX:g} USD/h")
    return value


def _count(text: str | None) -> int:
    value = _number(text)
    if value is None:
        raise Skip("no GPU on the row (a CPU machine)")
    if value != int(value) or not 1 <= value <= 16:
        raise Skip("a GPU count that is not a whole number from 1 to 16")
    return int(value)


def _row_date(row: Row, default: dt.date) -> dt.date:
    for column in DATE_COLUMNS:
        text = (row.get(column) or "").strip()[:32]
        if text:
            try:
                day = dt.date.fromisoformat(text[:10])
            except ValueError:
                raise Skip(f"a {column} that is not a date (YYYY-MM-DD)") from None
            if day > dt.date.today() + dt.timedelta(days=1):
                raise Skip(f"a {column} after today")
            return day
    return default


# ---- rows to offers ---------------------------------------------------------------------------------------
@dataclass
class Reading:
    """One file being read: where its offers go, its provider, source and the date its rows default to."""

    out: Synced
    match: Callable[[str, Hints], GPU | None]
    provider: str
    source: str
    as_of: dt.date
    dated_by_default: int = 0

    def date(self, row: Row) -> dt.date:
        day = _row_date(row, self.as_of)
        self.dated_by_default += day is self.as_of
        return day

    def unplaced(self, name: str) -> None:
        key = f"{self.provider}: {name[:80]}"
        if key not in self.out.unmapped and len(self.out.unmapped) >= MAX_UNMAPPED_NAMES:
            key = f"{self.provider}: (other names)"
        self.out.unmapped[key] += 1

    def keep(self, row: Row, gpu: GPU, gpus: int, instance: str, where: tuple[str, str],
             prices: tuple[float | None, float | None]) -> None:
        """The row's on-demand and spot offers, each kept when it is the cheapest of its instance, region, tier."""
        if prices == (None, None):
            raise Skip("no price")
        day = self.date(row)
        for price, tier in zip(prices, ("on-demand", "spot"), strict=True):
            if price is None:
                continue
            key = (self.provider, instance, gpu.id, str(gpus), tier, where[0])
            old = self.out.kept.get(key)
            if old is not None:
                self.out.folded_rows += 1
                if price >= old.usd_per_hour:
                    continue
            elif len(self.out.kept) >= MAX_SYNCED_OFFERS:
                raise InputTooLarge(f"{self.source}: more than {MAX_SYNCED_OFFERS:,} distinct GPU offers in one sync "
                                    "(a whole cloud lists a few thousand); sync one cloud's folder or file at a time, "
                                    "each into a file of its own (--to), or split the file")
            region = "/".join(x for x in where if x) or "-"
            self.out.kept[key] = Offer(self.provider, instance or f"{gpus}x {gpu.name}", gpu.id, gpus, price, tier,
                                       region, day, self.source)


def skypilot_row(reading: Reading, row: Row) -> None:
    name = _name(row, "AcceleratorName")
    if not name:
        raise Skip("no GPU on the row (a CPU machine)")
    gpus = _count(row.get("AcceleratorCount"))
    instance, region, zone = (_name(row, key) for key in ("InstanceType", "Region", "AvailabilityZone"))
    prices = (_price(row.get("Price")), _price(row.get("SpotPrice")))
    gpu = reading.match(name, skypilot_hints(row.get("GpuInfo"), gpus, instance, name))
    if gpu is None:
        reading.unplaced(name)
    elif not instance:  # a GPU priced alone (GCP's attachable GPUs): its VM is the user's choice, not priced here
        reading.unplaced(f"{name} (priced without its VM)")
    else:
        reading.keep(row, gpu, gpus, instance, (region, zone), prices)


def gpuhunt_row(reading: Reading, row: Row) -> None:
    name = _name(row, "gpu_name")
    if not name:
        raise Skip("no GPU on the row (a CPU machine)")
    gpus, price = _count(row.get("gpu_count")), _price(row.get("price"))
    instance, location = _name(row, "instance_name"), _name(row, "location")
    memory = _number(row.get("gpu_memory"))
    hints = Hints((round(memory, 2),) if memory and 1 <= memory <= 1e5 else (), form_factor_of(instance, name))
    gpu = reading.match(name, hints)
    if gpu is None:
        reading.unplaced(name)
        return
    spot = (row.get("spot") or "").strip().lower() == "true"
    reading.keep(row, gpu, gpus, instance, (location, ""), (None, price) if spot else (price, None))


GCP_FAMILIES = {"A100": "a2-highgpu", "A100-80GB": "a2-ultragpu", "H100": "a3-highgpu", "H100-MEGA": "a3-megagpu",
                "H200": "a3-ultragpu", "B200": "a4-highgpu"}
"""GCP's accelerator-optimized machine types, named ``<family>-<GPUs>g`` (cloud.google.com/compute/docs/
accelerator-optimized-machines; a2-megagpu-16g for sixteen A100s): SkyPilot prices their GPUs on rows of their own."""
_GCP_MACHINE = re.compile(r"a\d-[a-z]+-\d+g")


class GcpJoin:
    """GCP rows with each GPU-only row joined to its machine type in the same zone (VM price + GPUs' price); a GPU
    that attaches to a VM of the user's choice (T4, L4, V100) has no machine to join and stays GPU-only. Only the
    accelerator-optimized machines' prices and the GPU rows read before their machine are held."""

    def __init__(self) -> None:
        self.machines: dict[tuple[str, str], tuple[str, str]] = {}
        self.waiting: list[Row] = []

    def feed(self, row: Row) -> Iterator[Row]:
        instance, zone = (row.get("InstanceType") or "").strip(), (row.get("AvailabilityZone") or "").strip()
        if _GCP_MACHINE.fullmatch(instance) and len(self.machines) < MAX_SYNCED_OFFERS:
            self.machines[(instance, zone)] = (row.get("Price") or "", row.get("SpotPrice") or "")
        machine = _gcp_machine(row)
        if machine is None:
            yield row
        elif (machine, zone) in self.machines:
            yield _gcp_joined(row, machine, self.machines[(machine, zone)])
        elif len(self.waiting) < MAX_SYNCED_OFFERS:
            self.waiting.append(row)
        else:
            raise InputTooLarge(f"more than {MAX_SYNCED_OFFERS:,} GCP GPU rows before their machine types")

    def rest(self) -> Iterator[Row]:
        for row in self.waiting:
            machine, zone = _gcp_machine(row) or "", (row.get("AvailabilityZone") or "").strip()
            vm = self.machines.get((machine, zone))
            yield row if vm is None else _gcp_joined(row, machine, vm)


def _gcp_machine(row: Row) -> str | None:
    family = GCP_FAMILIES.get((row.get("AcceleratorName") or "").strip())
    count = _number(row.get("AcceleratorCount"))
    if (row.get("InstanceType") or "").strip() or family is None or count is None:
        return None
    return "a2-megagpu-16g" if family == "a2-highgpu" and count == 16 else f"{family}-{int(count)}g"


def _gcp_joined(row: Row, machine: str, vm: tuple[str, str]) -> dict[str, str | None]:
    joined = {**row, "InstanceType": machine}
    for key, vm_price in zip(("Price", "SpotPrice"), vm, strict=True):
        both = (_number(vm_price), _number(row.get(key)))
        joined[key] = repr(round(both[0] + both[1], 6)) if both[0] is not None and both[1] is not None else ""
    return joined


