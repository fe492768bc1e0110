"""Whole-catalog recommendation speed: in-process (warm and cold) and the CLI's wall time, cold.

Run: python benchmarks/recommend_speed.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

EXAMPLES = Path(__file__).parents[1] / "examples"
COLD = ("import time; t=time.perf_counter(); import gpuwise; from gpuwise.recommend.request import load_scenario; "
        "r=gpuwise.recommend(load_scenario(__import__('pathlib').Path({path!r}))); "
        "print(time.perf_counter()-t, len(r.options), len(r.rejected))")


def main() -> None:
    for scenario in sorted(EXAMPLES.glob("*.yaml")):
        runs = [subprocess.run([sys.executable, "-c", COLD.format(path=str(scenario))], capture_output=True,
                               text=True, check=True).stdout.split() for _ in range(3)]
        seconds = statistics.median(float(r[0]) for r in runs)
        start = time.perf_counter()
        subprocess.run(["gpuwise", "recommend", "--scenario", str(scenario), "--json"], capture_output=True,
                       check=True)
        wall = time.perf_counter() - start
        print(f"{scenario.stem:24} in-process (import + catalog + all candidates) {seconds * 1000:5.0f} ms "
              f"({runs[0][1]} options, {runs[0][2]} rejections); CLI wall {wall * 1000:5.0f} ms")


if __name__ == "__main__":
    main()
