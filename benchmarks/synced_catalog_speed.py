"""Recommend with a synced price catalog of 10,000 offers (issue 30: 14.7 s before, the target under 2 s): a
SkyPilot-format vms.csv of 10,000 GPU offers is written, synced into a scratch catalog file, and
`recommend llama-3.1-8b --task infer --qps 5 --rent` timed with and without it, cold, through the CLI.

Run: python benchmarks/synced_catalog_speed.py
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

TYPES = (("p5.48xlarge", "H100", 8, 98.32, 81920), ("g5.xlarge", "A10G", 1, 1.006, 24576),
         ("g6.xlarge", "L4", 1, 0.805, 24576), ("g4dn.xlarge", "T4", 1, 0.526, 16384),
         ("g6e.xlarge", "L40S", 1, 1.861, 49152))


def write_vms(path: Path, offers: int) -> None:
    rows = ["InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,"
            "AvailabilityZone"]
    for i in range(offers // 2):  # each row is an on-demand and a spot offer
        name, gpu, count, price, mib = TYPES[i % len(TYPES)]
        info = f"\"{{'Gpus': [{{'Name': '{gpu}', 'Count': {count}.0, 'MemoryInfo': {{'SizeInMiB': {mib}}}}}]}}\""
        rows.append(f"{name},{gpu},{count}.0,8.0,32.0,{info},{price * (1 + i % 7 / 100):.4f},{price * 0.4:.4f},"
                    f"r{i // 5},r{i // 5}-a")  # one zone a region: sync folds a region's zones into one offer
    path.write_text("\n".join(rows) + "\n")


def timed(*args: str) -> float:
    start = time.perf_counter()
    subprocess.run(["gpuwise", *args], capture_output=True, check=True)
    return time.perf_counter() - start


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        vms, synced = Path(folder) / "aws" / "vms.csv", Path(folder) / "synced.yaml"
        vms.parent.mkdir()
        write_vms(vms, 10_000)
        print(f"sync 10,000 offers: {timed('catalog', 'sync', '--from', str(vms), '--to', str(synced)):.2f} s")
        job = ("recommend", "llama-3.1-8b", "--task", "infer", "--qps", "5", "--rent")
        print(f"recommend, shipped catalog: {timed(*job):.2f} s")
        print(f"recommend, with the 10,000 synced offers: {timed(*job, '--catalog', str(synced)):.2f} s")


if __name__ == "__main__":
    main()
