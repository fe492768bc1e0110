"""gpuwise's vision estimates (ResNet, ViT, SAM encoders) against timm's published throughput
(benchmarks/data/public-vision-measurements.yaml).

Each case runs through the CLI (`gpuwise estimate ... --json`, in-process); the table shows measured and predicted
images per second and their ratio. Run: python benchmarks/vision_accuracy.py [--markdown]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

import yaml
from typer.testing import CliRunner

from gpuwise.cli.main import app

DATA = Path(__file__).parent / "data" / "public-vision-measurements.yaml"


def evaluate() -> list[dict[str, Any]]:
    runner = CliRunner()
    rows = []
    for case in yaml.safe_load(DATA.read_text())["cases"]:
        result = runner.invoke(app, ["estimate", *case["args"], "--json"])
        predicted = None
        if result.exit_code == 0:
            perf = json.loads(result.stdout)["perf"]
            predicted = (perf.get("train") or perf.get("infer") or {}).get("samples_per_s")
        rows.append({"id": case["id"], "model": case["args"][0], "measured": case["expected"],
                     "predicted": predicted, "ratio": predicted / case["expected"] if predicted else None})
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    errors = [abs(r["ratio"] - 1) for r in rows if r["ratio"]]
    return {"cases": len(errors), "median_abs_error": statistics.median(errors), "worst_abs_error": max(errors)}


def main() -> None:
    rows = evaluate()
    markdown = "--markdown" in sys.argv
    if markdown:
        print("| case | measured img/s | predicted img/s | predicted / measured |\n|---|---:|---:|---:|")
    for r in rows:
        cells = (r["id"], f"{r['measured']:,.1f}", f"{r['predicted']:,.1f}" if r["predicted"] else "-",
                 f"{r['ratio']:.2f}" if r["ratio"] else "-")
        plain = f"{cells[0]:52s} {cells[1]:>9} {cells[2]:>9} {cells[3]:>5}"
        print("| " + " | ".join(cells) + " |" if markdown else plain)
    for family in ("resnet-50", "vit-", "sam-vit-"):
        part = summary([r for r in rows if r["model"].startswith(family)])
        print(f"{family:10} {part['cases']:.0f} cases: median |error| {part['median_abs_error']:.1%}, worst "
              f"{part['worst_abs_error']:.1%}")
    total = summary(rows)
    print(f"all {total['cases']:.0f} cases: median |error| {total['median_abs_error']:.1%}")


if __name__ == "__main__":
    main()
