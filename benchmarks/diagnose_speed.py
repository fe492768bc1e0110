"""How long `diagnose` takes on a 100,000-line training log with one error buried in it, and on a 5 MB log of one
line (a progress bar's carriage returns) with 100,000 hits, which once took 49 s (every hit scanned back to the line
start); tests/test_robustness.py checks the answer, this the time (under 5 s was the claim).

Run: python benchmarks/diagnose_speed.py
"""

from __future__ import annotations

import time

from gpuwise import api


def main() -> None:
    noise = "\n".join(f"step {i} | loss {1 / (i + 1):.4f} | lr 2e-4 | tokens/s 1830" for i in range(100_000))
    log = noise + "\nRuntimeError: CUDA error: an illegal memory access was encountered\n"
    api.diagnose("warm-up")
    start = time.perf_counter()
    result = api.diagnose(log)
    seconds = time.perf_counter() - start
    print(f"100,000 lines ({len(log) / 1e6:.1f} MB): {seconds * 1000:.0f} ms, {len(result.matches)} match(es), "
          f"best: {result.matches[0].entry.id if result.matches else '-'}")
    one_line = "step 1 CUDA out of memory. Tried to allocate 2.00 GiB\r" * 100_000
    start = time.perf_counter()
    result = api.diagnose(one_line)
    seconds = time.perf_counter() - start
    print(f"one line of 100,000 hits ({len(one_line) / 1e6:.1f} MB): {seconds * 1000:.0f} ms, best: "
          f"{result.matches[0].entry.id if result.matches else '-'}")


if __name__ == "__main__":
    main()
