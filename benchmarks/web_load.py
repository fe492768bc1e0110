"""/api/estimate and /api/recommend under 50 concurrent clients on loopback: p50/p99 latency and requests/s.

Starts `gpuwise serve` on a free port, runs a bounded number of requests per client, stops the server.
Run: python benchmarks/web_load.py [--clients 50] [--requests 20]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

BODIES = {
    "/api/estimate": {"model": "llama-3.1-8b", "gpu": "rtx-4090", "options": {"method": "qlora", "seq": 2048}},
    "/api/recommend": {"workloads": [{"model": "qwen2-7b", "options": {"method": "qlora"}}], "top": 5},
}


def _post(url: str, body: dict[str, object]) -> float:
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(request, timeout=60) as response:
        response.read()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=20, help="requests per client per endpoint")
    ns = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "gpuwise.cli.main", "serve", "--port", str(port)])
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                with urllib.request.urlopen(base + "/api/models", timeout=1):
                    break
            except OSError:
                time.sleep(0.2)
        for path, body in BODIES.items():
            _post(base + path, body)  # warm-up
            start = time.perf_counter()
            with ThreadPoolExecutor(ns.clients) as pool:
                latencies = list(pool.map(_post, [base + path] * (ns.clients * ns.requests),
                                          [body] * (ns.clients * ns.requests)))
            wall = time.perf_counter() - start
            latencies.sort()
            p99 = latencies[int(0.99 * (len(latencies) - 1))]
            print(f"{path}: {len(latencies)} requests from {ns.clients} clients in {wall:.1f} s = "
                  f"{len(latencies) / wall:,.0f} req/s; p50 {statistics.median(latencies) * 1000:,.0f} ms, "
                  f"p99 {p99 * 1000:,.0f} ms")
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
