"""Scientific computing (`--task hpc`): the profiles against their sources, the estimator against hand-worked
formulas and published per-GPU runs it was not fitted on, the recommender against the answers an HPC engineer gives,
and the shells' errors."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import load_benchmark
from gpuwise import api
from gpuwise.errors import ConfigError
from gpuwise.estimate.hpc.estimate import hpc_estimate
from gpuwise.estimate.hpc.model import kernels_of, value_of
from gpuwise.estimate.hpc.rates import flop_rate, fp64_cut
from gpuwise.workload.hpc.apps import apps
from gpuwise.workload.jobs.hpc import APPS, HpcJob

CATALOG = api.load_catalog()


def estimate(gpu: str, **options: object):  # type: ignore[no-untyped-def]
    return hpc_estimate(HpcJob(**options), CATALOG.gpus[gpu], CATALOG)


# ---- the profiles against their sources ---------------------------------------------------------------------


def test_every_application_the_issue_names_has_a_sourced_profile() -> None:
    assert set(APPS) == {"hpl", "hpcg", "gromacs", "amber", "openmm", "lammps", "namd", "openfoam", "vasp", "custom"}
    for app in apps().values():
        assert app.sources and all(s.url.startswith("http") for s in app.sources), app.id
        assert app.precision and app.multi_gpu.note and app.stacks_basis, app.id


def test_hpcg_work_is_the_hpcg_31_flop_and_traffic_model() -> None:
    """NVIDIA/nvidia-hpcg ReportResults.cpp per equation and iteration, 27-point stencil, 3 coarse levels, one pre-
    and post-smoothing step: worked by hand from its formulas."""
    nnz = 27.0
    flops = 3 * 2 + 3 * 2 + 2 * nnz + sum((4 + 2 + 4) * nnz / 8**level for level in range(3)) + 4 * nnz / 8**3
    reads_writes = (3 * 2 * 8) + (3 * 2 * 8 + 3 * 8) + (nnz * 12 + 8 + 8)  # ddot, waxpby, spmv
    for level in range(3):
        rows = 1 / 8**level
        pre_post = 2 * (2 * nnz * rows * 12 + rows * 8) + rows * 8 + nnz * rows * 8
        residual = nnz * rows * 12 + rows * 8 + nnz * rows * 8
        reads_writes += pre_post + residual
    reads_writes += (2 * nnz * 12 + 8) / 8**3 + 8 / 8**3
    kernel = apps()["hpcg"].kernels[0]
    assert kernel.flops == pytest.approx(flops, rel=1e-3)
    assert kernel.bytes == pytest.approx(reads_writes, rel=2e-3)
    assert kernel.flops / kernel.bytes == pytest.approx(0.132, abs=0.001)  # what an MI100 run reports (rocHPCG #46)


def test_md_nonbonded_work_is_the_gromacs_logs_flop_count() -> None:
    """ENCCS md.log: NxN QSTab [F] 44,891,051.720 + [V&F] 7,184,876.040 mega-FLOPs over 10,001 steps of 141,677
    atoms."""
    per_atom_step = (44_891_051.720 + 7_184_876.040) * 1e6 / 10_001 / 141_677
    assert apps()["gromacs"].kernels[0].flops == pytest.approx(per_atom_step, rel=1e-3)


def test_units_are_the_applications_own() -> None:
    """ns/day = dt x steps per day; HPL TFLOPS = 2/3 N^3 / seconds (both worked by hand)."""
    md = HpcJob(app="gromacs", atoms=100_000, ns=1, timestep_fs=2)
    assert value_of(apps()["gromacs"], md, 1e-3) == pytest.approx(2e-6 * 86_400 / 1e-3)  # 172.8 ns/day
    hpl = HpcJob(app="hpl", matrix_n=100_000, solves=1)
    assert value_of(apps()["hpl"], hpl, 10.0) == pytest.approx(2 / 3 * 1e15 / 10 / 1e12)


def test_hpl_memory_is_the_matrix_split_over_the_gpus() -> None:
    one, four = estimate("a100-sxm-80gb", app="hpl", matrix_n=80_000), estimate("a100-sxm-80gb", app="hpl",
                                                                                   matrix_n=80_000, count=4)
    assert one.memory.breakdown_bytes["problem"] == pytest.approx(8 * 80_000**2)
    assert four.memory.breakdown_bytes["problem"] == pytest.approx(8 * 80_000**2 / 4)


# ---- the hardware facts the model reads -----------------------------------------------------------------------


ISSUE_BOUND_NVIDIA = {"8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "12.0", "12.1"}
"""Whitepapers: 32 FP32 lanes per warp scheduler on GA10x (8.6/8.7), AD10x (8.9), GH100 (9.0), Blackwell (10.x,
12.x); 16 on Volta (7.0), Turing (7.5) and GA100 (8.0)."""


def test_issue_bound_fp32_follows_the_architecture() -> None:
    for gpu in CATALOG.gpus.values():
        if gpu.vendor == "nvidia":
            assert gpu.fp32_issue_bound == (gpu.compute_capability in ISSUE_BOUND_NVIDIA), gpu.id


def test_fp32_rate_pays_for_other_instructions_only_where_every_slot_is_fp32() -> None:
    """With r = 1 instruction per FP32 one, an A100 (16 lanes per scheduler) keeps 19.5 TFLOPS; an RTX 4090 (32)
    gets half of its 82.6."""
    assert flop_rate(CATALOG.gpus["a100-sxm-80gb"], "fp32", 1.0) == pytest.approx(19.5e12)
    assert flop_rate(CATALOG.gpus["rtx-4090"], "fp32", 1.0) == pytest.approx(82.6e12 / 2)


def test_cut_down_fp64_is_the_consumer_and_inference_parts() -> None:
    cut = {g.id for g in CATALOG.gpus.values() if fp64_cut(g)}
    assert {"rtx-4090", "rtx-5090", "l4", "t4", "l40s", "rtx-6000-ada", "b300-sxm-288gb"} <= cut
    assert not {"a100-sxm-80gb", "h100-sxm-80gb", "v100-sxm2-32gb", "mi250x", "b200-sxm-180gb"} & cut


# ---- published runs the fit did not see ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def calibrate() -> ModuleType:
    return load_benchmark("calibrate_hpc")


def _left_out(calibrate: ModuleType, family: str, series: str) -> list[float]:
    runs = calibrate.load_runs()
    params = calibrate.fit([x for x in runs if x.family != family])
    return [calibrate.predict(x, params[series]) / x.value - 1 for x in runs
            if x.family == family and x.series == series]


def test_amber_lands_near_published_runs_on_cards_left_out(calibrate: ModuleType) -> None:
    """AMBER's GPU benchmark suite (JAC, FactorIX, Cellulose, STMV) on each card it has, predicted with that card
    out of every fit. Today: median 6%, 9 of 12 within the issue's 25%; the misses are the A100 (-31%: its 40 MB L2,
    which the model does not have, holds what the bandwidth term charges) and the power-capped 3090's STMV (+28%)
    (README, 'Where we are wrong')."""
    errors = [e for family in ("rtx-3090", "v100-sxm2", "a100-sxm") for e in _left_out(calibrate, family, "amber")]
    assert len(errors) == 12
    assert statistics_median(abs(e) for e in errors) <= 0.10, errors
    assert sum(abs(e) <= 0.25 for e in errors) >= 9 and all(abs(e) <= 0.35 for e in errors), errors


def test_openmm_mechanism_holds_on_modern_cards_left_out(calibrate: ModuleType) -> None:
    """The shared MD shape (issue-bound FP32, bandwidth, size) fitted without each card, on OpenMM 8.x's own runs of
    it. Today: 4090, 5090 and L40S within 9% (median), A100 -26% and H100 +32% (README, 'Where we are wrong')."""
    per_card = {family: [e for s in ("openmm-8.4", "openmm-8.0") for e in _left_out(calibrate, family, s)]
                for family in ("rtx-4090", "h100-sxm", "l40s", "rtx-5090", "a100-sxm")}
    assert all(statistics_median(abs(e) for e in per_card[f]) <= 0.10 for f in ("rtx-4090", "l40s", "rtx-5090"))
    everything = [e for errors in per_card.values() for e in errors]
    assert statistics_median(abs(e) for e in everything) <= 0.16, per_card


def test_namd_gpu_resident_ranks_ampere_cards_it_did_not_see(calibrate: ModuleType) -> None:
    """Puget's NAMD 3 alpha10 runs on 11 cards: each predicted with that card out, median within 12%."""
    errors = [e for family in ("rtx-3080", "rtx-a5000", "rtx-3090-ti", "gtx-1080-ti", "rtx-2080-ti")
              for e in _left_out(calibrate, family, "namd-3.0a10-puget")]
    assert statistics_median(abs(e) for e in errors) <= 0.12, errors


def test_the_estimator_and_the_calibration_compute_the_same_step(calibrate: ModuleType) -> None:
    """Two code paths, one model: the calibration file's numbers through estimate/hpc/model.py reproduce the fit's own
    prediction of every run of the series each app is calibrated on."""
    runs = calibrate.load_runs()
    params = calibrate.fit(runs)
    for run in runs:
        if calibrate.SERIES_OF_APP.get(run.app) != run.series or run.gpus != 1 or run.rocm:
            continue
        est = hpc_estimate(run.job, run.gpu, CATALOG)
        assert est.perf is not None
        assert est.perf.value == pytest.approx(calibrate.predict(run, params[run.series]), rel=0.02), run


def statistics_median(values: object) -> float:
    ordered = sorted(values)  # type: ignore[call-overload]
    middle = len(ordered) // 2
    return float(ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2)


# ---- properties ---------------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(atoms=st.integers(1_000, 5_000_000), factor=st.floats(1.1, 10))
def test_a_bigger_md_system_is_never_faster(atoms: int, factor: float) -> None:
    small = estimate("rtx-4090", app="amber", atoms=atoms)
    big = estimate("rtx-4090", app="amber", atoms=int(atoms * factor))
    if small.perf and big.perf:
        assert big.perf.value <= small.perf.value


@settings(max_examples=25, deadline=None)
@given(n=st.integers(10_000, 45_000))
def test_an_hpl_solve_grows_as_n_cubed(n: int) -> None:
    a = estimate("h100-sxm-80gb", app="hpl", matrix_n=n).perf
    b = estimate("h100-sxm-80gb", app="hpl", matrix_n=2 * n).perf
    assert a is not None and b is not None
    assert b.step.seconds / a.step.seconds == pytest.approx(8.0, rel=1e-6)


def test_independent_runs_fill_the_gpus_and_parallel_runs_split() -> None:
    amber = estimate("rtx-4090", app="amber", count=4, runs=8).perf
    assert amber is not None and (amber.gpus_per_run, amber.runs_at_once, amber.rounds) == (1, 4, 2)
    gromacs = estimate("h100-sxm-80gb", app="gromacs", atoms=2_000_000, count=4).perf
    assert gromacs is not None and gromacs.gpus_per_run == 4
    one = estimate("h100-sxm-80gb", app="gromacs", atoms=2_000_000).perf
    assert one is not None and one.value < gromacs.value < 4 * one.value


# ---- what an HPC engineer would say ----------------------------------------------------------------------------


def _top(**request: object) -> list[str]:
    rec = api.recommend(request)
    return [o.gpu for o in rec.options]


GEFORCE = {g.id for g in CATALOG.gpus.values() if g.segment == "consumer" and g.vendor == "nvidia"}


@pytest.mark.parametrize("budget", [None, 2_000, 3_000, 20_000, 300_000])
def test_hpl_never_ranks_a_geforce_card_first(budget: float | None) -> None:
    request: dict[str, object] = {"workloads": [{"task": "hpc", "options": {"app": "hpl", "matrix_n": 60_000}}]}
    if budget:
        request["budget_usd"] = budget
    ranked = _top(**request)
    assert not ranked or ranked[0] not in GEFORCE
    assert not GEFORCE & set(ranked)  # cut-down FP64: refused outright


def test_gromacs_on_a_desktop_budget_ranks_a_geforce_card_first() -> None:
    ranked = _top(workloads=[{"task": "hpc", "options": {"app": "gromacs", "atoms": 150_000, "ns": 500}}],
                  budget_usd=3_000, constraints={"chassis": "desktop"}, acquisitions=["buy-new", "buy-used"])
    assert ranked and ranked[0] in GEFORCE


def test_an_fp64_cfd_job_flags_consumer_cards_fp64_rate() -> None:
    rec = api.recommend({"workloads": [{"task": "hpc", "options": {"app": "openfoam", "cells": 10_000_000}}],
                         "constraints": {"chassis": "desktop"}, "acquisitions": ["buy-new", "buy-used"]})
    consumer = [o for o in rec.options if o.gpu in GEFORCE]
    assert consumer and all(any("cut-down FP64" in w for w in o.warnings) for o in consumer)
    assert all(any("no ECC" in w for w in o.warnings) for o in consumer)


def test_hpc_jobs_are_ranked_by_cost_per_job_unless_told_otherwise() -> None:
    workloads = [{"task": "hpc", "options": {"app": "amber"}}]
    assert api.recommend({"workloads": workloads, "top": 1}).request.objective == "cost-per-job"
    assert api.recommend({"workloads": workloads, "objective": "tco", "top": 1}).request.objective == "tco"


def test_a_deadline_keeps_the_smallest_count_that_meets_it() -> None:
    rec = api.recommend({"workloads": [{"task": "hpc", "options": {"app": "amber", "runs": 8, "ns": 200},
                                        "deadline_hours": 60}], "gpus": ["rtx-4090"], "acquisitions": ["buy-new"]})
    assert rec.options and all((o.fit.job_hours_high or 0) <= 60 for o in rec.options)


# ---- the shells --------------------------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuwise.cli.main", *args], capture_output=True, text=True,
                          timeout=120)


def test_estimate_json_carries_the_contracts_hpc_keys() -> None:
    out = _cli("estimate", "--task", "hpc", "--app", "gromacs", "--atoms", "250000", "--gpu", "rtx-4090", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["perf"]["hpc"]["unit"] == "ns/day" and doc["perf"]["hpc"]["value"] > 0
    assert doc["memory"]["fits"] and doc["workload"]["task"] == "hpc"


@pytest.mark.parametrize(("args", "says"), [
    (("--task", "hpc", "--gpu", "rtx-4090"), "--task hpc needs --app"),
    (("--task", "hpc", "--app", "hpl", "--atoms", "1000", "--gpu", "a100"), "--atoms does not apply to --app hpl"),
    (("--task", "hpc", "--app", "amber", "--gpu", "no-such-card"), "unknown GPU"),
    (("--atoms", "1000", "--gpu", "rtx-4090"), "add --task hpc"),
    (("llama-3.1-8b", "--task", "hpc", "--app", "amber", "--gpu", "rtx-4090"), "leave MODEL out"),
    (("--task", "hpc", "--app", "amber", "--method", "lora", "--gpu", "rtx-4090"), "does not apply to --task hpc"),
    (("--task", "hpc", "--app", "custom", "--gpu", "rtx-4090"), "--fp64-fraction"),
    (("--task", "hpc", "--app", "amber", "--atoms", "-5", "--gpu", "rtx-4090"), "--atoms"),
])
def test_bad_hpc_input_is_one_line_and_exit_2(args: tuple[str, ...], says: str) -> None:
    out = _cli("estimate", *args)
    assert out.returncode == 2 and says in out.stderr and out.stderr.count("\n") == 1, out.stderr
    as_json = _cli("estimate", *args, "--json")
    assert as_json.returncode == 2 and says in json.loads(as_json.stdout)["error"]


def test_recommend_takes_the_hpc_flags() -> None:
    out = _cli("recommend", "--task", "hpc", "--app", "amber", "--atoms", "90000", "--runs", "4", "--budget-usd",
               "8000", "--chassis", "workstation", "--json")
    assert out.returncode == 0, out.stderr
    options = json.loads(out.stdout)["options"]
    assert options and options[0]["hpc"]["unit"] == "ns/day"


def test_api_refuses_a_job_and_its_options_together() -> None:
    with pytest.raises(ConfigError, match="not both"):
        api.hpc_estimate(gpu="rtx-4090", job=HpcJob(app="amber"), atoms=10_000)


def test_custom_code_is_described_by_its_flags() -> None:
    est = estimate("a100-sxm-80gb", app="custom", fp64_fraction=1.0, bytes_per_flop=0.01, memory_gb=10,
                   work_tflop=2, iterations=1)
    assert est.perf is not None and [k.precision for k in kernels_of(est.app, est.job)] == ["fp64"]
    # compute-bound FP64: 2 TFLOP at the A100's 9.7 TFLOPS vector FP64 and HPL's measured efficiency
    assert est.perf.value == pytest.approx(2e12 / (9.7e12 * est.calibration.compute_efficiency), rel=1e-3)
    assert math.isfinite(est.perf.job_hours)
