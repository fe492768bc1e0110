"""How fast the catalog answers: cold load in a fresh process, warm lookups, and CLI wall time.

Run: python benchmarks/catalog_speed.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

COLD = (
    "import time; t=time.perf_counter(); from gpuwise.catalog import load_catalog; "
    "c=load_catalog(use_user_dir=False); print(time.perf_counter()-t, len(c.gpus), len(c.offers))"
)


def cold_load(repeats: int = 5) -> None:
    times = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, "-c", COLD], capture_output=True, text=True, check=True).stdout
        seconds, gpus, offers = out.split()
        times.append(float(seconds))
    print(f"cold import + load of {gpus} GPUs, {offers} offers: median {statistics.median(times) * 1000:.0f} ms")


def warm_lookups(n: int = 2000) -> None:
    from gpuwise.catalog import load_catalog

    cat = load_catalog(use_user_dir=False)
    names = ["4090", "RTX 4090", "a100 sxm4 80gb", "mi300x", "h200 nvl", "L40S"]
    start = time.perf_counter()
    for i in range(n):
        cat.gpu(names[i % len(names)])
    per = (time.perf_counter() - start) / n
    print(f"warm lookup by loose name: {per * 1e6:.0f} us each")


def cli_wall(repeats: int = 5) -> None:
    args = ["gpuwise", "catalog", "compare", "rtx-4090", "a100-sxm-80gb", "h100-sxm-80gb"]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(args, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    print(f"`{' '.join(args)}` wall time: median {statistics.median(times) * 1000:.0f} ms")


if __name__ == "__main__":
    cold_load()
    warm_lookups()
    cli_wall()
