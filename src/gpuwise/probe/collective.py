"""`gpuwise bench collective`: all-reduce, all-gather and reduce-scatter bus bandwidth over N processes.

The processes are started by torch.distributed's own launcher (``python -m torch.distributed.run``, torchrun), so
a multi-node run is the same command with torchrun's rendezvous flags (README, "Fleet"). Each process runs this
module's ``main``. Bandwidth is counted as nccl-tests does (its doc/PERFORMANCE.md): algbw = S / t, where S is the
buffer each rank ends with (all-reduce: the tensor; all-gather: the gathered output; reduce-scatter: the input),
and busbw = algbw x 2(n-1)/n for all-reduce, algbw x (n-1)/n for all-gather and reduce-scatter, the share of S
that must cross the slowest link, so busbw compares with the link's bandwidth at any n.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuwise.errors import ConfigError, ProbeUnavailable
from gpuwise.safe_io import atomic_write_text, parse_json, read_text

OPS = ("all_reduce", "all_gather", "reduce_scatter")
BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n}
LAUNCH_TIMEOUT_S = 900  # the whole run; a rank that never joins ends it instead of hanging


@dataclass(frozen=True)
class CollectiveResult:
    op: str
    size_bytes: int
    seconds: float
    algbw_gb_s: float
    busbw_gb_s: float


def bus_bandwidth(op: str, size_bytes: int, seconds: float, ranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s of one ``op`` moving ``size_bytes`` (the buffer each rank ends with) in ``seconds``."""
    algbw = size_bytes / seconds / 1e9
    return algbw, algbw * BUS_FACTOR[op](ranks)


def _time_op(op: str, numel: int, iterations: int, device: Any) -> float:
    import torch
    import torch.distributed as dist

    n = dist.get_world_size()
    full = torch.ones(numel, dtype=torch.float32, device=device)
    part = torch.ones(numel // n, dtype=torch.float32, device=device)
    calls = {"all_reduce": lambda: dist.all_reduce(full),
             "all_gather": lambda: dist.all_gather_into_tensor(full, part),
             "reduce_scatter": lambda: dist.reduce_scatter_tensor(part, full)}
    for _ in range(3):  # warm-up: connections and buffers are set up on the first calls
        calls[op]()
    dist.barrier()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    for _ in range(iterations):
        calls[op]()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = (time.perf_counter() - start) / iterations
    slowest = torch.tensor([seconds], dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)  # the collective is as fast as its slowest rank
    return float(slowest.item())


def main(argv: list[str] | None = None) -> None:
    """One rank of the benchmark (started by torch.distributed.run); rank 0 writes the results to --out."""
    import torch
    import torch.distributed as dist

    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", required=True)
    parser.add_argument("--size-mb", type=float, required=True)
    parser.add_argument("--iterations", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    ns = parser.parse_args(argv)
    dist.init_process_group(ns.backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device(f"cuda:{local}") if ns.backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    numel = max(n, int(ns.size_mb * 2**20 / 4) // n * n)  # float32, divisible by the ranks
    rows = []
    for op in OPS:
        seconds = _time_op(op, numel, ns.iterations, device)
        algbw, busbw = bus_bandwidth(op, numel * 4, seconds, n)
        rows.append({"op": op, "size_bytes": numel * 4, "seconds": seconds, "algbw_gb_s": algbw, "busbw_gb_s": busbw})
    if rank == 0:
        device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
        atomic_write_text(ns.out, json.dumps({"ranks": n, "backend": ns.backend, "device": device_name,
                                              "results": rows}) + "\n", what="collective results")
    dist.destroy_process_group()


def launch(*, nproc: int, backend: str, size_mb: float, iterations: int) -> dict[str, Any]:
    """Run the benchmark on this node with torchrun's standalone rendezvous; the rank-0 results."""
    try:
        import torch.distributed.run  # noqa: F401 - only to say clearly when torch is missing
    except ImportError:
        raise ProbeUnavailable("bench collective needs torch (pip install torch)") from None
    with tempfile.TemporaryDirectory(prefix="gpuwise-collective-") as folder:
        out = Path(folder) / "results.json"
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
                   "-m", "gpuwise.probe.collective", "--backend", backend, "--size-mb", str(size_mb),
                   "--iterations", str(iterations), "--out", str(out)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise ConfigError(f"bench collective did not finish in {LAUNCH_TIMEOUT_S} s; try a smaller --size-mb "
                              "or fewer --iterations") from None
        if done.returncode != 0 or not out.is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise ProbeUnavailable(f"bench collective: the launcher exited {done.returncode}: {tail[0][:300]}")
        data = parse_json(read_text(out, what="collective results", max_bytes=1_000_000), origin=str(out))
    if not isinstance(data, dict):
        raise ProbeUnavailable("bench collective: rank 0 wrote no results")
    return data


if __name__ == "__main__":
    main()
