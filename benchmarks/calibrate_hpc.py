"""Fit what GPUs make of each scientific application (estimate/data/hpc_calibration.yaml) from the published runs in
benchmarks/data/hpc-measurements.yaml, and score it: in sample, and with each GPU left out of the fit.

    python benchmarks/calibrate_hpc.py            # fit, print the scores, write the calibration file
    python benchmarks/calibrate_hpc.py --check    # fit and print only (nothing written)

The model is the estimator's own roofline (estimate/hpc/model.py): a step is
    overhead + s x (N / N_ref)^beta x sum over kernels of max(arithmetic at peak, rho x traffic at datasheet bandwidth)
so compute_eff = 1/s and memory_eff = 1/(s x rho). Per *series* (one software and version, on one set of benchmark
inputs) (overhead, s) are a linear least-squares fit of the measured step times. Three shape parameters are found by
grid search on the OpenMM series alone -- one version of one engine run on 22 GPUs by its developers -- and shared by
every molecular-dynamics series: r (integer, load and other instructions per FP32 one: GPU.fp32_issue_bound), rho
(memory weight) and beta (cost per atom growing with the system: caches stop holding the working set, the PME FFT
grows as N log N). HPL fits one compute efficiency, HPCG one memory efficiency. Nothing is fitted per GPU.

Leave-one-GPU-out: every fit is redone without any run on that GPU (or its memory variants), and that GPU's runs are
predicted. The calibration file keeps each app's band: the 10th-90th percentile of measured / predicted over those
left-out predictions (min-max under ten).
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from gpuwise import api
from gpuwise.catalog import GPU, Catalog
from gpuwise.estimate.hpc.model import host_link_bytes_per_s, kernel_parts, value_of
from gpuwise.workload.hpc.apps import apps, resolved
from gpuwise.workload.jobs.hpc import HpcJob

ROOT = Path(__file__).resolve().parent
DATA = ROOT / "data" / "hpc-measurements.yaml"
OUT = ROOT.parent / "src" / "gpuwise" / "estimate" / "data" / "hpc_calibration.yaml"
SHAPE_SERIES = "openmm-8."
INT_SHARES = [i / 10 for i in range(0, 16)]
RHOS = [10 ** (-1.5 + i * 0.1) for i in range(26)]
BETAS = [i / 20 for i in range(0, 9)]
SERIES_OF_APP = {"amber": "amber", "gromacs": "gromacs", "namd": "namd", "lammps": "lammps", "openmm": "openmm-8.4",
                 "hpl": "hpl", "hpcg": "hpcg"}
"""The series each app's calibration comes from: AMBER's GPU benchmark suite (what ambermd.org publishes), the
newest OpenMM; the others have one series on NVIDIA cards."""
BORROW = {"openfoam": ("hpcg", "the same sparse FP64 bandwidth-bound kernel class"),
          "vasp": ("hpl", "FP64 dense linear algebra; no per-GPU VASP run was found"),
          "custom": ("hpl", "FP64 dense efficiency and HPL's memory efficiency; gpuwise has no measure of your code")}


@dataclass(frozen=True)
class Run:
    id: int
    app: str
    series: str
    gpu: GPU
    family: str  # the GPU left out together: a card and its memory variants
    gpus: int
    job: HpcJob
    value: float
    unit: str

    @property
    def measured_step_s(self) -> float:
        """The step time the published figure implies (the inverse of estimate.hpc.value_of)."""
        return value_of(apps()[self.app], self.job, 1.0) / self.value if self.unit != "s/iteration" else self.value

    @property
    def rocm(self) -> bool:
        return self.gpu.software.stack == "rocm"

    @property
    def host_s(self) -> float:
        """Seconds a step spends on the host link (LAMMPS's GPU package): the estimator adds it unscaled."""
        app = apps()[self.app]
        link = host_link_bytes_per_s(self.gpu, _catalog())
        return app.host_bytes_per_item * float(self.job.atoms or 0) / self.gpus / link if link else 0.0


@functools.cache
def _catalog() -> Catalog:
    return api.load_catalog()


def _gpu(name: str, specs: dict[str, dict[str, object]], catalog: Catalog) -> GPU:
    """A catalog card, or one the file describes (``like`` a catalog card, with its own figures)."""
    if name in catalog.gpus:
        return catalog.gpus[name]
    spec = {k: v for k, v in specs[name].items() if k not in ("like", "source")}
    return catalog.gpus[str(specs[name]["like"])].model_copy(update={"id": name, **spec})


def load_runs(path: Path = DATA) -> list[Run]:
    """The file's runs, less those it marks ``exclude`` (a regime the profiles do not model, with the reason)."""
    data = yaml.safe_load(path.read_text())
    catalog = _catalog()
    runs = []
    for i, r in enumerate(data["runs"]):
        if r.get("exclude"):
            continue
        size = {k: r[k] for k in ("atoms", "cells", "matrix_n", "timestep_fs") if k in r}
        job = resolved(HpcJob(app=r["app"], count=r["gpus"], **size))
        family = r["gpu"].rsplit("-", 1)[0] if r["gpu"].startswith(("a100", "v100", "h100", "h200")) else r["gpu"]
        runs.append(Run(i, r["app"], r["series"], _gpu(r["gpu"], data.get("gpus", {}), catalog), family,
                        int(r["gpus"]), job, float(r["value"]), r["unit"]))
    return runs


_PARTS: dict[tuple[int, float], tuple[tuple[float, float], ...]] = {}


def _parts(run: Run, r: float) -> tuple[tuple[float, float], ...]:
    """(arithmetic, traffic) seconds at peak of each kernel of one step: computed once per run and r."""
    key = (run.id, r)
    if key not in _PARTS:
        found = kernel_parts(apps()[run.app], run.job, run.gpu, r)
        assert found is not None, run
        _PARTS[key] = tuple((a, m) for _, a, m in found)
    return _PARTS[key]


def unit_step(run: Run, rho: float, r: float, beta: float) -> float:
    """The step at compute_eff = 1, memory_eff = 1/rho and no overhead, over the run's GPUs."""
    app = apps()[run.app]
    speedup = run.gpus * app.multi_gpu.efficiency_per_doubling ** math.log2(run.gpus)
    grow = (float(run.job.atoms or 0) / app.reference_size) ** beta if app.kind == "md" else 1.0
    return grow * sum(max(a, rho * m) for a, m in _parts(run, r)) / speedup


def fit_series(pairs: list[tuple[float, float]], fixed_overhead: float | None) -> tuple[float, float]:
    """(overhead, s) minimising the relative error of overhead + s x u against the measured step t; overhead >= 0.
    With ``fixed_overhead`` only s is fitted."""
    if fixed_overhead is None:
        a = [(1 / t, u / t) for u, t in pairs]
        s11, s12, s22 = sum(x * x for x, _ in a), sum(x * y for x, y in a), sum(y * y for _, y in a)
        b1, b2 = sum(x for x, _ in a), sum(y for _, y in a)
        det = s11 * s22 - s12 * s12
        if det > 1e-12 * s11 * s22:
            o, s = (s22 * b1 - s12 * b2) / det, (s11 * b2 - s12 * b1) / det
            if o >= 0 and s > 0:
                return o, s
        fixed_overhead = 0.0
    s = sum(u * (t - fixed_overhead) / t**2 for u, t in pairs) / sum(u * u / t**2 for u, t in pairs)
    return fixed_overhead, max(s, 1e-9)


def _fit_md(md: list[Run], rho: float, r: float, beta: float) -> tuple[dict[str, dict[str, float]], float]:
    """Per series (overhead, s) at the shape. A series measured at one size cannot separate its overhead from its
    scale: it takes the median overhead of the series that can."""
    by_series: dict[str, list[Run]] = defaultdict(list)
    for x in md:
        by_series[x.series].append(x)
    sized = sorted(s for s, rows in by_series.items() if len({x.job.atoms for x in rows}) >= 2)
    fitted: dict[str, dict[str, float]] = {}
    err = 0.0
    for series in sized + sorted(set(by_series) - set(sized)):
        pairs = [(unit_step(x, rho, r, beta), x.measured_step_s - x.host_s) for x in by_series[series]]
        known = [fitted[s]["overhead"] for s in sized if s in fitted]
        fixed = None if series in sized else (statistics.median(known) if known else 0.0)
        o, s = fit_series(pairs, fixed)
        fitted[series] = {"overhead": o, "s": s, "rho": rho, "r": r, "beta": beta}
        err += sum(math.log((o + s * u) / t) ** 2 for u, t in pairs)
    return fitted, err


def _shape_error(rows: list[Run], r: float) -> dict[tuple[float, float], float]:
    """The shape search's error at every (rho, beta) for one r, vectorised: per series the closed-form (overhead, s)
    of fit_series, on the error the full fit minimises."""
    found: dict[tuple[float, float], float] = defaultdict(float)
    by_series: dict[str, list[Run]] = defaultdict(list)
    for x in rows:
        by_series[x.series].append(x)
    for series_rows in by_series.values():
        parts = np.array([_parts(x, r) for x in series_rows])  # runs x kernels x (arithmetic, traffic)
        apps_of = [apps()[x.app] for x in series_rows]
        speedup = np.array([x.gpus * a.multi_gpu.efficiency_per_doubling ** math.log2(x.gpus)
                            for x, a in zip(series_rows, apps_of, strict=True)])
        size = np.array([float(x.job.atoms or 0) / a.reference_size for x, a in zip(series_rows, apps_of, strict=True)])
        t = np.array([x.measured_step_s - x.host_s for x in series_rows])
        for rho in RHOS:
            base = np.maximum(parts[:, :, 0], rho * parts[:, :, 1]).sum(axis=1) / speedup
            for beta in BETAS:
                u = base * size**beta
                o, s = fit_series(list(zip(u.tolist(), t.tolist(), strict=True)), None)
                found[(rho, beta)] += float((np.log((o + s * u) / t) ** 2).sum())
    return found


def fit(runs: list[Run]) -> dict[str, dict[str, float]]:
    """Per series: overhead, s, rho, r, beta."""
    md = [x for x in runs if apps()[x.app].kind == "md"]
    shape_rows = [x for x in md if x.series.startswith(SHAPE_SERIES)]
    best = min(((err, rho, r, beta) for r in INT_SHARES for (rho, beta), err in _shape_error(shape_rows, r).items()),
               key=lambda found: found[0])
    params = _fit_md(md, *best[1:])[0]
    for series in ("hpl", "hpcg"):
        rows = [x for x in runs if x.series == series]
        if rows:
            _, s = fit_series([(unit_step(x, 1.0, 0.0, 0.0), x.measured_step_s) for x in rows], fixed_overhead=0.0)
            params[series] = {"overhead": 0.0, "s": s, "rho": 1.0, "r": 0.0, "beta": 0.0}
    return params


def predict(run: Run, p: dict[str, float]) -> float:
    step = p["overhead"] + run.host_s + p["s"] * unit_step(run, p["rho"], p["r"], p["beta"])
    return value_of(apps()[run.app], run.job, step) if run.unit != "s/iteration" else step


def scored(runs: Iterable[Run]) -> list[Run]:
    """The runs accuracy is stated on: every series on NVIDIA cards, each predicted at its own level (a version's or
    an input set's speed is not counted as an error). ROCm ports have one GPU each here: fitted, not scored."""
    return [x for x in runs if not x.rocm]


def leave_one_gpu_out(runs: list[Run]) -> dict[str, list[tuple[Run, float]]]:
    """app -> (run, measured / predicted) with the run's GPU family out of every fit."""
    found: dict[str, list[tuple[Run, float]]] = defaultdict(list)
    for family in sorted({x.family for x in scored(runs)}):
        params = fit([x for x in runs if x.family != family])
        for x in scored(runs):
            if x.family == family and x.series in params:
                found[x.app].append((x, x.value / predict(x, params[x.series])))
    return found


def band(ratios: list[float]) -> tuple[float, float]:
    ordered = sorted(ratios)
    if len(ordered) < 10:
        return ordered[0], ordered[-1]
    return ordered[int(0.1 * (len(ordered) - 1))], ordered[math.ceil(0.9 * (len(ordered) - 1))]


def median_error(ratios: Iterable[float]) -> float:
    """Median |predicted / measured - 1| over measured / predicted ratios."""
    return statistics.median(abs(1 / q - 1) for q in ratios)


def _sig(value: float, digits: int = 6) -> float:
    """``value`` to ``digits`` significant figures: the file stays readable and the estimator reproduces the fit."""
    return float(f"{value:.{digits}g}")


def _entry(p: dict[str, float], basis: str) -> dict[str, object]:
    return {"compute_efficiency": _sig(1 / p["s"]), "memory_efficiency": _sig(1 / (p["s"] * p["rho"])),
            "step_overhead_s": _sig(p["overhead"]), "int_share": p["r"], "size_exponent": p["beta"], "basis": basis}


def calibration_document(runs: list[Run], params: dict[str, dict[str, float]],
                         logo: dict[str, list[tuple[Run, float]]]) -> dict[str, object]:
    entries: dict[str, dict[str, object]] = {}
    for app, series in SERIES_OF_APP.items():
        rows = [x for x in runs if x.series == series]
        ratios = [q for _, q in logo.get(app, [])]
        gpus = sorted({x.gpu.id for x in rows})
        entries[app] = {"app": app, **_entry(params[series], f"fitted on {len(rows)} published runs of {series} on "
                                                             f"{len(gpus)} GPUs"),
                        "fitted_on": gpus, "band": [round(v, 3) for v in band(ratios)] if ratios else None,
                        "in_sample_median_error": round(statistics.median(
                            abs(predict(x, params[x.series]) / x.value - 1) for x in scored(runs) if x.app == app), 3),
                        "leave_one_gpu_out_median_error": round(median_error(ratios), 3) if ratios else None}
        rocm = [x for x in runs if x.app == app and x.rocm]
        if rocm:
            entries[app]["rocm"] = _entry(params[rocm[0].series], f"fitted on {len(rocm)} runs of the ROCm port on "
                                                                  f"{', '.join(sorted({x.gpu.id for x in rocm}))}")
    for app, (lender, why) in BORROW.items():
        entries[app] = {"borrow": lender, "basis": f"uncalibrated: borrows {lender}'s calibration ({why})"}
    return {"generated": dt.date.today().isoformat(),
            "source": "benchmarks/calibrate_hpc.py over benchmarks/data/hpc-measurements.yaml; band = measured / "
                      "predicted with the GPU left out of the fit, 10th-90th percentile (min-max under 10 runs)",
            "apps": entries}


def report(runs: list[Run], params: dict[str, dict[str, float]], logo: dict[str, list[tuple[Run, float]]]) -> None:
    print(f"{'app':8} {'series':16} {'runs':>4} {'GPUs':>4} {'in-sample':>10} {'leave-one-GPU-out':>18}")
    for app in sorted({x.app for x in scored(runs)}):
        for series in (None, *sorted({x.series for x in scored(runs) if x.app == app})):
            rows = [x for x in scored(runs) if x.app == app and series in (None, x.series)]
            if series is not None and len({x.series for x in scored(runs) if x.app == app}) == 1:
                continue
            inside = statistics.median(abs(predict(x, params[x.series]) / x.value - 1) for x in rows)
            out = median_error(q for x, q in logo[app] if series in (None, x.series))
            print(f"{app:8} {series or 'all':16} {len(rows):4d} {len({x.family for x in rows}):4d} {inside:10.1%} "
                  f"{out:18.1%}")
    md = params[SERIES_OF_APP["openmm"]]
    print(f"shared MD shape: r = {md['r']:.1f} (instructions per FP32 one), rho = {md['rho']:.3f}, "
          f"beta = {md['beta']:.2f} (cost per atom ~ N^beta)")
    for app in sorted(logo):
        worst = sorted(logo[app], key=lambda rq: -abs(math.log(rq[1])))[:3]
        print(f"  {app}: worst left-out " + ", ".join(f"{x.gpu.id} ({x.series}) {1 / q - 1:+.0%}" for x, q in worst))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--check", action="store_true", help="print the scores; do not write the calibration file")
    args = parser.parse_args(argv)
    runs = load_runs()
    params = fit(runs)
    logo = leave_one_gpu_out(runs)
    report(runs, params, logo)
    if not args.check:
        OUT.write_text(yaml.safe_dump(calibration_document(runs, params, logo), sort_keys=False, width=120))
        print(f"wrote {OUT.relative_to(ROOT.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
