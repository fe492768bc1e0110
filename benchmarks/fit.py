"""Fit gpuwise's global mechanism parameters on the public corpus, chosen and scored leave-one-source-out.

What it does, in order:
1. Scores every corpus case (benchmarks/corpus.py) at the priors, then at each parameter's two physical bounds
   (gpuwise/fitted/parameters.yaml), one parameter at a time, on the groups the parameter's mechanism reaches; each
   case's change is interpolated between the bounds and the prior onto a grid of candidate values.
2. A separable surrogate (log prediction = prior + the sum of each parameter's one-at-a-time change) fits a parameter
   vector by coordinate descent on a robust loss: Huber of log(predicted / measured), each group weighing the same,
   each source within a group by 1/sqrt(its cases), and a weak pull toward the prior.
3. Chooses which parameters to free by forward selection on the leave-one-source-out error: a parameter is freed only
   if fitting it lowers the error on sources the fit never saw. A publisher with one file of many models (the given
   serving split) is left out one model at a time.
4. Scores exactly (the real estimators, not the surrogate): in-sample at the final fit, and each source at the fit
   made without it. The out-of-sample residuals of each regime give its 10th-90th percentile band; each band's
   coverage is itself tested out of sample (the band from the other sources, on the left-out one).
5. Writes src/gpuwise/fitted/parameters.yaml, src/gpuwise/estimate/data/bands.yaml and
   benchmarks/results/fit-<date>.md (the accuracy table the README shows) and fit-<date>.jsonl (every case).

Run: python benchmarks/fit.py [--dry-run] [--jobs 2]       (about 30 minutes on 2 idle cores)
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).parent))
import corpus
import fit_report

ROOT = Path(__file__).resolve().parents[1]
PARAMETERS = ROOT / "src" / "gpuwise" / "fitted" / "parameters.yaml"
BANDS = ROOT / "src" / "gpuwise" / "estimate" / "data" / "bands.yaml"
RESULTS = Path(__file__).parent / "results"
GRID_POINTS = 13
HUBER = math.log(1.3)
PRIOR_PULL = 0.02
MIN_GAIN_PCT = 0.1  # a parameter is freed only if it lowers the held-out error by this much
SPEED_GROUPS = ("train", "infer", "serving_ttft", "serving_tpot", "image", "vision")
# every parameter is probed on every speed group (a mechanism reaches further than its name says: the kernel floor
# under graphs moves training steps too), and on the microbenchmarks that measure its mechanism alone
MICRO_REACH = {
    "gemm_half_efficiency_flop": ("gemm",), "fixed_shape_fraction": ("gemm",), "fixed_shape_fraction_sm80": ("gemm",),
    "fixed_shape_fraction_sm90": ("gemm",), "fixed_shape_fraction_sm100": ("gemm",),
    "attention_efficiency_sm80": ("attention",), "attention_efficiency_sm90": ("attention",),
    "attention_efficiency_sm100": ("attention",), "collective_latency_s": ("allreduce",),
}  # the copy group is where memory_efficiency's prior was read: scored, never fitted


def reach(name: str) -> tuple[str, ...]:
    return (*SPEED_GROUPS, *MICRO_REACH.get(name, ()))


Predictions = dict[str, float]


def _priors(raw: Mapping[str, Any]) -> dict[str, float]:
    return {n: float(spec["prior"]) for n, spec in raw.items()}


def _axis(spec: Mapping[str, Any], v: float) -> float:
    """Where ``v`` lies on the parameter's axis: log where the bounds are positive, linear otherwise."""
    return math.log(v) if float(spec["bounds"][0]) > 0 else v


def probes(spec: Mapping[str, Any]) -> list[float]:
    """The values the real estimators are run at, besides the prior: the two bounds."""
    return [float(b) for b in spec["bounds"] if float(b) != float(spec["prior"])]


def grid(spec: Mapping[str, Any]) -> list[float]:
    """GRID_POINTS candidate values evenly spaced on the parameter's axis between its bounds, and the prior."""
    low, high = (float(b) for b in spec["bounds"])
    a, b = _axis(spec, low), _axis(spec, high)
    points = [a + (b - a) * i / (GRID_POINTS - 1) for i in range(GRID_POINTS)]
    values = [math.exp(x) if low > 0 else x for x in points]
    return sorted({float(f"{v:.4g}") for v in values} | {float(spec["prior"])})


def _score_chunk(args: tuple[Sequence[corpus.Case], Mapping[str, float]]) -> Predictions:
    from gpuwise.fitted import overrides

    cases, values = args
    with overrides(values):
        answers = corpus.predict(cases)
    return {k: v for k, v in answers.items() if isinstance(v, float) and v > 0}


def score(cases: Sequence[corpus.Case], values: Mapping[str, float], jobs: int) -> Predictions:
    """The real estimators' predictions for ``cases`` at parameter ``values`` (answered cases only)."""
    if jobs <= 1 or len(cases) < 40:
        return _score_chunk((cases, values))
    by_command: dict[tuple[str, ...], list[corpus.Case]] = defaultdict(list)
    for case in cases:
        by_command[case.command].append(case)
    chunks: list[list[corpus.Case]] = [[] for _ in range(jobs)]
    for i, group in enumerate(by_command.values()):
        chunks[i % jobs].extend(group)
    with ProcessPoolExecutor(jobs) as pool:
        parts = pool.map(_score_chunk, [(chunk, values) for chunk in chunks])
    return {k: v for part in parts for k, v in part.items()}


def sensitivities(cases: Sequence[corpus.Case], raw: Mapping[str, Any], base: Predictions,
                  jobs: int) -> dict[str, dict[float, Predictions]]:
    """For each parameter, each case's log change at every grid value: the real estimators run at the parameter's
    two bounds (one parameter at a time, the others at their priors whatever the file says), interpolated on its axis
    through the prior (no change), piecewise linearly, so a roofline's max() bends where it bends between the
    probes."""
    priors = _priors(raw)
    out: dict[str, dict[float, Predictions]] = {}
    for name, spec in raw.items():
        reached = [c for c in cases if c.group in reach(name) and c.id in base]
        measured: dict[float, Predictions] = {float(spec["prior"]): {}}
        for candidate in probes(spec):
            moved = score(reached, {**priors, name: candidate}, jobs)
            measured[candidate] = {k: math.log(v / base[k]) for k, v in moved.items()
                                   if abs(v / base[k] - 1) > 1e-6}
            print(f"  {name} = {candidate:g}: {len(measured[candidate])} of {len(reached)} cases move", flush=True)
        out[name] = {v: _interpolated(spec, measured, v) for v in grid(spec)}
    return out


def _interpolated(spec: Mapping[str, Any], measured: Mapping[float, Predictions], v: float) -> Predictions:
    points = sorted(measured)
    if v in measured:
        return dict(measured[v])
    lower = max(p for p in points if p <= v)
    upper = min(p for p in points if p >= v)
    t = (_axis(spec, v) - _axis(spec, lower)) / (_axis(spec, upper) - _axis(spec, lower))
    ids = set(measured[lower]) | set(measured[upper])
    return {i: (1 - t) * measured[lower].get(i, 0.0) + t * measured[upper].get(i, 0.0) for i in ids}


class Surrogate:
    """log prediction of each case = log prior prediction + each parameter's one-at-a-time log change (arrays over
    the cases, so a fit over a fold's mask costs microseconds)."""

    def __init__(self, cases: Sequence[corpus.Case], base: Predictions,
                 moves: Mapping[str, Mapping[float, Predictions]], raw: Mapping[str, Any]) -> None:
        self.cases = [c for c in cases if c.id in base]
        self.index = {c.id: i for i, c in enumerate(self.cases)}
        self.base = np.array([math.log(base[c.id] / c.measured) for c in self.cases])
        self.moves = {name: {v: self._array(change) for v, change in grid_moves.items()}
                      for name, grid_moves in moves.items()}
        self.raw = raw
        self.priors = _priors(raw)
        weights = _weights(self.cases)
        self.weights = np.array([weights[c.id] for c in self.cases])

    def _array(self, change: Predictions) -> np.ndarray:
        out = np.zeros(len(self.cases))
        for case_id, r in change.items():
            if case_id in self.index:
                out[self.index[case_id]] = r
        return out

    def mask(self, cases: Sequence[corpus.Case]) -> np.ndarray:
        out = np.zeros(len(self.cases), dtype=bool)
        out[[self.index[c.id] for c in cases if c.id in self.index]] = True
        return out

    def residuals(self, values: Mapping[str, float]) -> np.ndarray:
        r = self.base.copy()
        for name, v in values.items():
            r += self.moves[name][v]
        return r

    def loss(self, values: Mapping[str, float], mask: np.ndarray) -> float:
        r = np.abs(self.residuals(values)[mask])
        huber = np.where(r <= HUBER, 0.5 * r * r, HUBER * (r - 0.5 * HUBER))
        w = self.weights[mask]
        pull = sum(_prior_distance(self.raw[n], v) ** 2 for n, v in values.items())
        return float((w * huber).sum() / max(w.sum(), 1e-12)) + PRIOR_PULL * pull

    def fit(self, free: Sequence[str], mask: np.ndarray) -> dict[str, float]:
        """Coordinate descent over each free parameter's grid; the others stay at their priors."""
        values = {n: self.priors[n] for n in free}
        for _sweep in range(4):
            changed = False
            for name in free:
                best = min(self.moves[name], key=lambda v, n=name: self.loss({**values, n: v}, mask))
                changed |= best != values[name]
                values[name] = best
            if not changed:
                break
        return values


def _prior_distance(spec: Mapping[str, Any], v: float) -> float:
    low, high, prior = float(spec["bounds"][0]), float(spec["bounds"][1]), float(spec["prior"])
    if low > 0:
        return math.log(v / prior) / math.log(high / low)
    return (v - prior) / (high - low)


def _weights(cases: Sequence[corpus.Case]) -> dict[str, float]:
    """Each group weighs the same; within a group each source by 1/sqrt(its cases)."""
    count: dict[tuple[str, str], int] = defaultdict(int)
    for c in cases:
        count[(c.group, c.source)] += 1
    raw = {c.id: 1 / math.sqrt(count[(c.group, c.source)]) for c in cases}
    per_group: dict[str, float] = defaultdict(float)
    for c in cases:
        per_group[c.group] += raw[c.id]
    return {c.id: raw[c.id] / per_group[c.group] for c in cases}


def folds(cases: Sequence[corpus.Case]) -> dict[str, list[corpus.Case]]:
    out: dict[str, list[corpus.Case]] = defaultdict(list)
    for c in cases:
        out[c.fold].append(c)
    return out


def held_out_error(model: Surrogate, free: Sequence[str]) -> float:
    """Group-balanced median |error| (%) of each fold predicted by a fit made without it (surrogate)."""
    out = np.zeros(len(model.cases))
    for left in folds(model.cases).values():
        held = model.mask(left)
        values = model.fit(free, ~held)
        out[held] = model.residuals(values)[held]
    errors: dict[str, list[float]] = defaultdict(list)
    for c, r in zip(model.cases, out, strict=True):
        errors[c.group].append(100 * abs(math.exp(r) - 1))
    return statistics.mean(statistics.median(v) for v in errors.values())


def select(model: Surrogate, names: Sequence[str]) -> tuple[list[str], list[tuple[str, float]]]:
    """Forward selection: free the parameter that lowers the held-out error most, while it lowers it enough."""
    free: list[str] = []
    trail = [("(all priors)", held_out_error(model, free))]
    while True:
        options = [(held_out_error(model, [*free, n]), n) for n in names if n not in free]
        if not options:
            break
        error, name = min(options)
        print(f"  + {name}: held-out {error:.2f} % (was {trail[-1][1]:.2f} %)", flush=True)
        if trail[-1][1] - error < MIN_GAIN_PCT:
            break
        free.append(name)
        trail.append((name, error))
    return free, trail


def exact_out_of_sample(model: Surrogate, free: Sequence[str], jobs: int) -> tuple[Predictions, dict[str, dict]]:
    """Each fold scored by the real estimators at the parameters fitted without it."""
    predicted: Predictions = {}
    chosen: dict[str, dict] = {}
    for fold, left in folds(model.cases).items():
        values = model.fit(free, ~model.mask(left))
        chosen[fold] = values
        predicted.update(score(left, {**model.priors, **values}, 1))
    return predicted, chosen


def _code_version() -> str:
    """A digest of the estimators' source and data: a cache of sweeps made with other code is not reused."""
    digest = hashlib.sha256()
    for path in sorted((ROOT / "src" / "gpuwise").rglob("*")):
        if path.suffix in (".py", ".yaml", ".json") and path.name != "parameters.yaml" and "bands" not in path.name:
            digest.update(path.read_bytes())
    for path in sorted(corpus.DATA.rglob("*")):
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def sweeps(cases: Sequence[corpus.Case], raw: Mapping[str, Any], priors: Mapping[str, float],
           ns: argparse.Namespace) -> tuple[Predictions, dict[str, dict[float, Predictions]]]:
    """The predictions at the priors and each parameter's sweep: scored now, or read back from ``--reuse``'s cache
    when it was made for the same cases and the same parameters."""
    key = {"cases": sorted(c.id for c in cases), "parameters": {n: [s["bounds"], s["prior"]] for n, s in raw.items()},
           "reach": {n: reach(n) for n in raw}, "code": _code_version()}
    cache: Path | None = ns.reuse
    if cache is not None and cache.is_file():
        saved = json.loads(cache.read_text("utf-8"))
        if saved["key"] == json.loads(json.dumps(key)):
            print(f"reusing the sweeps in {cache}", flush=True)
            moves = {n: {float(v): m for v, m in g.items()} for n, g in saved["moves"].items()}
            return saved["base"], moves
    base = score(cases, priors, ns.jobs)
    moves = sensitivities(cases, raw, base, ns.jobs)
    if cache is not None:
        cache.write_text(json.dumps({"key": key, "base": base, "moves": moves}), "utf-8")
    return base, moves


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true", help="print the results; write nothing")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--reuse", type=Path, metavar="CACHE",
                        help="reuse the scored sweeps saved in CACHE when the cases and parameters match; save them "
                             "there otherwise (a refit of the selection without rescoring)")
    parser.add_argument("--group", action="append", choices=corpus.GROUPS,
                        help="fit on these groups only (a quick look; implies --dry-run)")
    ns = parser.parse_args(argv)
    document = yaml.safe_load(PARAMETERS.read_text("utf-8"))
    raw = document["parameters"]
    for spec in raw.values():  # fit from the priors, whatever the last run wrote
        spec["value"] = spec["prior"]
    cases = corpus.load(ns.group or corpus.GROUPS)
    ns.dry_run = ns.dry_run or bool(ns.group)
    priors = _priors(raw)
    print(f"{len(cases)} cases; scoring at the priors", flush=True)
    base, moves = sweeps(cases, raw, priors, ns)
    model = Surrogate(cases, base, moves, raw)
    free, trail = select(model, list(raw))
    final = model.fit(free, np.ones(len(model.cases), dtype=bool))
    print(f"freed {free}: {final}", flush=True)
    inside = score(model.cases, {**priors, **final}, ns.jobs)
    outside, chosen = exact_out_of_sample(model, free, ns.jobs)
    result = fit_report.Result(model.cases, base, inside, outside, final, chosen, trail, moves)
    fit_report.print_summary(result)
    if not ns.dry_run:
        fit_report.write(result, document, PARAMETERS, BANDS, RESULTS, dt.date.today().isoformat())
    return 0


if __name__ == "__main__":
    sys.exit(main())
