"""serve-sim --concurrency against measured serving runs (../shared/data/public-serving-measurements.yaml).

Each row is a serving call (`gpuwise serve-sim MODEL ... --concurrency C --json`) with the measured mean TTFT and
TPOT; the prediction is read at `at_concurrency.ttft_ms.mean` and `at_concurrency.tpot_ms.mean`. A row the CLI
refuses (a flag not modelled yet, a model without a preset) counts as unanswered, with its one-line reason.

Run: python benchmarks/serving_accuracy.py [--file PATH] [--by-model]
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from gpuwise.cli.main import app

DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "public-serving-measurements.yaml"


def run(case: dict[str, Any], runner: CliRunner) -> dict[str, Any]:
    args = ["serve-sim", *[str(a) for a in case["args"]]]  # serve-sim picks a steady-state request count
    done = runner.invoke(app, args)
    row: dict[str, Any] = {"id": case["id"], "model": case["args"][0]}
    if done.exit_code != 0:
        row["refused"] = (done.stderr or done.stdout).strip().splitlines()[-1][:160]
        return row
    at = json.loads(done.stdout)["at_concurrency"]
    for key in ("ttft_ms", "tpot_ms"):
        predicted = at[key]["mean"]
        row[key] = None if predicted is None else 100.0 * (predicted - case[key]) / case[key]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=DEFAULT)
    parser.add_argument("--by-model", action="store_true")
    ns = parser.parse_args()
    cases = yaml.safe_load(ns.file.read_text())
    runner = CliRunner()
    rows = [run(c, runner) for c in cases]
    answered = [r for r in rows if "refused" not in r]
    print(f"answered {len(answered)}/{len(rows)}")
    for key in ("tpot_ms", "ttft_ms"):
        signed = [r[key] for r in answered if r.get(key) is not None]
        if signed:
            print(f"{key}: median |error| {statistics.median(abs(e) for e in signed):.1f}%, signed median "
                  f"{statistics.median(signed):+.1f}% (- is too fast) over {len(signed)} runs")
    if ns.by_model:
        by: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
        for r in answered:
            by[r["model"]].append(r)
        for model, group in sorted(by.items()):
            tp = statistics.median(abs(r["tpot_ms"]) for r in group if r["tpot_ms"] is not None)
            tt = statistics.median(abs(r["ttft_ms"]) for r in group if r["ttft_ms"] is not None)
            signed = statistics.median(r["tpot_ms"] for r in group if r["tpot_ms"] is not None)
            print(f"  {model:32s} {len(group):3d} runs  TPOT {tp:6.1f}% (signed {signed:+.1f}%)  TTFT {tt:6.1f}%")
    reasons = collections.Counter(r["refused"] for r in rows if "refused" in r)
    for reason, n in reasons.most_common(8):
        print(f"  refused x{n}: {reason}")


if __name__ == "__main__":
    main()
