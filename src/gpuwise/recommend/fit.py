"""What the recommender says of one GPU type at one count: it fits (with the figures the ranking needs) or why
not."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpuwise.estimate.memory.breakdown import MemoryEstimate

GIB = 2**30


@dataclass(frozen=True)
class Rejection:
    code: str  # memory, feature, stack, power, chassis, budget, slo, deadline, count, vendor, os, offer
    reason: str
    gap: float = 1.0  # how far from acceptable (needed / allowed); the nearest options have the smallest


@dataclass(frozen=True)
class Fit:
    """A GPU type and count that can run every workload, with the figures the ranking needs."""

    per_gpu_bytes: float
    job_hours: float | None = None  # training: one job (the sum over training workloads)
    job_hours_high: float | None = None  # the same at the slow end of the speed band (what deadlines are held to)
    tokens_per_s: float | None = None
    qps_capacity: float | None = None
    p99_ms: float | None = None
    tp: int = 1
    notes: tuple[str, ...] = field(default_factory=tuple)
    seconds_per_image: float | None = None  # an image pipeline (qps_capacity is then images per second)
    output_tokens_per_s: float | None = None  # serving: generated tokens per second at the planned rate (or one user)
    settings: tuple[Mapping[str, object], ...] = ()  # per workload: what recommend chose (format, engine, TP, knobs)
    hpc_value: float | None = None  # a scientific application's own figure for one run (ns/day, TFLOPS ...)
    hpc_unit: str | None = None
    work_per_s: float | None = None  # the same, over the runs side by side, bigger is better (the ranking's speed)
    commands: tuple[str, ...] = ()  # per workload: the gpuwise command that reproduces its figures (where one does)
    workloads: tuple[Fit, ...] = ()  # a scenario's option: each workload's own figures, in the request's order
    closed_form: bool = False  # serving figures from the closed form, not yet simulated as the command simulates
    binding_slo: str | None = None  # serving within several P99 SLOs: the one with the least headroom at capacity
    p99_slo: str = "e2e"  # which P99 p99_ms is: the request's headline SLO (Slos.headline), alike on every option
    e2e_p99_ms: float | None = None  # serving: a request's P99 time in the system at the rate shown (energy's load)
    busy_fraction: float | None = None  # serving, simulated: each replica's busy share at that rate, and of it the
    prefill_share: float | None = None  # prefilling share and its output tokens per second, as its serve-sim
    simulated_tokens_per_s: float | None = None  # command reports them

    @property
    def per_gpu_gb(self) -> float:
        return self.per_gpu_bytes / 1e9


def too_big(memory: MemoryEstimate, tp: int | None = None) -> Rejection:
    at = f" at TP {tp}" if tp else ""
    return Rejection("memory", f"needs {memory.per_gpu_bytes / GIB:,.1f} GiB per GPU{at}, has "
                               f"{memory.capacity_bytes / GIB:,.1f}", memory.per_gpu_bytes / memory.capacity_bytes)


FULL_WARNING_SHARE = 0.90  # gpuwise policy: above this share of a card's memory, fragmentation or a longer batch OOMs


def fullness(per_gpu: float, capacity: float) -> list[str]:
    share = per_gpu / capacity if capacity else 0.0
    if share <= FULL_WARNING_SHARE:
        return []
    return [f"{share:.0%} of the card's memory: little room for the allocator's fragmentation or a longer batch"]
