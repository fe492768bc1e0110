"""Total cost of ownership: buy (new or used) against rent, over a horizon, and the break-even usage.

Buy:  GPUs + host share + energy (GPUs at 70 % of TDP + host) x PUE x hours x price + expected repairs
      - residual value at the horizon (the segment's decay curve, capped at the dated used price, less the
      selling fee; the host is not resold). One job (--usage one-off) is the same over the job's hours.
Rent: hourly price x hours (storage and egress are not included; they are stated as an assumption).
Every constant is in ``constants.py`` with its source. Worked check (decision notes, sec. 6.3): an RTX 4090
(2,500 USD) in a 1,000 USD desktop share, 0.515 kW at the wall x 8 h x 365 x 0.16 USD = 241 USD of energy a year.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from gpuwise.catalog import GPU, CloudOffer, System
from gpuwise.catalog.systems import SystemChoice, choose
from gpuwise.estimate import constants as C
from gpuwise.flags import Flag

HOURS_PER_YEAR = 365.0
_USAGE = frozenset({"tco", "recommend"})
_ENERGY = _USAGE | {"estimate", "serve-sim"}  # energy per output token (energy.py) is charged at the same price and PUE
USAGE = "Usage and energy"
Pattern = Literal["ongoing", "one-off"]


class Usage(BaseModel):
    """How the hardware is used over its life: the basis of every ownership cost."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    hours_per_day: Annotated[float, Field(gt=0, le=24), Flag(_USAGE, USAGE)] = Field(
        default=8.0, description="hours of use per day")
    years: Annotated[float, Field(gt=0, le=10), Flag(_USAGE, USAGE)] = Field(
        default=3.0, description="horizon in years")
    usd_per_kwh: Annotated[float, Field(ge=0, le=5), Flag(_ENERGY, USAGE)] = Field(
        default=0.16, description="electricity price (EIA US residential average 15.45 c/kWh, Jan 2024)")
    pue: Annotated[float, Field(ge=1.0, le=3.0), Flag(_ENERGY, USAGE)] = Field(
        default=1.0, description="power usage effectiveness: 1.0 at home; data centers 1.1-1.6 (Uptime Institute)")
    pattern: Annotated[Pattern, Flag(frozenset({"recommend"}), USAGE, name="--usage")] = Field(
        default="ongoing", description="ongoing: the hardware's cost over --years of use; one-off: one training "
                                       "job, rent billed for its hours, a purchase sold again at its end")

    @property
    def hours(self) -> float:
        return self.hours_per_day * HOURS_PER_YEAR * self.years

    def for_one_job(self, job_hours: float) -> Usage:
        """The usage of one job of ``job_hours`` run around the clock (--usage one-off): bought hardware is sold
        again when it ends."""
        years = min(max(job_hours, 1e-3) / 24 / HOURS_PER_YEAR, 10.0)  # billed by the hour's fraction
        return self.model_copy(update={"hours_per_day": 24.0, "years": years})


@dataclass(frozen=True)
class BuyCost:
    gpus_usd: float
    host_usd: float
    energy_usd: float
    repairs_usd: float
    residual_usd: float
    wall_kw: float

    @property
    def capex_usd(self) -> float:
        return self.gpus_usd + self.host_usd

    @property
    def tco_usd(self) -> float:
        return self.capex_usd + self.energy_usd + self.repairs_usd - self.residual_usd


def host_cost(gpu: GPU, count: int, systems: Iterable[System]) -> float:
    """The machines ``count`` cards go into, without the cards (catalog/systems.py picks them: a desktop holds 2,
    a workstation 4, a server 8, an HGX/OAM node its board); 0 for a computer that is its own GPU (Jetson, Mac,
    DGX Spark) or a card no system takes."""
    chosen = choose(systems, gpu, count)
    if isinstance(chosen, SystemChoice):
        return chosen.host_usd
    if chosen is None:
        return 0.0
    boards = sorted(gpu.board_gpus or (chosen.gpu_slots,))
    board = next((b for b in boards if b >= count), boards[-1])  # the modules sit on the board they fill part of
    return chosen.host_cost_usd(board) * -(-count // board)


def wall_kw(gpu: GPU, count: int, machines: int | None = None) -> float:
    """The GPUs at their load share of TDP plus their hosts, ``machines`` of them (default: as many as the cards
    fill, 8 to a server, 4 to a desktop): a server's share of its GPUs' TDP but never less than a host's own draw
    per machine (one 72 W L4 does not run in a 22 W server)."""
    gpus = gpu.tdp_w * count * C.GPU_LOAD_POWER.value
    return (gpus + host_w(gpu, count, machines)) / 1000.0


def host_w(gpu: GPU, count: int, machines: int | None = None) -> float:
    """The hosts' own draw for ``count`` cards (CPUs, memory, fans, NICs): a server's share of its GPUs' TDP but never
    less than a host's own draw per machine; a desktop's CPU and platform per machine. The one host share that
    ownership (:func:`wall_kw`) and energy per token (energy.py) both charge."""
    if gpu.segment == "datacenter":
        hosts = machines or -(-count // int(max(gpu.board_gpus or (C.SERVER_GPU_SLOTS.value,))))
        return max(gpu.tdp_w * count * C.SERVER_POWER_OVERHEAD.value, C.HOST_POWER_DESKTOP.value * hosts)
    return C.HOST_POWER_DESKTOP.value * (machines or max(1, -(-count // 4)))


def residual_fraction(gpu: GPU, years: float, unit_price_usd: float | None = None) -> float:
    """What a card bought at ``unit_price_usd`` fetches after ``years``, as a share of that price: the segment's
    decay curve, never above the card's dated used price (a card bought new sells as used the day after), less the
    selling fee."""
    curve = float(C.RESIDUAL_DATACENTER.value ** (years / 3.0) if gpu.segment == "datacenter"
                  else C.RESIDUAL_CONSUMER.value ** (years / 5.5))
    used = gpu.price.used_usd if gpu.price else None
    if used is not None and unit_price_usd:
        curve = min(curve, used / unit_price_usd)
    return curve * (1 - C.SELLING_FEE.value)


def buy_cost(gpu: GPU, count: int, unit_price_usd: float, usage: Usage, *, host_usd: float,
             machines: int | None = None) -> BuyCost:
    """Buying ``count`` cards at ``unit_price_usd`` into ``machines`` (default: :func:`wall_kw`'s) costing
    ``host_usd`` without them (0 for a computer the user already owns; :func:`host_cost` for the catalog's
    systems)."""
    gpus = unit_price_usd * count
    kw = wall_kw(gpu, count, machines)
    energy = kw * usage.pue * usage.hours * usage.usd_per_kwh
    rate = C.FAILURE_RATE_DATACENTER.value if gpu.segment == "datacenter" else C.FAILURE_RATE_CONSUMER.value
    repairs = count * rate * usage.years * C.REPAIR_COST.value * unit_price_usd
    residual = gpus * residual_fraction(gpu, usage.years, unit_price_usd)
    return BuyCost(gpus, host_usd, energy, repairs, residual, kw)


def rent_usd_per_hour(offer: CloudOffer, count: int) -> float:
    return offer.usd_per_gpu_hour * count


def rent_cost(offer: CloudOffer, count: int, usage: Usage) -> float:
    return rent_usd_per_hour(offer, count) * usage.hours


def break_even_hours_per_month(buy: BuyCost, usage: Usage, rent_per_hour: float) -> float | None:
    """Monthly hours above which buying is cheaper than renting over the horizon; None if renting always wins."""
    fixed = buy.capex_usd + buy.repairs_usd - buy.residual_usd
    energy_per_hour = buy.wall_kw * usage.pue * usage.usd_per_kwh
    margin = rent_per_hour - energy_per_hour
    if margin <= 0:
        return None
    return fixed / margin / (usage.years * 12)


def owned_usd_per_hour(buy: BuyCost, usage: Usage) -> float:
    return buy.tco_usd / usage.hours if usage.hours else float("inf")
