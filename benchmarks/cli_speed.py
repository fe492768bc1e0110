"""The README's first command timed as a whole process, as a user waits for it, `gpuwise --help`, and `import gpuwise`
alone: wall-clock seconds, and the CPU seconds (user + system) the process used, which a loaded machine inflates less.
`gpuwise --help` is held under 0.5 s of CPU (issue 38).

Each figure is the median of --runs runs after one warm-up run (which writes the bytecode cache a normal install
keeps; PYTHONDONTWRITEBYTECODE is cleared so the cache is used as on a user's machine). Quiet machine assumed.

Run: python benchmarks/cli_speed.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

README_COMMAND = ["recommend", "meta-llama/Llama-3.1-8B", "--method", "qlora", "--grad-ckpt", "--budget-usd", "3000"]


def _seconds(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock and CPU (user + system) seconds of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True, env=env, timeout=120)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7, choices=range(1, 51), metavar="N")
    runs = parser.parse_args().runs
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    entry = shutil.which("gpuwise")
    head = [entry] if entry else [sys.executable, "-m", "gpuwise.cli.main"]
    cases = {"gpuwise " + " ".join(README_COMMAND): [*head, *README_COMMAND],
             "gpuwise --help": [*head, "--help"],
             "python -c 'import gpuwise'": [sys.executable, "-c", "import gpuwise"],
             "python -c 'pass' (the interpreter alone)": [sys.executable, "-c", "pass"]}
    for name, argv in cases.items():
        _seconds(argv, env)  # warm-up: bytecode cache, page cache
        measured = [_seconds(argv, env) for _ in range(runs)]
        times, cpu = [m[0] for m in measured], [m[1] for m in measured]
        print(f"{statistics.median(times):6.3f} s median (min {min(times):.3f}, max {max(times):.3f}, "
              f"{runs} runs), CPU {statistics.median(cpu):.3f} s  {name}")


if __name__ == "__main__":
    main()
