"""Regression guard on the published-measurement benchmark (benchmarks/accuracy.py; the table is in the README).

The bound is the measured median plus a small margin: a change that makes the memory model worse on the
published cases fails here. It is not a timing test.
"""

from __future__ import annotations

from types import ModuleType

import pytest

from conftest import load_benchmark


@pytest.fixture(scope="module")
def accuracy() -> ModuleType:
    return load_benchmark("accuracy")


def test_every_memory_case_runs_and_the_median_error_holds(accuracy) -> None:  # type: ignore[no-untyped-def]
    rows = accuracy.evaluate("memory")
    assert len(rows) >= 15
    assert all(r.get("predicted") is not None for r in rows), [r for r in rows if r.get("predicted") is None]
    summary = accuracy.summary(rows)
    assert summary["median_abs_pct"] <= 12.0


def test_exact_fidelity_cases_stay_within_30_percent(accuracy) -> None:  # type: ignore[no-untyped-def]
    """The exact cases are the HF docs' BERT-large runs of 2022 (torch 1.x): -21 % and -28 % today, for two mechanisms
    of that stack gpuwise models as 2026 stacks run (README, 'Where we are wrong'): Module.zero_grad() kept the
    gradients between steps before torch 2.0 (set_to_none=False), and CUDA loaded every kernel at start (the docs
    of that era: 'can take up 1-2GB'; lazy loading now takes 357 MiB)."""
    exact = [r for r in accuracy.evaluate("memory") if r["fidelity"] == "exact"]
    assert exact and all(abs(r["error_pct"]) <= 30 for r in exact)


def test_image_timings_stay_within_their_measured_range() -> None:
    """benchmarks/image_accuracy.py against published SDXL/FLUX timings: today 0.66-0.91x, median 0.80x, but for
    sequential offload at 0.30x (accelerate's per-module copies from pageable memory ran at 2-3 GB/s in the HF blog's
    run; README, 'Where we are wrong')."""
    module = load_benchmark("image_accuracy")
    rows = module.evaluate()
    ratios = [r["ratio"] for r in rows if "sequential-offload" not in r["id"]]
    assert len(ratios) >= 7 and all(r is not None and 0.6 <= r <= 1.5 for r in ratios), ratios
    offload = [r["ratio"] for r in rows if "sequential-offload" in r["id"]]
    assert offload and all(r is not None and 0.25 <= r <= 1.5 for r in offload), offload
