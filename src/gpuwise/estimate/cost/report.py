"""`gpuwise tco`: owning N cards against renting them, year by year, with the break-even usage."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from gpuwise.catalog import GPU, Catalog, CloudOffer
from gpuwise.errors import ConfigError
from gpuwise.estimate.cost import tco as cost
from gpuwise.flags import Flag

_TCO = frozenset({"tco"})


class Purchase(BaseModel):
    """What `gpuwise tco` prices: how many cards, at what price, new or used."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    count: Annotated[int, Field(ge=1, le=4096), Flag(_TCO, "Purchase")] = Field(
        default=1, description="cards bought (or rented)")
    price_usd: Annotated[float | None, Field(gt=0, le=1e8), Flag(_TCO, "Purchase")] = Field(
        default=None, description="price of one card (default: the catalog's street price, else its MSRP)")
    used: Annotated[bool, Flag(_TCO, "Purchase")] = Field(default=False, description="use the catalog's used price")


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
    buy_by_year_usd: tuple[float, ...]  # cumulative cost net of what the cards would resell for at that year's end
    rent: tuple[RentLine, ...]
    cash_by_year_usd: tuple[float, ...] = ()  # what has been paid out by then: cards, host, energy, repairs
    residual_by_year_usd: tuple[float, ...] = ()  # what the cards would resell for then


def _unit_price(gpu: GPU, price_usd: float | None, used: bool) -> tuple[float, str]:
    if price_usd is not None:
        return price_usd, "given"
    p = gpu.price
    value = (p.used_usd if used else (p.street_usd or p.msrp_usd)) if p else None
    if value is None or p is None:
        kind = "used" if used else "purchase"
        raise ConfigError(f"{gpu.id} has no {kind} price in the catalog; give --price-usd or add one with --catalog")
    basis = "used" if used else ("street" if p.street_usd else "MSRP")
    return value, f"{basis} price as of {p.as_of}"


def tco_report(gpu: GPU, catalog: Catalog, purchase: Purchase, usage: cost.Usage) -> TcoReport:
    count = purchase.count
    unit, basis = _unit_price(gpu, purchase.price_usd, purchase.used)
    years = max(1, round(usage.years))
    host = cost.host_cost(gpu, count, catalog.systems.values())
    buy = cost.buy_cost(gpu, count, unit, usage, host_usd=host)
    yearly = [cost.buy_cost(gpu, count, unit, usage.model_copy(update={"years": float(y)}), host_usd=host)
              for y in range(1, years + 1)]
    by_year = tuple(b.tco_usd for b in yearly)
    cash = tuple(b.capex_usd + b.energy_usd + b.repairs_usd for b in yearly)
    residual = tuple(b.residual_usd for b in yearly)
    lines = []
    for offer in catalog.offers_for(gpu.id):
        if count % offer.gpus:
            continue
        per_hour = cost.rent_usd_per_hour(offer, count)
        lines.append(RentLine(offer, per_hour, tuple(per_hour * usage.hours_per_day * 365 * y
                                                     for y in range(1, years + 1)),
                              cost.break_even_hours_per_month(buy, usage, per_hour)))
    return TcoReport(gpu, count, unit, basis, usage, buy, by_year, tuple(lines), cash, residual)
