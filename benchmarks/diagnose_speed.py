"""How long `diagnose` takes on a 100,000-line training log with one error buried in it.

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


if __name__ == "__main__":
    main()
