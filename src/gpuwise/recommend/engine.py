"""The recommender: every GPU x count x acquisition, filtered with a reason for each rejection, ranked.

Order of the checks, cheapest first: the card itself (vendor, OS, needed features, stack), the system it
must sit in when bought (chassis, PSU, slots), the workloads (memory, deadline, SLO via ``evaluate``),
then money (purchase budget, monthly budget). Deadline-driven sizing falls out of the enumeration: for
each GPU type and acquisition only the smallest count that meets every target is kept.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpuwise import budget
from gpuwise.catalog import FEATURES, GPU, Catalog, CloudOffer
from gpuwise.catalog.schema import STREET_MAX_AGE_DAYS
from gpuwise.estimate.calibration import Calibration
from gpuwise.estimate.compat import describe, unmet
from gpuwise.estimate.cost import tco as tco
from gpuwise.estimate.cost.energy import Energy
from gpuwise.recommend.evaluate import evaluate
from gpuwise.recommend.fit import Fit, Rejection
from gpuwise.recommend.hpc import hpc_card_rejection, talks_between_gpus
from gpuwise.recommend.machines import Machines
from gpuwise.recommend.placement import Placement, bought, rented
from gpuwise.recommend.request import Request
from gpuwise.workload.diffusion.pipeline import Pipeline
from gpuwise.workload.hpc.apps import HpcApp
from gpuwise.workload.jobs.hpc import HpcJob
from gpuwise.workload.jobs.image import ImageJob
from gpuwise.workload.jobs.job import InferJob, TrainJob
from gpuwise.workload.model.architecture import Architecture

COUNTS = (1, 2, 3, 4, 5, 6, 7, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
NODE_GPUS = 8  # beyond COUNTS, whole nodes of 8 (HGX/DGX baseboards, OAM platforms)


def _counts(max_gpus: int) -> list[int]:
    """COUNTS within ``max_gpus``, then whole nodes on the same 1-1.5-2 ladder (768, 1024, 1536, 2048, ...) and
    ``max_gpus`` itself rounded down to whole nodes: a 4,096-GPU ceiling is searched up to 4,096, not to 512."""
    counts = [n for n in COUNTS if n <= max_gpus]
    power = COUNTS[-1]
    while power * 3 // 2 <= max_gpus:
        counts += [n for n in (power * 3 // 2, power * 2) if n <= max_gpus]
        power *= 2
    top = max_gpus - max_gpus % NODE_GPUS
    if top > counts[-1]:
        counts.append(top)
    return counts


@dataclass(frozen=True)
class Option:
    gpu: str
    count: int
    acquisition: str  # buy-new, buy-used, rent:<provider>:<instance>
    fit: Fit
    usd_per_hour: float  # owned: TCO spread over the used hours; rented: the bill per hour
    tco_usd: float
    cost_per_job_usd: float | None
    capex_usd: float | None
    wall_kw: float
    why: str = ""
    warnings: tuple[str, ...] = ()
    placement: Placement | None = None
    memory_share: float = 0.0  # the fullest card's use over what it can give (usable memory)
    offer: CloudOffer | None = None  # rented: the offer billed (its provider, region, tier, instance)
    energy: Energy | None = None  # serving: joules per output token at the rate it serves (recommend/energy.py)

    @property
    def throughput(self) -> float:
        return self.fit.tokens_per_s or self.fit.qps_capacity or self.fit.work_per_s or 0.0

    @property
    def usd_per_mtok(self) -> float | None:
        """Serving: USD per million generated tokens at the planned rate (the hourly cost over the tokens an hour
        makes); owned hardware's hour is its TCO spread over the hours of use."""
        tokens = self.fit.output_tokens_per_s
        return self.usd_per_hour / (tokens * 3600) * 1e6 if tokens else None


@dataclass(frozen=True)
class Rejected:
    gpu: str
    count: int
    acquisition: str
    code: str
    reason: str
    gap: float = 1.0


@dataclass(frozen=True)
class Recommendation:
    request: Request
    options: tuple[Option, ...]
    rejected: tuple[Rejected, ...]
    pareto: tuple[Option, ...]
    nearest: tuple[Rejected, ...] = ()
    assumptions: tuple[str, ...] = field(default_factory=tuple)
    findings: tuple[str, ...] = ()  # what the ranking shows beyond its first row (recommend/low_power.py)
    defaults: tuple[str, ...] = ()  # the cost drivers the request left free, with their values (recommend/defaults.py)


def card_rejection(gpu: GPU, request: Request) -> Rejection | None:
    """The card itself: vendor, OS, the features the user needs, and the compatibility table's hard rows for every
    workload's job (estimate/compat.py, the table `estimate` warns from)."""
    c = request.constraints
    if gpu.vendor in c.exclude_vendors:
        return Rejection("vendor", f"{gpu.vendor} is excluded")
    if c.os == "windows" and gpu.software.stack != "cuda":
        return Rejection("os", f"{gpu.software.stack} has no PyTorch build for native Windows")
    if gpu.form_factor == "module" and c.os not in (None, "linux"):
        return Rejection("os", "Jetson modules run Linux (JetPack) only")
    if gpu.form_factor == "soc" and gpu.vendor == "nvidia" and c.os not in (None, "linux"):
        return Rejection("os", f"{gpu.id} runs NVIDIA DGX OS (Ubuntu Linux) only")
    if (gpu.software.stack == "metal") != (c.os == "macos") and c.os is not None:
        return Rejection("os", f"Apple silicon runs macOS only (MLX, llama.cpp Metal), not {c.os}"
                         if gpu.software.stack == "metal" else f"macOS has no {gpu.software.stack} driver for {gpu.id}")
    for need in c.needs:
        if not FEATURES[need](gpu):
            return Rejection("feature", f"no {need}")
    if gpu.segment == "edge" and any(w.task == "train" for w in request.workloads) and not request.gpus:
        return Rejection("feature", "edge module built for deployment, not training (LPDDR shared with the CPU, "
                                    "no multi-GPU); list it in the request's gpus to consider it anyway")
    for workload in request.workloads:
        for requirement in unmet(workload.job, gpu):
            if requirement.hard:
                return Rejection(requirement.code, describe(requirement, gpu))
        if isinstance(workload.job, HpcJob):
            problem = hpc_card_rejection(workload.job, gpu)
            if problem is not None:
                return problem
    return None


def system_rejection(gpu: GPU, count: int, request: Request) -> Rejection | None:
    """Cards that are not cards: a Jetson module or a unified-memory machine is a whole computer, one GPU; and an
    SXM/OAM module needs a server. (Slots, boards, networks and power: recommend/placement.py.)"""
    c = request.constraints
    if gpu.form_factor == "module" and count > 1:
        return Rejection("count", "Jetson modules do not pool into one multi-GPU system", count)
    if gpu.form_factor == "soc" and count > 1:
        way = {"apple": "exo or MLX distributed over Thunderbolt", "nvidia": "ConnectX-7 between two DGX Sparks"}.get(
            gpu.vendor, "llama.cpp RPC over Ethernet")
        return Rejection("count", f"a unified-memory machine is one GPU; clustering several ({way}) is not modelled",
                         count)
    if gpu.form_factor in ("soc", "module") and c.chassis is not None:
        what = "a Jetson module is a standalone embedded computer" if gpu.form_factor == "module" else (
            f"{gpu.id} is a whole computer")
        return Rejection("chassis", f"{what}, not a card for a {c.chassis}")
    if gpu.form_factor in ("sxm", "oam", "superchip") and c.chassis in ("desktop", "workstation"):
        board = "an HGX baseboard" if gpu.form_factor == "sxm" else "an OAM/superchip server"
        return Rejection("chassis", f"{gpu.form_factor.upper()} module needs {board} (server chassis)")
    if gpu.cooling == "passive" and gpu.form_factor == "pcie" and c.chassis in ("desktop", "workstation"):
        return Rejection("chassis", "passive data-center card needs server airflow")
    return None


def _acquisitions(gpu: GPU, catalog: Catalog, request: Request) -> list[tuple[str, float | None, CloudOffer | None]]:
    """(label, unit purchase price or None, offer or None) for each way to get this GPU."""
    out: list[tuple[str, float | None, CloudOffer | None]] = []
    price = gpu.price
    street = price.street_on(request.prices_on) if price else None
    if "buy-new" in request.acquisitions and street is not None:
        out.append(("buy-new", street, None))
    if "buy-used" in request.acquisitions and price and price.used_usd:
        out.append(("buy-used", price.used_usd, None))
    if "rent" in request.acquisitions:
        for offer in catalog.offers_for(gpu.id):
            if offer.tier == "spot" and not request.spot:
                continue
            if request.providers is None or offer.provider in request.providers:
                tier = "" if offer.tier == "on-demand" else f"{offer.tier}:"
                out.append((f"rent:{offer.provider}:{tier}{offer.instance}", None, offer))
    return out


def _unpriced(gpu: GPU, request: Request) -> str:
    """Why a card has no way to be bought, for the rejection line."""
    add = ": add yours with --catalog FILE (README, 'Your own records and prices')"
    p = gpu.price
    if p is None:
        return "; the catalog has no dated price for it" + add
    if "buy-new" in request.acquisitions and p.street_on(request.prices_on) is None:
        had = f"street {p.street_usd:,.0f} USD" if p.street_usd else f"launch MSRP {p.msrp_usd or 0:,.0f} USD"
        return (f"; buying new needs a street price from the last {STREET_MAX_AGE_DAYS} days and the catalog's is "
                f"{had} of {p.as_of}" + add)
    return ""


def _option(gpu: GPU, count: int, label: str, price: float | None, offer: CloudOffer | None, fit: Fit,
            request: Request, place: Placement) -> Option | Rejected:
    usage = request.usage
    if usage.pattern == "one-off" and fit.job_hours is not None:
        usage = usage.for_one_job(fit.job_hours)  # the job's hours, then sold again (Request checks a job exists)
    if offer is not None:
        redone = 1 + request.spot_overhead if offer.tier == "spot" else 1.0  # preempted hours run again
        per_hour = tco.rent_usd_per_hour(offer, count) * redone
        total = tco.rent_cost(offer, count, usage) * redone
        kw = tco.wall_kw(gpu, count, place.machines)
        monthly = per_hour * usage.hours_per_day * 365 / 12 if usage.years >= 1 / 12 else per_hour * usage.hours
        if request.monthly_budget_usd is not None and monthly > request.monthly_budget_usd:
            return Rejected(gpu.id, count, label, "budget", f"{monthly:,.0f} USD a month > the monthly budget "
                                                            f"{request.monthly_budget_usd:,.0f}",
                            monthly / request.monthly_budget_usd)
        capex = None
    else:
        assert price is not None
        buy = tco.buy_cost(gpu, count, price, usage, host_usd=place.host_usd, machines=place.machines)
        if request.budget_usd is not None and buy.capex_usd > request.budget_usd:
            what = "cards + host" if buy.host_usd else "cards; your own host"
            return Rejected(gpu.id, count, label, "budget", f"purchase {buy.capex_usd:,.0f} USD ({what}) > "
                                                            f"budget {request.budget_usd:,.0f}",
                            buy.capex_usd / request.budget_usd)
        total, per_hour, kw, capex = buy.tco_usd, tco.owned_usd_per_hour(buy, usage), buy.wall_kw, buy.capex_usd
    job_cost = per_hour * fit.job_hours if fit.job_hours is not None else None
    return Option(gpu.id, count, label, fit, per_hour, total, job_cost, capex, kw,
                  warnings=_warnings(gpu, count, label) + place.notes + fit.notes,
                  placement=place, memory_share=fit.per_gpu_bytes / gpu.usable_memory_bytes, offer=offer)


def _warnings(gpu: GPU, count: int, label: str) -> tuple[str, ...]:
    notes = []
    if label == "buy-used":
        notes.append("used card: run `gpuwise burn-in` (memory test, thermals) before paying; mining wear is common")
    if gpu.power_connector and "16-pin" in gpu.power_connector and not label.startswith("rent"):
        notes.append("16-pin 12VHPWR/12V-2x6: seat the plug fully and avoid bending the cable near it")
    if gpu.segment == "consumer" and not gpu.p2p and count > 1:
        notes.append("no GPU peer-to-peer on GeForce: multi-GPU traffic goes through host memory")
    return tuple(notes)


def candidate_counts(request: Request) -> list[int]:
    """Counts to try: 1-8 and multiples of 8, within max_gpus and divisible by every workload's TP x PP; image
    pipelines are independent one-GPU copies, so for them every count up to 32."""
    if all(isinstance(w.job, ImageJob) for w in request.workloads):
        most = request.constraints.max_gpus
        return sorted({*range(1, min(most, 32) + 1), *_counts(most)})
    step = 1
    for w in request.workloads:
        if isinstance(w.job, TrainJob):
            step = math.lcm(step, w.job.tp * w.job.pp)
    return [n for n in _counts(request.constraints.max_gpus) if n % step == 0]


def enumerate_options(request: Request, catalog: Catalog, archs: dict[str, Architecture | Pipeline | HpcApp],
                      calibrations: Mapping[str, Calibration] | None = None) -> tuple[list[Option], list[Rejected]]:
    options: list[Option] = []
    rejected: list[Rejected] = []
    gpus = [catalog.gpu(g) for g in request.gpus] if request.gpus else list(catalog.gpus.values())
    has_target = any(w.deadline_hours or w.qps or w.slos for w in request.workloads)
    for gpu in gpus:
        budget.checkpoint()
        ways = _acquisitions(gpu, catalog, request)
        if not ways:
            rejected.append(Rejected(gpu.id, 0, "-", "offer", "no price or cloud offer matches the allowed "
                                                              "acquisitions" + _unpriced(gpu, request)))
            continue
        problem = card_rejection(gpu, request)
        if problem is not None:
            rejected += [Rejected(gpu.id, 0, label, problem.code, problem.reason, problem.gap) for label, _, _ in ways]
            continue
        found = _options_for_gpu(gpu, ways, request, catalog, archs, stop_at_first=has_target,
                                 calibration=(calibrations or {}).get(gpu.id))
        options += found[0]
        rejected += found[1]
    return options, rejected


_MORE_CANNOT_HELP = frozenset({"network", "chassis", "power"})  # more cards only make these worse


def _options_for_gpu(gpu: GPU, ways: list[tuple[str, float | None, CloudOffer | None]], request: Request,
                     catalog: Catalog, archs: dict[str, Architecture | Pipeline | HpcApp], *, stop_at_first: bool,
                     calibration: Calibration | None = None, from_count: int = 1
                     ) -> tuple[list[Option], list[Rejected]]:
    options: list[Option] = []
    rejected: list[Rejected] = []
    open_ways = list(ways)
    evaluated: dict[tuple[int, Machines], Fit | Rejection] = {}
    for count in candidate_counts(request):
        if count < from_count:
            continue
        if not open_ways:
            break
        still_open = []
        for label, price, offer in open_ways:
            outcome = _place_and_evaluate(gpu, count, offer, request, catalog, archs, calibration, evaluated)
            if isinstance(outcome, Rejection):
                rejected.append(Rejected(gpu.id, count, label, outcome.code, outcome.reason, outcome.gap))
                if outcome.code not in _MORE_CANNOT_HELP:
                    still_open.append((label, price, offer))
                continue
            fit, place = outcome
            made = _option(gpu, count, label, price, offer, fit, request, place)
            if isinstance(made, Rejected):
                rejected.append(made)
                continue
            options.append(made)
            if not stop_at_first and count < 8:
                still_open.append((label, price, offer))
        open_ways = still_open
    return options, rejected


def options_from(option: Option, request: Request, catalog: Catalog,
                 archs: dict[str, Architecture | Pipeline | HpcApp],
                 calibration: Calibration | None = None) -> tuple[list[Option], list[Rejected]]:
    """The option's GPU and way evaluated again from its count upward, the first count that qualifies kept (what
    the ranking does once it simulates what it shows: recommend/simulated.py)."""
    gpu = catalog.gpu(option.gpu)
    ways = [way for way in _acquisitions(gpu, catalog, request) if way[0] == option.acquisition]
    return _options_for_gpu(gpu, ways, request, catalog, archs, stop_at_first=True, calibration=calibration,
                            from_count=option.count)


def _place_and_evaluate(gpu: GPU, count: int, offer: CloudOffer | None, request: Request, catalog: Catalog,
                        archs: dict[str, Architecture | Pipeline | HpcApp], calibration: Calibration | None,
                        evaluated: dict[tuple[int, Machines], Fit | Rejection]) -> tuple[Fit, Placement] | Rejection:
    """Where ``count`` cards sit for this way of getting them, then every workload on them (each distinct set of
    machines evaluated once per card)."""
    problem = system_rejection(gpu, count, request)
    if problem is not None:
        return problem
    talks = any(w.task == "train" or talks_between_gpus(w.job) for w in request.workloads)
    if offer is not None:
        place = rented(gpu, offer, count, catalog, talks=talks)
    else:
        place = bought(gpu, count, request, catalog, network=named_network(request), talks=talks)
    if isinstance(place, Rejection):
        return place
    machines = Machines(place.machines, place.gpus_per_machine, place.network, place.slot_link,
                        linked=place.machines == 1 or place.network is not None)
    key = (count, machines)
    if key not in evaluated:
        evaluated[key] = evaluate(archs, request.workloads, gpu, catalog, count, calibration, machines)
    fit = evaluated[key]
    return fit if isinstance(fit, Rejection) else (fit, place)


def named_network(request: Request) -> str | None:
    """The cluster network the user named for a workload (--network), used between bought machines."""
    return next((w.job.network for w in request.workloads if isinstance(w.job, (TrainJob, InferJob))
                 and w.job.network), None)


def best_per_gpu_and_way(options: Iterable[Option], key: object) -> list[Option]:
    """Keep, for each GPU type and acquisition, the best count by the ranking key."""
    best: dict[tuple[str, str], Option] = {}
    for option in options:
        slot = (option.gpu, option.acquisition)
        if slot not in best or key(option) < key(best[slot]):  # type: ignore[operator]
            best[slot] = option
    return list(best.values())
