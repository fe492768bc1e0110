"""The catalog: every GPU, cloud offer and interconnect, with lookup and simple queries."""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpuwise.catalog.loading import build_records, discover_override_files
from gpuwise.catalog.lookup import NameIndex, compact_key
from gpuwise.catalog.schema import GPU, CloudOffer, Dtype, Interconnect, Segment, Software, System, Vendor
from gpuwise.errors import CatalogError, ConfigError
from gpuwise.safe_io import excerpt


def _runs(package: str) -> Callable[[GPU], bool]:
    return lambda g: bool(getattr(g.software, package))


_PACKAGES = tuple(name for name, info in Software.model_fields.items()
                  if info.annotation is bool and name not in typing.get_args(Dtype))
"""The software the catalog says runs on each card (Software's own fields: FlashAttention-2, bitsandbytes, a serving
engine), each a feature by its field's name; the precisions it also marks are features of the datasheet's rates."""

FEATURES: Mapping[str, Callable[[GPU], bool]] = {
    "bf16": lambda g: g.bf16_dense_tflops is not None and g.software.bf16,
    "fp8": lambda g: g.fp8_dense_tflops is not None and g.software.fp8,
    "fp4": lambda g: g.fp4_dense_tflops is not None,
    "nvfp4": lambda g: g.fp4_dense_tflops is not None and g.vendor == "nvidia",  # NVIDIA's format, not OCP MX
    "ecc": lambda g: g.ecc,
    "mig": lambda g: g.mig_max_instances > 0,
    "nvlink": lambda g: (g.scale_up_link or "").startswith("nvlink"),
    "scale-up": lambda g: g.scale_up_link is not None,
    "p2p": lambda g: g.p2p,
    **{name.replace("_", "-"): _runs(name) for name in _PACKAGES},
    "cuda": lambda g: g.software.stack == "cuda",
    "rocm": lambda g: g.software.stack == "rocm",
}
"""Feature names accepted by ``gpuwise catalog list --feature``."""

VENDORS: tuple[str, ...] = typing.get_args(Vendor)
SEGMENTS: tuple[str, ...] = typing.get_args(Segment)


def price_usd(gpu: GPU) -> float | None:
    """The price a buyer pays today: street price where known, else the launch MSRP."""
    if gpu.price is None:
        return None
    return gpu.price.street_usd or gpu.price.msrp_usd


def _numeric_fields() -> tuple[str, ...]:
    names = []
    for name, info in GPU.model_fields.items():
        args = set(typing.get_args(info.annotation)) | {info.annotation}
        if args & {float, int} and name != "launch_year":
            names.append(name)
    return (*names, "launch_year", "price_usd")


SORT_FIELDS: tuple[str, ...] = _numeric_fields()
"""Numeric fields ``gpuwise catalog list --sort`` accepts (datasheet fields plus ``price_usd``)."""


def sort_value(gpu: GPU, field_name: str) -> float | None:
    if field_name == "price_usd":
        return price_usd(gpu)
    value = getattr(gpu, field_name)
    return None if value is None else float(value)


@dataclass(frozen=True)
class Catalog:
    """Validated records plus the name index; build with :func:`load_catalog`."""

    gpus: Mapping[str, GPU]
    offers: Mapping[str, CloudOffer]
    interconnects: Mapping[str, Interconnect]
    systems: Mapping[str, System] = field(default_factory=dict)
    override_files: tuple[str, ...] = ()
    _index: NameIndex = field(init=False, repr=False, compare=False)
    _offers_by_gpu: Mapping[str, tuple[CloudOffer, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", NameIndex.build({i: g.names for i, g in self.gpus.items()}))
        by_gpu: dict[str, list[CloudOffer]] = {}
        for offer in sorted(self.offers.values(), key=lambda o: o.usd_per_gpu_hour):
            by_gpu.setdefault(offer.gpu, []).append(offer)
        object.__setattr__(self, "_offers_by_gpu", {k: tuple(v) for k, v in by_gpu.items()})

    def gpu(self, name: str) -> GPU:
        """The GPU an id, alias or loose name designates (``"4090"``, ``"RTX 4090"``, ``"a100-sxm-80gb"``)."""
        return self.gpus[self._index.resolve(name)]

    def offers_for(self, gpu_id: str) -> list[CloudOffer]:
        """Cloud offers of one GPU, cheapest per GPU-hour first."""
        return list(self._offers_by_gpu.get(gpu_id, ()))

    def interconnect(self, link_id: str) -> Interconnect:
        try:
            return self.interconnects[link_id]
        except KeyError:
            known = ", ".join(sorted(self.interconnects))
            raise ConfigError(f"unknown interconnect {link_id!r}; known: {known}") from None

    def select(
        self,
        *,
        vendor: str | None = None,
        segment: str | None = None,
        min_memory_gb: float | None = None,
        features: Sequence[str] = (),
        sort: str | None = None,
        descending: bool = True,
    ) -> list[GPU]:
        """GPUs passing every filter; sorted by a numeric field (unknown values last) or by id."""
        _check_choice("vendor", vendor, VENDORS)
        _check_choice("segment", segment, SEGMENTS)
        for feature in features:
            _check_choice("feature", feature, tuple(FEATURES))
        if sort is not None:
            _check_choice("sort field", sort, SORT_FIELDS)
        if min_memory_gb is not None and not 0 <= min_memory_gb <= 1e6:  # NaN fails too
            raise ConfigError(f"--min-memory must be from 0 to 1,000,000 GB, got {min_memory_gb}")
        chosen = [
            g for g in self.gpus.values()
            if (vendor is None or g.vendor == vendor)
            and (segment is None or g.segment == segment)
            and (min_memory_gb is None or g.memory_gb >= min_memory_gb)
            and all(FEATURES[f](g) for f in features)
        ]
        if sort is None:
            return sorted(chosen, key=lambda g: g.id)
        known = [g for g in chosen if sort_value(g, sort) is not None]
        unknown = sorted((g for g in chosen if sort_value(g, sort) is None), key=lambda g: g.id)
        known.sort(key=lambda g: (sort_value(g, sort) or 0.0, g.id), reverse=descending)
        return known + unknown


def _check_choice(what: str, value: str | None, accepted: Sequence[str]) -> None:
    if value is not None and value not in accepted:
        raise ConfigError(f"unknown {what} {excerpt(value, 40)}; use one of: {', '.join(accepted)}")


def _check_references(catalog: Catalog) -> None:
    """Cross-record rules the per-record schema cannot see."""
    owners: dict[str, str] = {}
    for gpu in catalog.gpus.values():
        for name in gpu.names:
            key = compact_key(name)
            if owners.setdefault(key, gpu.id) != gpu.id:
                raise CatalogError(f"name {name!r} of {gpu.id} is also a name of {owners[key]}; names must be unique")
    for offer in catalog.offers.values():
        if offer.gpu not in catalog.gpus:
            raise CatalogError(f"offer {offer.id!r} names unknown GPU {offer.gpu!r}")
        for link in (offer.interconnect, offer.network):
            if link is not None and link not in catalog.interconnects:
                raise CatalogError(f"offer {offer.id!r} names unknown interconnect {link!r}")
    for system in catalog.systems.values():
        if system.network is not None and system.network not in catalog.interconnects:
            raise CatalogError(f"system {system.id!r} names unknown interconnect {system.network!r}")
        unknown = [g for g in system.gpus or () if g not in catalog.gpus]
        if unknown:
            raise CatalogError(f"system {system.id!r} names unknown GPU {unknown[0]!r}")


@functools.lru_cache(maxsize=8)
def _load(files: tuple[Path, ...], stamps: tuple[float, ...]) -> Catalog:
    del stamps  # part of the cache key only: an edited override file is read again
    gpus, offers, links, systems, origins = build_records(files)
    catalog = Catalog(
        gpus={g.id: g for g in gpus},
        offers={o.id: o for o in offers},
        interconnects={i.id: i for i in links},
        systems={s.id: s for s in systems},
        override_files=origins,
    )
    _check_references(catalog)
    return catalog


def load_catalog(catalog_files: Sequence[Path | str] = (), *, use_user_dir: bool = True) -> Catalog:
    """The shipped catalog with the user's config-folder overrides and ``catalog_files`` applied.

    Later files win over earlier ones; records are merged by id (see :mod:`gpuwise.catalog.loading`).
    """
    files = tuple(discover_override_files(catalog_files, use_user_dir=use_user_dir))
    return _load(files, tuple(p.stat().st_mtime for p in files))
