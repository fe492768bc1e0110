"""Scientific-computing estimates (`--task hpc`) as the estimate contract's JSON and as a table with its reasons."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table

from gpuwise.api import HpcEstimate
from gpuwise.api.reporting import size_of, work_of

GB = 1e9
GIB = 2**30
_SIZE_WORDS = {"atoms": "atoms", "cells": "cells", "matrix_n": "N", "memory_gb": "GB"}
_WORK_WORDS = {"ns": "ns", "iterations": "iterations", "solves": "solve(s)"}


def _memory_json(est: HpcEstimate) -> dict[str, Any]:
    m = est.memory
    return {"per_gpu_gb": round(m.per_gpu_bytes / GB, 4), "capacity_gb": round(m.capacity_bytes / GB, 4),
            "fits": m.fits, "headroom_gb": round(m.headroom_bytes / GB, 4),
            "breakdown_gb": {k: round(v / GB, 4) for k, v in m.breakdown_bytes.items()},
            "per_gpu_gib": round(m.per_gpu_bytes / GIB, 4), "capacity_gib": round(m.capacity_bytes / GIB, 4)}


def _perf_json(est: HpcEstimate) -> dict[str, Any] | None:
    p = est.perf
    if p is None:
        return None
    hpc: dict[str, Any] = {
        "value": round(p.value, 6), "unit": p.unit, "higher_is_better": p.higher_is_better,
        "low": round(p.band[0], 6) if p.band else None, "high": round(p.band[1], 6) if p.band else None,
        "step_time_s": round(p.step.seconds, 9), "kernels_s": {k: round(v, 9) for k, v in p.step.kernels_s.items()},
        "overhead_s": round(p.step.overhead_s, 9), "host_link_s": round(p.step.host_s, 9),
        "gpus_per_run": p.gpus_per_run, "runs_at_once": p.runs_at_once, "rounds": p.rounds,
        "job_hours": round(p.job_hours, 6)}
    if est.app.unit == "ns/day":
        hpc["ns_per_day_all_runs"] = round(p.value * p.runs_at_once, 6)
    return {"bound": p.step.bound, "hpc": hpc}


def hpc_json(est: HpcEstimate) -> dict[str, Any]:
    """The estimate contract for `--task hpc`: perf.hpc.value in perf.hpc.unit, plus memory, cost and reasons."""
    app, job, gpu, cal = est.app, est.job, est.gpu, est.calibration
    return {
        "workload": {"app": app.id, "name": app.name, "task": "hpc", "kind": app.kind, app.size: getattr(job, app.size),
                     app.work: getattr(job, app.work), "timestep_fs": job.timestep_fs, "runs": job.runs,
                     "precision": app.precision, "fp64_dominant": est.fp64_dominant,
                     "multi_gpu": app.multi_gpu.mode},
        "hardware": {"gpu": gpu.id, "count": job.count, "interconnect": gpu.native_link, "ecc": gpu.ecc,
                     "fp32_tflops": gpu.fp32_tflops, "fp64_tflops": gpu.fp64_tensor_tflops or gpu.fp64_tflops,
                     "memory_bandwidth_gb_s": gpu.memory_bandwidth_gb_s},
        "job": job.model_dump(),
        "memory": _memory_json(est),
        "perf": _perf_json(est),
        "cost": None if est.cost is None else {"usd_per_hour": round(est.cost.usd_per_hour, 4),
                                               "usd_per_job": None if est.cost.usd_per_job is None else
                                               round(est.cost.usd_per_job, 4), "basis": est.cost.basis},
        "calibration": {"basis": cal.basis, "compute_efficiency": cal.compute_efficiency,
                        "memory_efficiency": cal.memory_efficiency, "step_overhead_s": cal.step_overhead_s,
                        "int_share": cal.int_share, "size_exponent": cal.size_exponent,
                        "band_measured_over_predicted": list(cal.band) if cal.band else None},
        "assumptions": list(est.assumptions), "warnings": list(est.warnings),
    }


def _number(value: float) -> str:
    return f"{value:,.3g}" if value < 100 else f"{value:,.0f}"


def hpc_view(est: HpcEstimate) -> Group:
    app, job, gpu = est.app, est.job, est.gpu
    size = f"{_number(size_of(job))} {_SIZE_WORDS[app.size]}"
    table = Table(title=f"{app.name}: {size}, {_number(work_of(job))} {_WORK_WORDS[app.work]} per run, {job.runs} "
                        f"run(s) on {job.count} x {gpu.id}", title_justify="left")
    for header in ("", "value"):
        table.add_column(header, justify="left" if not header else "right")
    m = est.memory
    table.add_row("memory per GPU", f"{m.per_gpu_bytes / GIB:,.2f} of {m.capacity_bytes / GIB:,.0f} GiB"
                  + ("" if m.fits else " (does NOT fit)"))
    p = est.perf
    if p is not None:
        band = f" (likely {_number(p.band[0])}-{_number(p.band[1])})" if p.band else " (no measured band)"
        table.add_row(f"per run ({p.gpus_per_run} GPU)", f"{_number(p.value)} {p.unit}{band}")
        table.add_row("one step", f"{p.step.seconds * 1e3:,.3g} ms, {p.step.bound}-bound")
        table.add_row("the whole job", f"{p.job_hours:,.2f} h ({p.runs_at_once} run(s) at once, {p.rounds} round(s))")
    if est.cost is not None:
        per_job = f", {est.cost.usd_per_job:,.2f} USD per job" if est.cost.usd_per_job is not None else ""
        table.add_row("cost", f"{est.cost.usd_per_hour:,.2f} USD/h{per_job}")
    lines = [f"warning: {w}" for w in est.warnings] + [f"- {a}" for a in est.assumptions]
    if est.cost is not None:
        lines.append(f"- cost basis: {est.cost.basis}")
    return Group(table, "\n".join(lines))
