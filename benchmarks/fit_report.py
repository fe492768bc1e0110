"""What benchmarks/fit.py found, as a table, a per-case file, the fitted parameters and the bands.

Regimes (each gets its own band): train; decode and prefill (batch-1 inference); samples (encoders); serving TTFT and
TPOT; image. A band is a percentile range of the out-of-sample ratio measured / predicted (throughput; a time's ratio
is inverted), and always holds 1: the 10th-90th percentile, widened until each publisher's runs fall inside the band
made without them 85 % of the time. Its coverage is tested nested: for each publisher, width and range are chosen
from the other publishers alone and tested on its runs. (One level remains shared: the out-of-sample ratios the
others contribute came from fits that saw the tested publisher.)
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import corpus
import yaml

Predictions = dict[str, float]
REGIMES = ("train", "decode", "prefill", "samples", "serving_ttft", "serving_tpot", "image")


@dataclass(frozen=True)
class Result:
    cases: Sequence[corpus.Case]
    prior: Predictions
    inside: Predictions
    outside: Predictions
    values: Mapping[str, float]
    chosen: Mapping[str, Mapping[str, float]]  # fold -> values fitted without it
    trail: Sequence[tuple[str, float]]
    moves: Mapping[str, Mapping[float, Predictions]]


def regime(case: corpus.Case) -> str | None:
    if case.group == "infer":
        return "prefill" if case.key.endswith("ttft_ms") else "decode"
    return {"vision": "samples"}.get(case.group, case.group if case.group in REGIMES else None)


def ratio(case: corpus.Case, predicted: float) -> float:
    """measured / predicted as a throughput ratio (a time's ratio inverted), the form bands.yaml stores."""
    return predicted / case.measured if case.is_time else case.measured / predicted


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


TARGET_COVERAGE = 0.85  # what the band is widened to hold, among the publishers it is made from
TAILS = (0.10, 0.09, 0.08, 0.07, 0.06, 0.05, 0.04, 0.03, 0.02, 0.01, 0.0)
MIN_OTHERS = 5


def band_of(ratios: Sequence[float], tail: float = 0.10) -> tuple[float, float]:
    """The ``tail`` to 1 - ``tail`` percentile range of the ratios, widened to hold 1."""
    return min(percentile(ratios, tail), 1.0), max(percentile(ratios, 1 - tail), 1.0)


Scored = Sequence[tuple[corpus.Case, float]]  # a case and its out-of-sample ratio measured / predicted


def _held_out(scored: Scored, make_band: Callable[[Scored], tuple[float, float]]) -> tuple[int, int]:
    """(inside, tested): each publisher's runs against the band ``make_band`` makes from the other publishers' runs
    (publishers with fewer than MIN_OTHERS runs beside them are not tested)."""
    inside = total = 0
    for source in {c.source for c, _ in scored}:
        others = [(c, r) for c, r in scored if c.source != source]
        if len(others) < MIN_OTHERS:
            continue
        low, high = make_band(others)
        for c, r in scored:
            if c.source == source:
                total += 1
                inside += low <= r <= high
    return inside, total


def _ratios(scored: Scored) -> list[float]:
    return [r for _, r in scored]


def tail_for(scored: Scored) -> float:
    """The widest tail (narrowest band) under which each publisher's runs, against the band made without them, fall
    inside TARGET_COVERAGE of the time: where a publisher's runs err together, the 10th-90th percentile of the others'
    errors holds fewer of them, so the band widens until it does."""
    for tail in TAILS:
        inside, total = _held_out(scored, lambda others, t=tail: band_of(_ratios(others), t))
        if not total or inside / total >= TARGET_COVERAGE:
            return tail
    return TAILS[-1]


def coverage(scored: Scored) -> tuple[float | None, int]:
    """The band's coverage out of sample, nested: for each publisher, the band's width is chosen (tail_for) and its
    range made from the other publishers' runs only, then tested on the publisher's own runs. (share, runs tested)"""
    inside, total = _held_out(scored, lambda others: band_of(_ratios(others), tail_for(others)))
    return (inside / total if total else None), total


def scored_of(cases: Sequence[corpus.Case], outside: Predictions) -> list[tuple[corpus.Case, float]]:
    return [(c, ratio(c, outside[c.id])) for c in cases if c.id in outside]


def _errors(cases: Sequence[corpus.Case], predicted: Predictions) -> list[float]:
    return [corpus.error_pct(c, predicted[c.id]) for c in cases if c.id in predicted]


def _speed_errors(cases: Sequence[corpus.Case], predicted: Predictions) -> list[float]:
    """Signed error of the speed, in %: + is too fast whether the figure is a rate or a time (a time's speed is its
    inverse: measured / predicted - 1)."""
    return [100 * (ratio(c, predicted[c.id]) ** -1 - 1) for c in cases if c.id in predicted]


def _median_abs(errors: Sequence[float]) -> str:
    return f"{statistics.median(abs(e) for e in errors):.1f} %" if errors else "-"


def _signed(errors: Sequence[float]) -> str:
    return f"{statistics.median(errors):+.1f} %" if errors else "-"


def table(result: Result) -> list[str]:
    """The accuracy table: per regime, cases, sources, prior, in-sample, out-of-sample, signed, band, coverage."""
    lines = ["| regime | cases | sources | at the priors | in-sample | leave-one-source-out | "
             "speed bias (out, + too fast) | "
             "likely band (measured / predicted) | band coverage (out) |",
             "|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    by: dict[str, list[corpus.Case]] = defaultdict(list)
    for c in result.cases:
        by[regime(c) or c.group].append(c)
    for name in [*REGIMES, *sorted(set(by) - set(REGIMES))]:
        cases = by.get(name, [])
        if not cases:
            continue
        out = _errors(cases, result.outside)
        speed = _speed_errors(cases, result.outside)
        scored = scored_of(cases, result.outside)
        band, cover, tested = "-", None, 0
        if name in REGIMES and len(scored) >= MIN_OTHERS:
            tail = tail_for(scored)
            low, high = band_of([r for _, r in scored], tail)
            band = f"{low:.2f}-{high:.2f} (p{100 * tail:.0f}-p{100 - 100 * tail:.0f})"
            cover, tested = coverage(scored)
        lines.append(f"| {name} | {len(cases)} | {len({c.source for c in cases})} | "
                     f"{_median_abs(_errors(cases, result.prior))} | {_median_abs(_errors(cases, result.inside))} | "
                     f"{_median_abs(out)} | {_signed(speed)} | {band} | "
                     f"{'-' if cover is None else f'{100 * cover:.0f} % of {tested}'} |")
    return lines


def bands(result: Result, as_of: str) -> dict[str, Any]:
    cases_by: dict[str, list[corpus.Case]] = defaultdict(list)
    for c in result.cases:
        name = regime(c)
        if name in REGIMES and c.id in result.outside:
            cases_by[name].append(c)
    out = {}
    for name, cases in sorted(cases_by.items()):
        scored = scored_of(cases, result.outside)
        if len(scored) < MIN_OTHERS:
            continue
        tail = tail_for(scored)
        low, high = band_of([r for _, r in scored], tail)
        cover, tested = coverage(scored)
        out[name] = {"low_ratio": round(low, 4), "high_ratio": round(high, 4), "percentiles": [tail, 1 - tail],
                     "cases": len(scored), "sources": len({c.source for c in cases}),
                     "coverage_out_of_sample": None if cover is None else round(cover, 3),
                     "coverage_cases": tested}
    return {"generated": as_of,
            "source": "benchmarks/fit.py over benchmarks/data/corpus and the public-*-measurements files: the "
                      "leave-one-source-out ratios measured / predicted (throughput; times inverted) between the "
                      "percentiles that hold 85 % of each publisher's runs when made without it; "
                      "coverage_out_of_sample: nested, each publisher's runs against the band whose width and range "
                      "were chosen without it (coverage_cases of them could be tested)",
            "regimes": out}


def informed_by(result: Result, name: str) -> list[str]:
    """Sources with a case that the parameter moves by more than 1 % across its grid."""
    ids = {case_id for move in result.moves[name].values() for case_id, r in move.items() if abs(r) > 0.01}
    return sorted({c.source for c in result.cases if c.id in ids})


def print_summary(result: Result) -> None:
    print("\n".join(table(result)))
    for name, error in result.trail:
        print(f"  selection: {name:30} held-out (surrogate) {error:.2f} %")


def _atomic_write(path: Path, text: str) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(temporary, path)


def write(result: Result, document: dict[str, Any], parameters: Path, bands_file: Path, results: Path,
          as_of: str) -> None:
    for name, spec in document["parameters"].items():
        folds = [v[name] for v in result.chosen.values() if name in v]
        spec["freed"] = name in result.values
        spec["value"] = float(result.values.get(name, spec["prior"]))
        spec["informed_by"] = informed_by(result, name) if spec["freed"] else []
        spec["loso_range"] = [min(folds), max(folds)] if folds else None
    document.update(fitted_by="benchmarks/fit.py", as_of=as_of,
                    corpus=f"{len(result.cases)} cases from {len({c.source for c in result.cases})} sources")
    _atomic_write(parameters, yaml.safe_dump(document, sort_keys=False, width=118))
    _atomic_write(bands_file, yaml.safe_dump(bands(result, as_of), sort_keys=False))
    rows = [json.dumps({"id": c.id, "group": c.group, "source": c.source, "fold": c.fold, "measured": c.measured,
                        "prior": result.prior.get(c.id), "in_sample": result.inside.get(c.id),
                        "out_of_sample": result.outside.get(c.id)}) for c in result.cases]
    _atomic_write(results / f"fit-{as_of}.jsonl", "\n".join(rows) + "\n")
    freed = ", ".join(f"{n} = {v:g}" for n, v in result.values.items()) or "none"
    report = [f"# benchmarks/fit.py, {as_of}", "", f"{len(result.cases)} answered cases. Freed: {freed}.", "",
              *table(result), "", "Forward selection (held-out error of the surrogate, group-balanced median):", "",
              *[f"- {n}: {e:.2f} %" for n, e in result.trail], ""]
    _atomic_write(results / f"fit-{as_of}.md", "\n".join(report))
