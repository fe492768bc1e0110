"""Total cost of ownership: buy (new or used) against rent, over a horizon, and the break-even usage.

Buy:  GPUs + host share + energy (GPUs at 70 % of TDP + host) x PUE x hours x price + expected repairs
      - residual value at the horizon.
Rent: hourly price x hours (storage and egress are not included; they are stated as an assumption).
Every constant is in ``constants.py`` with its source. Worked check (decision notes, sec. 6.3): an RTX 4090
(2,500 USD) in a 1,000 USD desktop share, 0.515 kW at the wall x 8 h x 365 x 0.16 USD = 241 USD of energy a year.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.catalog import GPU, CloudOffer
from gpuwise.errors import ConfigError
from gpuwise.estimate import constants as C

HOURS_PER_YEAR = 365.0
# (low, high, low inclusive): the same ranges as recommend.request.Usage, for callers that skip the schema
USAGE_RANGES = {"hours_per_day": (0.0, 24.0, False), "years": (0.0, 10.0, False), "usd_per_kwh": (0.0, 5.0, True),
                "pue": (1.0, 3.0, True)}


@dataclass(frozen=True)
class Usage:
    hours_per_day: float = 8.0
    years: float = 3.0
    usd_per_kwh: float = 0.16
    pue: float = 1.0

    def __post_init__(self) -> None:
        for name, (low, high, inclusive) in USAGE_RANGES.items():
            value = getattr(self, name)
            inside = (low <= value if inclusive else low < value) and value <= high  # NaN fails both
            if not inside:
                bound = ">=" if inclusive else ">"
                raise ConfigError(f"--{name.replace('_', '-')} must be {bound} {low:g} and <= {high:g}, got {value}")

    @property
    def hours(self) -> float:
        return self.hours_per_day * HOURS_PER_YEAR * self.years


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


def host_cost(gpu: GPU, count: int) -> float:
    """Host share for ``count`` cards: desktops hold 2, workstations 4, servers 8 (HGX/OAM boards per GPU)."""
    if gpu.form_factor in ("sxm", "oam", "superchip"):
        return C.HOST_COST_HGX_PER_GPU.value * count
    if gpu.form_factor == "module":
        return 0.0  # Jetson: the module is the computer
    if gpu.segment == "consumer" and count <= 2:
        return C.HOST_COST_DESKTOP.value
    if count <= 4 and gpu.segment in ("consumer", "workstation"):
        return C.HOST_COST_WORKSTATION.value
    return C.HOST_COST_SERVER_PCIE.value * -(-count // 8)


def wall_kw(gpu: GPU, count: int) -> float:
    gpus = gpu.tdp_w * count * C.GPU_LOAD_POWER.value
    if gpu.segment == "datacenter":
        host = gpu.tdp_w * count * C.SERVER_POWER_OVERHEAD.value
    else:
        host = C.HOST_POWER_DESKTOP.value * max(1, -(-count // 4))
    return (gpus + host) / 1000.0


def residual_fraction(gpu: GPU, years: float) -> float:
    if gpu.segment == "datacenter":
        return float(C.RESIDUAL_DATACENTER.value ** (years / 3.0))
    return float(C.RESIDUAL_CONSUMER.value ** (years / 5.5))


def buy_cost(gpu: GPU, count: int, unit_price_usd: float, usage: Usage) -> BuyCost:
    gpus = unit_price_usd * count
    kw = wall_kw(gpu, count)
    energy = kw * usage.pue * usage.hours * usage.usd_per_kwh
    rate = C.FAILURE_RATE_DATACENTER.value if gpu.segment == "datacenter" else C.FAILURE_RATE_CONSUMER.value
    repairs = count * rate * usage.years * C.REPAIR_COST.value * unit_price_usd
    residual = gpus * residual_fraction(gpu, usage.years)
    return BuyCost(gpus, host_cost(gpu, count), energy, repairs, residual, kw)


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
