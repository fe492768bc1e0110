"""The README's first command timed as a whole process, as a user waits for it, and `import gpuwise` alone.

Each figure is the median of --runs runs after one warm-up run (which writes the bytecode cache a normal install
keeps; PYTHONDONTWRITEBYTECODE is cleared so the cache is used as on a user's machine). Quiet machine assumed.

Run: python benchmarks/cli_speed.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

README_COMMAND = ["recommend", "meta-llama/Llama-3.1-8B", "--method", "qlora", "--grad-ckpt", "--budget-usd", "3000"]


def _wall_s(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True, env=env, timeout=120)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7, choices=range(1, 51), metavar="N")
    runs = parser.parse_args().runs
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    entry = shutil.which("gpuwise")
    command = [entry, *README_COMMAND] if entry else [sys.executable, "-m", "gpuwise.cli.main", *README_COMMAND]
    cases = {"gpuwise " + " ".join(README_COMMAND): command,
             "python -c 'import gpuwise'": [sys.executable, "-c", "import gpuwise"],
             "python -c 'pass' (the interpreter alone)": [sys.executable, "-c", "pass"]}
    for name, argv in cases.items():
        _wall_s(argv, env)  # warm-up: bytecode cache, page cache
        times = [_wall_s(argv, env) for _ in range(runs)]
        print(f"{statistics.median(times):6.3f} s median (min {min(times):.3f}, max {max(times):.3f}, "
              f"{runs} runs)  {name}")


if __name__ == "__main__":
    main()
