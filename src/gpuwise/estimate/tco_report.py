"""`gpuwise tco`: owning N cards against renting them, year by year, with the break-even usage."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gpuwise.catalog import GPU, Catalog, CloudOffer
from gpuwise.errors import ConfigError
from gpuwise.estimate import cost


@dataclass(frozen=True)
class RentLine:
    offer: CloudOffer
    per_hour_usd: float
    by_year_usd: tuple[float, ...]
    break_even_hours_per_month: float | None


@dataclass(frozen=True)
class TcoReport:
    gpu: GPU
    count: int
    unit_price_usd: float
    price_basis: str
    usage: cost.Usage
    buy: cost.BuyCost
    buy_by_year_usd: tuple[float, ...]
    rent: tuple[RentLine, ...]


def _unit_price(gpu: GPU, price_usd: float | None, used: bool) -> tuple[float, str]:
    if price_usd is not None:
        if price_usd <= 0:
            raise ConfigError(f"--price-usd must be > 0, got {price_usd}")
        return price_usd, "given"
    p = gpu.price
    value = (p.used_usd if used else (p.street_usd or p.msrp_usd)) if p else None
    if value is None or p is None:
        kind = "used" if used else "purchase"
        raise ConfigError(f"{gpu.id} has no {kind} price in the catalog; give --price-usd or add one with --catalog")
    basis = "used" if used else ("street" if p.street_usd else "MSRP")
    return value, f"{basis} price as of {p.as_of}"


def tco_report(gpu: GPU, catalog: Catalog, *, count: int, price_usd: float | None, used: bool,
               usage: cost.Usage) -> TcoReport:
    if count < 1:
        raise ConfigError(f"--count must be >= 1, got {count}")
    unit, basis = _unit_price(gpu, price_usd, used)
    years = max(1, round(usage.years))
    buy = cost.buy_cost(gpu, count, unit, usage)
    by_year = tuple(cost.buy_cost(gpu, count, unit, dataclasses.replace(usage, years=y)).tco_usd
                    for y in range(1, years + 1))
    lines = []
    for offer in catalog.offers_for(gpu.id):
        if count % offer.gpus:
            continue
        per_hour = cost.rent_usd_per_hour(offer, count)
        lines.append(RentLine(offer, per_hour, tuple(per_hour * usage.hours_per_day * 365 * y
                                                     for y in range(1, years + 1)),
                              cost.break_even_hours_per_month(buy, usage, per_hour)))
    return TcoReport(gpu, count, unit, basis, usage, buy, by_year, tuple(lines))
