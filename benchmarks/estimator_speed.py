"""How many full estimates (memory + speed) one core computes per second: the recommender needs thousands.

Run: python benchmarks/estimator_speed.py
"""

from __future__ import annotations

import time

from gpuwise.catalog import load_catalog
from gpuwise.estimate.estimate import estimate
from gpuwise.workload.jobs.job import InferJob, TrainJob
from gpuwise.workload.model.resolve import resolve_model


def rate(jobs: list[TrainJob | InferJob], seconds: float = 2.0) -> float:
    catalog = load_catalog(use_user_dir=False)
    gpus = list(catalog.gpus.values())
    arch = resolve_model("llama-3.1-8b")
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for job in jobs:
            for gpu in gpus[:8]:
                estimate(arch, job, gpu, catalog)
                done += 1
    return done / (time.perf_counter() - start)


if __name__ == "__main__":
    train = [TrainJob(method=m, count=c, zero=3 if c > 1 else 0) for m in ("full", "lora", "qlora") for c in (1, 8)]
    infer = [InferJob(batch=b, quant=q) for b in (1, 32) for q in ("bf16", "awq-int4", "fp8")]
    print(f"training estimates: {rate(train):,.0f} per second on one core")
    print(f"inference estimates: {rate(infer):,.0f} per second on one core")
