"""gpuwise's image-generation estimates against published timings (benchmarks/data/public-image-measurements.yaml).

Each case runs through the CLI (`gpuwise estimate ... --json`, in-process); the table shows measured and predicted
seconds per pipeline call and their ratio. Run: python benchmarks/image_accuracy.py [--markdown]
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

DATA = Path(__file__).parent / "data" / "public-image-measurements.yaml"


def evaluate() -> list[dict[str, Any]]:
    runner = CliRunner()
    rows = []
    for case in yaml.safe_load(DATA.read_text())["cases"]:
        result = runner.invoke(app, ["estimate", *case["args"], "--json"])
        predicted = json.loads(result.stdout)["perf"]["seconds_per_call"] if result.exit_code == 0 else None
        rows.append({"id": case["id"], "measured": case["expected"], "predicted": predicted,
                     "ratio": predicted / case["expected"] if predicted else None})
    return rows


def main() -> None:
    rows = evaluate()
    markdown = "--markdown" in sys.argv
    if markdown:
        print("| case | measured s | predicted s | predicted / measured |\n|---|---:|---:|---:|")
    for r in rows:
        cells = (r["id"], f"{r['measured']:.2f}", f"{r['predicted']:.2f}", f"{r['ratio']:.2f}")
        plain = f"{cells[0]:45s} {cells[1]:>8} {cells[2]:>8} {cells[3]:>6}"
        print("| " + " | ".join(cells) + " |" if markdown else plain)
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    print(f"\n{len(ratios)} cases, median predicted/measured {statistics.median(ratios):.2f}, "
          f"range {min(ratios):.2f}-{max(ratios):.2f}")


if __name__ == "__main__":
    main()
