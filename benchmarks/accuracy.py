"""gpuwise's estimates against published measurements (benchmarks/data/public-measurements.yaml).

Each case runs through the CLI code path (`gpuwise estimate ... --json`, in-process) and the predicted value
at the case's JSON key is compared with the measured one. Measurements differ in what they count, so the
prediction is read the same way (from the case's ``measured_as``):
  NVML "used" memory or card capacity  -> per_gpu_gb (CUDA context and allocator reserve included)
  torch.cuda.max_memory_allocated()    -> per_gpu_gb - framework overhead - allocator reserve
  torch reserved-memory statistics     -> per_gpu_gb - CUDA context
  (torch's statistics never see CUDA managed memory: a paged optimizer's resident states, memory.managed_gb, are
  taken out of both torch readings)
No case is special-cased: this mapping is the only per-case logic.

Run: python benchmarks/accuracy.py [--metric memory] [--markdown]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from gpuwise.cli.main import app

DATA = Path(__file__).parent / "data" / "public-measurements.yaml"


def load_cases(metric: str) -> list[dict[str, Any]]:
    cases = yaml.safe_load(DATA.read_text())["estimate_cases"]
    return [c for c in cases if c["key"].startswith(metric)]


def _args(case: dict[str, Any]) -> list[str]:
    args = [str(a) for a in case["args"]]
    if args[0].endswith(".json"):
        args[0] = str(DATA.parent / args[0])
    return ["estimate", *args]


def comparable(document: dict[str, Any], case: dict[str, Any]) -> float | None:
    """The predicted figure read the way the source measured it."""
    node: Any = document
    for part in case["key"].split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    value = float(node)
    if case["key"] != "memory.per_gpu_gb":
        return value
    memory = document["memory"]
    measured_as = case.get("measured_as", "").lower()
    if "nvml" in measured_as or "capacity" in measured_as:
        return value
    managed = memory.get("managed_gb", 0.0)  # CUDA managed memory (paged optimizers): torch's stats do not see it
    if "max_memory_allocated" in measured_as:
        parts = memory["breakdown_gb"]
        return value - parts["framework_overhead"] - parts["allocator_reserve"] - managed
    return value - memory["cuda_context_gb"] - managed


def run_case(runner: CliRunner, case: dict[str, Any]) -> dict[str, Any]:
    result = runner.invoke(app, _args(case))
    row: dict[str, Any] = {"id": case["id"], "expected": float(case["expected"]), "fidelity": case.get("fidelity")}
    if result.exit_code != 0:
        row.update(predicted=None, error=(result.stderr or result.stdout).strip())
        return row
    predicted = comparable(json.loads(result.stdout), case)
    row["predicted"] = predicted
    if predicted is not None:
        row["error_pct"] = 100.0 * (predicted - row["expected"]) / row["expected"]
    return row


def evaluate(metric: str) -> list[dict[str, Any]]:
    runner = CliRunner()
    return [run_case(runner, case) for case in load_cases(metric)]


def summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    errors = [abs(r["error_pct"]) for r in rows if "error_pct" in r]
    return {"cases": len(rows), "scored": len(errors),
            "median_abs_pct": statistics.median(errors) if errors else float("nan"),
            "max_abs_pct": max(errors) if errors else float("nan")}


def print_table(rows: list[dict[str, Any]], markdown: bool) -> None:
    if markdown:
        print("| case | fidelity | measured | predicted | error |")
        print("|---|---|---:|---:|---:|")
    for r in rows:
        pred = "error: " + r["error"] if r.get("predicted") is None else f"{r['predicted']:.2f}"
        err = f"{r['error_pct']:+.1f}%" if "error_pct" in r else "-"
        if markdown:
            print(f"| {r['id']} | {r['fidelity']} | {r['expected']:.2f} | {pred} | {err} |")
        else:
            print(f"{r['id']:55} {r['fidelity'] or '':7} {r['expected']:9.2f} {pred:>9} {err:>8}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metric", default="memory", help="prefix of the JSON key: memory, perf.train ...")
    parser.add_argument("--markdown", action="store_true")
    ns = parser.parse_args()
    rows = evaluate(ns.metric)
    print_table(rows, ns.markdown)
    s = summary(rows)
    print(f"\n{ns.metric}: {s['scored']}/{s['cases']} cases, median |error| {s['median_abs_pct']:.1f}%, "
          f"max {s['max_abs_pct']:.1f}%")
    keys = sorted({c["key"] for c in load_cases(ns.metric)})
    if len(keys) > 1:
        for key in keys:
            part = summary([r for r, c in zip(rows, load_cases(ns.metric), strict=True) if c["key"] == key])
            print(f"  {key}: {part['scored']} cases, median |error| {part['median_abs_pct']:.1f}%, "
                  f"max {part['max_abs_pct']:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
