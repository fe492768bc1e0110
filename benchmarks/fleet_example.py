"""Build the README's example fleet: four nodes from the recorded H200 run (benchmarks/results/h200-2026-11-29),
node02's GEMM lowered by 25 %, and report on it; with --screenshot PNG, render the HTML report in chromium.

Run: python benchmarks/fleet_example.py OUT [--screenshot docs/fleet-report.png]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

H200 = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "h200-2026-11-29"


def build(out: Path, slow: int = 2, nodes: int = 4) -> None:
    for i in range(nodes):
        folder = out / f"node{i:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        doctor = json.loads((H200 / "doctor.json").read_text())
        doctor["host"] = folder.name
        (folder / "doctor.json").write_text(json.dumps(doctor))
        bench = json.loads((H200 / "bench.json").read_text())
        for r in bench["results"]:
            if i == slow and r["metric"].startswith("gemm_"):
                r["value"] *= 0.75
        (folder / "bench.json").write_text(json.dumps(bench))
        shutil.copy(H200 / "burnin.json", folder / "burnin.json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--screenshot", type=Path)
    ns = parser.parse_args()
    build(ns.out)
    html = ns.out / "report.html"
    subprocess.run([sys.executable, "-m", "gpuwise.cli.main", "fleet", "report", str(ns.out), "--html", str(html)],
                   check=False)
    if ns.screenshot:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                                        args=["--no-sandbox", "--disable-gpu"])
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            page.goto(html.resolve().as_uri())
            page.wait_for_selector(".plot-container")
            page.screenshot(path=str(ns.screenshot), full_page=False)
            browser.close()


if __name__ == "__main__":
    main()
