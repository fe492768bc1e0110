"""Ranking by the user's objective, the cost-vs-time Pareto front, and a plain reason for every option."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace

from gpuwise.catalog import Catalog
from gpuwise.estimate import constants as C
from gpuwise.estimate.calibration import Calibration
from gpuwise.estimate.cost.energy import Energy
from gpuwise.estimate.plan import require_training_knobs
from gpuwise.recommend.defaults import left_free
from gpuwise.recommend.energy import option_energy
from gpuwise.recommend.engine import (
    Option,
    Recommendation,
    Rejected,
    best_per_gpu_and_way,
    enumerate_options,
    options_from,
)
from gpuwise.recommend.evaluate import REPLICAS
from gpuwise.recommend.low_power import compared, delivered_per_watt, low_power_finding, needed_rate, per_watt_text
from gpuwise.recommend.request import Request, Workload
from gpuwise.recommend.simulated import SIMULATIONS, rate_unit
from gpuwise.workload.diffusion.pipeline import Pipeline, find_pipeline
from gpuwise.workload.hpc.apps import HpcApp, app_profile
from gpuwise.workload.jobs.hpc import HpcJob
from gpuwise.workload.jobs.job import TrainJob
from gpuwise.workload.kind import workload_kind
from gpuwise.workload.model.architecture import Architecture
from gpuwise.workload.model.resolve import resolve_model


def _time(option: Option) -> float:
    if option.fit.job_hours is not None:
        return option.fit.job_hours
    if option.fit.qps_capacity is None and option.fit.tokens_per_s:  # one user: milliseconds per token
        return 1e3 / option.fit.tokens_per_s
    return option.fit.p99_ms or 0.0


def ranking_key(objective: str, needed: float | None = None,
                energy: Callable[[Option], Energy | None] | None = None) -> Callable[[Option], tuple[float, float]]:
    """Smaller is better; ties broken by total cost. ``needed``: the serving rate to meet (per watt counts only
    the work the load uses); ``energy``: an option's energy per output token (the energy objective; an option
    without one, training or a model that makes no tokens, ranks last)."""
    def key(o: Option) -> tuple[float, float]:
        if objective == "cost-per-job":
            primary = o.cost_per_job_usd if o.cost_per_job_usd is not None else o.usd_per_hour
        elif objective == "time":
            primary = _time(o)
        elif objective == "perf-per-dollar":
            primary = -o.throughput / max(o.tco_usd, 1e-9)
        elif objective == "perf-per-watt":
            primary = -delivered_per_watt(o, needed)
        elif objective == "usd-per-mtok":
            primary = o.usd_per_mtok if o.usd_per_mtok is not None else math.inf
        elif objective == "energy":
            found = (energy or (lambda option: option.energy))(o)
            primary = found.joules_per_output_token if found is not None else math.inf
        else:
            primary = o.tco_usd
        return primary, o.tco_usd
    return key


def _within_headroom_first(key: Callable[[Option], tuple[float, float]], request: Request
                           ) -> Callable[[Option], tuple[bool, float, float]]:
    """The ranking key after one test: options that leave --min-headroom of each card's memory free come before
    those that do not, whatever their cost (a plan at 99 % of memory fails on the first longer batch)."""
    limit = 1 - request.constraints.min_headroom

    def within_first(o: Option) -> tuple[bool, float, float]:
        return (o.memory_share > limit, *key(o))

    return within_first


def pareto_front(options: list[Option]) -> list[Option]:
    """Options no other option beats on both total cost and time (time per job, or P99 latency)."""
    front = []
    for o in options:
        dominated = any(
            (p.tco_usd <= o.tco_usd and _time(p) <= _time(o)) and (p.tco_usd < o.tco_usd or _time(p) < _time(o))
            for p in options
        )
        if not dominated:
            front.append(o)
    return sorted(front, key=lambda o: o.tco_usd)


def _why(option: Option, rank: int, best: Option | None, request: Request, capacity_gib: float) -> str:
    u = request.usage
    parts = [f"{option.fit.per_gpu_bytes / 2**30:,.1f} of {capacity_gib:,.0f} GiB per GPU"]
    headroom = request.constraints.min_headroom
    if option.memory_share > 1 - headroom:
        parts[0] += (f", less than the {headroom:.0%} headroom free (--min-headroom): ranked after the options "
                     "that leave it")
    if option.placement is not None:
        parts.append(_machines_text(option))
    if option.fit.job_hours is not None:
        parts.append(_hours_text(option.fit.job_hours, option.fit.job_hours_high or option.fit.job_hours))
    parts += [_science_text(s) for s in option.fit.settings if "app" in s]
    if option.fit.seconds_per_image is not None and option.fit.qps_capacity is not None:
        parts.append(f"{option.fit.seconds_per_image:,.1f} s per image, {option.fit.qps_capacity * 3600:,.0f} "
                     f"images/h on {option.count} pipeline(s)")
    elif option.fit.qps_capacity is not None:
        parts.append(_capacity_text(option, request))
    elif option.fit.tokens_per_s is not None and option.fit.job_hours is None:
        parts.append(f"{option.fit.tokens_per_s:,.1f} tokens/s for one user (TP {option.fit.tp})")
    horizon = f"{option.tco_usd:,.0f} USD over {u.years:g} y at {u.hours_per_day:g} h/day"
    if u.pattern == "one-off" and option.fit.job_hours is not None:
        horizon = f"{option.tco_usd:,.0f} USD for the one job " + (
            "(rent billed for its hours)" if option.acquisition.startswith("rent") else
            f"(bought, {option.capex_usd or 0:,.0f} USD, and sold again at its end)")
    if request.objective == "perf-per-watt":
        parts.append(per_watt_text(option, needed_rate(request)))
    if request.objective == "energy" and option.energy is not None:
        parts.append(f"{option.energy.joules_per_output_token:,.3g} J per output token at the rate it serves")
    if rank == 0:
        lead = f"best by {request.objective}: {horizon}"
    elif best is not None:
        lead = f"{option.tco_usd / max(best.tco_usd, 1e-9):.2f}x the winner's cost: {horizon}"
    else:
        lead = horizon
    return "; ".join([lead, *parts])


def _capacity_text(option: Option, request: Request) -> str:
    """'2.65 QPS within P99 TTFT <= 500 ms and TPOT <= 20 ms (TPOT binds) as serve-sim simulates it (TP 1)': the
    figure the option's command prints, and the SLO that binds it."""
    rate = option.fit.qps_capacity or 0.0
    shown = f"{rate:,.1f}" if rate >= 10 else f"{rate:.3g}"
    simulated = not option.fit.closed_form and bool(option.fit.commands)
    slos = next((w.slos for w in request.workloads if w.task == "infer" and w.slos), None)
    unit = next((rate_unit(w) for w in request.workloads if w.task == "infer"), "QPS")
    if slos is not None:
        how = "as serve-sim simulates it" if simulated else "by the closed form"
        return f"{shown} {unit} {slos.within(option.fit.binding_slo)} {how} (TP {option.fit.tp})"
    return (f"{shown} {unit} planned, {C.SERVING_PLANNING_UTILISATION.value:.0%} of the closed form's saturation"
            + (", serve-sim's queue steady at the rate" if simulated else "") + f" (TP {option.fit.tp})")


def _science_text(setting: Mapping[str, object]) -> str:
    """'gromacs: 271 ns/day per run on 1 GPU, 2 runs at once, 60.1 h' from an HPC workload's settings."""
    unit = str(setting["unit"])
    hours = float(setting["hours"])  # type: ignore[arg-type]
    return (f"{setting['app']}: {float(setting[unit]):,.4g} {unit} per run on {setting['gpus_per_run']} GPU(s), "  # type: ignore[arg-type]
            f"{setting['runs_at_once']} run(s) at once, {_hours_text(hours, hours).removesuffix(' per job')}")


def _hours_text(hours: float, high: float) -> str:
    """'6.0 h per job (up to 8.6 h at the slow end of the measured speed band)'; minutes or seconds for short jobs."""
    def text(h: float) -> str:
        return f"{h:,.1f} h" if h >= 0.1 else f"{h * 60:,.1f} min" if h * 3600 >= 60 else f"{h * 3600:,.1f} s"
    if high > hours * 1.005:
        return f"{text(hours)} per job (up to {text(high)} at the slow end of the measured speed band)"
    return f"{text(hours)} per job"


def _machines_text(option: Option) -> str:
    """'2 HGX nodes of 8 (nvlink4 inside, ib-ndr between)', '1 desktop (pcie4-x8 per card)'."""
    p = option.placement
    assert p is not None
    rented = p.name.startswith("rent ")
    where = f"{p.machines} x {p.name.removeprefix('rent ')}" if rented else p.label
    links = [p.inside] if p.inside else []
    if p.network:
        links.append(f"{p.network} between")
    elif p.machines > 1:
        links.append("no link between them: each serves on its own")
    if p.slot_link:
        links.append(f"{p.slot_link} per card")
    per = f" of {p.gpus_per_machine}" if p.machines > 1 and not rented else ""
    return f"{where}{per}" + (f" ({', '.join(links)})" if links else "")


TARGET_MISSES, SIZE_MISSES = frozenset({"deadline", "slo", "budget"}), frozenset({"memory", "power"})


def _closeness(r: Rejected) -> tuple[int, float]:
    """A missed target first (what the request asked), then a size that did not fit, then a structural refusal."""
    return (0 if r.code in TARGET_MISSES else 1 if r.code in SIZE_MISSES else 2), r.gap


def _nearest(rejected: list[Rejected]) -> tuple[Rejected, ...]:
    """When nothing qualifies: the rejections closest to acceptable, one per GPU type -- first those that missed the
    request's own target (a deadline, an SLO, a budget) at their closest count, which is the scale it asked for;
    then sizes that did not fit; a structural refusal (an instance's size, no network) only when nothing else."""
    best: dict[str, Rejected] = {}
    for r in rejected:
        if r.count and (r.gpu not in best or _closeness(r) < _closeness(best[r.gpu])):
            best[r.gpu] = r
    return tuple(sorted(best.values(), key=_closeness)[:5])


def _assumptions(request: Request) -> tuple[str, ...]:
    u = request.usage
    jobs = [f"{w.tokens:,.0f} tokens of {w.model}" for w in request.workloads if w.task == "train"]
    science = [w for w in request.workloads if w.task == "hpc"]
    machines = ("bought cards go into the catalog's systems (desktop 2 cards, workstation 4, server 8, HGX/OAM nodes "
                "their board), several machines only over a cluster network the system ships with, the offer "
                "documents or --network names")
    return (
        f"training on several GPUs shards with ZeRO-3/FSDP (unless the job sets --zero), its micro-batch and TP "
        f"searched where left free; {machines}; serving uses the TP inside one machine whose replicas carry the most "
        "requests/s, each planned at its P99 SLO or, with none, at 80% of saturation; the options shown are then "
        "simulated as their serve-sim command simulates them and kept only where the simulation meets the rate and "
        "the SLO (options further down keep the closed form's figures)"
        if len(science) < len(request.workloads) else machines,
        *([f"one training job is {', '.join(jobs)} (--tokens)"] if jobs else []),
        *(["one scientific job is, per workload, its --runs runs of its size and length (time per job is their sum); "
           "independent runs take one GPU each, a parallel application's run splits over the GPUs left per run; speed "
           "from each application's calibration on published per-GPU runs (benchmarks/calibrate_hpc.py)"]
          if science else []),
        "buying: cards + host share + energy (GPUs at 70% of TDP + host) x PUE + expected repairs - residual value; "
        "renting: the offer's hourly list price (storage and egress not included)",
        f"prices as of their catalog dates; {u.hours_per_day:g} h/day for {u.years:g} years at {u.usd_per_kwh:g} "
        f"USD/kWh, PUE {u.pue:g}" if u.pattern == "ongoing" else
        f"one-off: each option costs one job, run around the clock at {u.usd_per_kwh:g} USD/kWh, PUE {u.pue:g}; a "
        "purchase is sold again when the job ends (its used price or the segment's decay curve, less a 13.25% "
        "selling fee; the host is not resold)",
    )


def _model_of(workload: Workload) -> Architecture | Pipeline | HpcApp:
    """What a workload runs: a scientific application's profile, an image pipeline, or a language model."""
    kind = workload_kind(workload.task, workload.model)
    if kind == "hpc" and isinstance(workload.job, HpcJob):
        return app_profile(workload.job)
    pipeline = find_pipeline(workload.model) if kind == "image" else None
    return pipeline or resolve_model(workload.model)


def _shown_as_simulated(options: list[Option], rejected: list[Rejected], request: Request, catalog: Catalog,
                        archs: dict[str, Architecture | Pipeline | HpcApp],
                        calibrations: Mapping[str, Calibration] | None, key: Callable[[Option], object]
                        ) -> list[Option]:
    """The options with the printed ones (the first ``top`` of the ranking, the Pareto front, the options a finding
    compares) simulated as their serve-sim commands simulate them (recommend/simulated.py). A printed option whose
    simulation misses the request is rejected, with the simulation's figures, and its GPU and way evaluated again
    from that count up, each count simulated, the first that holds kept; the ranking is then read again, until all
    it prints has been simulated. Options further down keep the closed form's figures; ``rejected`` gains the
    misses."""
    simulations = SIMULATIONS.set({})
    try:
        while True:
            ranked = sorted(best_per_gpu_and_way(options, key), key=key)  # type: ignore[arg-type]
            printed = [*ranked[: request.top], *pareto_front(ranked), *compared(request, ranked, catalog)]
            due = list({(o.gpu, o.acquisition): o for o in printed if o is not None and o.fit.closed_form}.values())
            if not due:
                return options
            for option in due:  # each (GPU, way) once: it leaves the closed form here
                again, missed = options_from(option, request, catalog, archs, (calibrations or {}).get(option.gpu))
                options = [o for o in options if (o.gpu, o.acquisition) != (option.gpu, option.acquisition)] + again
                rejected += missed
    finally:
        SIMULATIONS.reset(simulations)


def recommend(request: Request, catalog: Catalog, calibrations: Mapping[str, Calibration] | None = None
              ) -> Recommendation:
    """Every option for ``request``; ``calibrations`` (catalog id -> measured rates) replace the efficiency tables
    for the cards they were measured on."""
    archs = {w.model: _model_of(w) for w in request.workloads}
    for w in request.workloads:  # a flag that changes nothing is refused once, not per GPU
        model = archs[w.model]
        if isinstance(w.job, TrainJob) and isinstance(model, Architecture):
            require_training_knobs(model, w.job)
    def energy(o: Option) -> Energy | None:
        return option_energy(o, catalog, request)

    key = _within_headroom_first(ranking_key(request.objective, needed_rate(request), energy), request)
    planned = REPLICAS.set({})
    try:
        options, rejected = enumerate_options(request, catalog, archs, calibrations)
        options = _shown_as_simulated(options, rejected, request, catalog, archs, calibrations, key)
    finally:
        REPLICAS.reset(planned)
    best = sorted(best_per_gpu_and_way(options, key), key=key)
    winner = best[0] if best else None
    charged = [replace(o, energy=energy(o)) for o in best]
    explained = tuple(
        Option(**{**o.__dict__, "why": _why(o, i, winner, request, catalog.gpus[o.gpu].usable_memory_bytes / 2**30)})
        for i, o in enumerate(charged)
    )
    finding = low_power_finding(request, explained, rejected, catalog)
    return Recommendation(request, explained, tuple(rejected), tuple(pareto_front(list(best))),
                          nearest=() if explained else _nearest(rejected), assumptions=_assumptions(request),
                          findings=(finding,) if finding else (), defaults=left_free(request))
