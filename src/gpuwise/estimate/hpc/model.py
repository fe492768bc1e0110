"""Memory, speed and time per job of a scientific-computing job (`--task hpc --app NAME`) on ``count`` GPUs.

One step (an MD time step, a solver iteration, an LU solve) of one run on one GPU is a roofline over the
profile's kernels (workload/hpc/apps.yaml), at the shares of peak the application reaches as measured
(hpc_rates.calibration):

    step = overhead + sum over kernels of max(FLOPs / (rate x compute_eff), bytes / (bandwidth x memory_eff))
           + host bytes / host link

A run over k GPUs (apps whose runs are parallel) divides the kernels' time by k x efficiency^log2(k); the
per-step overhead stays. ``runs`` independent runs share the GPUs: each takes ``gpus_per_run`` of them, the rest run
side by side, and runs beyond that wait their turn.

Legend: N = system size (atoms, cells, matrix order), k = GPUs per run, dt = MD time step in fs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from gpuwise.catalog import GPU, Catalog
from gpuwise.estimate import constants as C
from gpuwise.estimate.hpc.rates import AppCalibration, flop_rate
from gpuwise.estimate.memory.breakdown import MemoryEstimate
from gpuwise.workload.hpc.apps import HpcApp, Kernel, Precision, size_of, work_of
from gpuwise.workload.jobs.hpc import HpcJob

SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True)
class StepTime:
    """One step of one run: seconds by kernel, the fixed overhead and host traffic, and what bounds it."""

    kernels_s: Mapping[str, float]
    overhead_s: float
    host_s: float
    compute_s: float  # the kernels' time that is arithmetic-bound
    memory_s: float  # ... and bandwidth-bound

    @property
    def seconds(self) -> float:
        return sum(self.kernels_s.values()) + self.overhead_s + self.host_s

    @property
    def bound(self) -> str:
        parts = {"compute": self.compute_s, "memory": self.memory_s, "latency": self.overhead_s,
                 "host link": self.host_s}
        return max(parts, key=lambda k: parts[k])


def kernels_of(app: HpcApp, job: HpcJob) -> tuple[Kernel, ...]:
    """The profile's kernels; for ``custom``, the user's FP64 and FP32 shares of --work-tflop per iteration."""
    if app.id != "custom":
        return app.kernels
    work = (job.work_tflop or 1.0) * 1e12 / (job.memory_gb or 1.0)  # FLOPs per GB of problem: the item is a GB
    f64 = job.fp64_fraction or 0.0
    moved = job.bytes_per_flop or 0.0
    basis = "your description: --work-tflop per iteration, --fp64-fraction, --bytes-per-flop"
    # built from validated flags, so not re-validated (a TFLOP per GB is beyond the profile file's bounds)
    shares: tuple[tuple[str, Precision, float], ...] = (("FP64 work", "fp64", f64), ("FP32 work", "fp32", 1.0 - f64))
    return tuple(Kernel.model_construct(name=name, precision=p, flops=work * share, bytes=work * share * moved,
                                        exponent=1, basis=basis)
                 for name, p, share in shares if share > 0)


def items_of(job: HpcJob, kernel: Kernel) -> float:
    """Work items one step of one run processes for ``kernel``: size ** exponent (GB of problem for custom)."""
    return size_of(job) ** kernel.exponent


def kernel_parts(app: HpcApp, job: HpcJob, gpu: GPU, int_share: float) -> list[tuple[str, float, float]] | None:
    """(kernel, seconds of arithmetic at peak, seconds of traffic at datasheet bandwidth) for one step of one run on
    one GPU; None when the card has no rate for a precision the app needs (no published FP64)."""
    parts = []
    for kernel in kernels_of(app, job):
        rate = flop_rate(gpu, kernel.precision, int_share)
        if rate is None:
            return None
        items = items_of(job, kernel)
        traffic = kernel.bytes * items / gpu.memory_bandwidth_bytes_per_s
        parts.append((kernel.name, kernel.flops * items / rate, traffic))
    return parts


def step_time(app: HpcApp, job: HpcJob, gpu: GPU, cal: AppCalibration, *, gpus_per_run: int = 1,
              host_bytes_per_s: float | None = None) -> StepTime | None:
    """One step of one run over ``gpus_per_run`` GPUs; None when the card has no rate for a precision the app
    needs (no published FP64)."""
    parts = kernel_parts(app, job, gpu, cal.int_share)
    if parts is None:
        return None
    speedup = gpus_per_run * app.multi_gpu.efficiency_per_doubling ** math.log2(gpus_per_run)
    if app.kind == "md":  # the cost per atom grows with the system (caches, the FFT's N log N): measured
        speedup /= (size_of(job) / app.reference_size) ** cal.size_exponent
    kernels: dict[str, float] = {}
    compute = memory = 0.0
    for name, arithmetic_at_peak, traffic_at_peak in parts:
        arithmetic = arithmetic_at_peak / cal.compute_efficiency
        traffic = traffic_at_peak / cal.memory_efficiency
        seconds = max(arithmetic, traffic) / speedup
        kernels[name] = seconds
        compute, memory = (compute + seconds, memory) if arithmetic >= traffic else (compute, memory + seconds)
    host = 0.0
    if app.host_bytes_per_item and host_bytes_per_s:
        host = app.host_bytes_per_item * size_of(job) / gpus_per_run / host_bytes_per_s
    return StepTime(kernels, cal.step_overhead_s, host, compute, memory)


def flops_per_step(app: HpcApp, job: HpcJob) -> float:
    return sum(k.flops * items_of(job, k) for k in kernels_of(app, job))


def steps_per_run(app: HpcApp, job: HpcJob) -> float:
    """Steps one run makes: ns x 1e6 / dt for MD, else the iterations or solves it was given."""
    if app.work == "ns":
        assert job.timestep_fs is not None
        return work_of(job) * 1e6 / job.timestep_fs
    return work_of(job)


def value_of(app: HpcApp, job: HpcJob, step_s: float) -> float:
    """The figure the application itself reports, for one run: ns/day, TFLOPS, GFLOPS or s per iteration."""
    if app.unit == "ns/day":
        assert job.timestep_fs is not None
        return job.timestep_fs * 1e-6 * SECONDS_PER_DAY / step_s
    if app.unit == "TFLOPS":
        return flops_per_step(app, job) / step_s / 1e12
    if app.unit == "GFLOPS":
        return flops_per_step(app, job) / step_s / 1e9
    return step_s


def problem_bytes(app: HpcApp, job: HpcJob) -> float:
    """GPU memory the whole problem of one run needs (before splitting over its GPUs)."""
    if app.id == "custom":
        return (job.memory_gb or 0.0) * 1e9
    assert app.memory is not None
    return app.memory.per_size_bytes * size_of(job) ** app.memory.exponent


def hpc_memory(app: HpcApp, job: HpcJob, gpu: GPU, gpus_per_run: int) -> MemoryEstimate:
    """Per-GPU memory: the run's problem split over its GPUs, plus the CUDA context."""
    share = problem_bytes(app, job) / gpus_per_run
    context = C.CUDA_CONTEXT.value
    basis = app.memory.basis if app.memory is not None else "--memory-gb, as you gave it"
    return MemoryEstimate(breakdown_bytes={"problem": share, "framework_overhead": context},
                          capacity_bytes=gpu.usable_memory_bytes, cuda_context_bytes=context,
                          assumptions=(f"memory: {basis}",))


def gpus_per_run(app: HpcApp, job: HpcJob, gpu: GPU) -> int:
    """GPUs one run takes: 1 for apps that run one simulation per GPU or when there are as many runs as GPUs; else
    the GPUs shared out over the runs, and at least as many as its problem needs to fit."""
    if app.multi_gpu.mode == "independent":
        return 1
    share = max(1, job.count // job.runs)
    room = gpu.usable_memory_bytes - C.CUDA_CONTEXT.value
    needed = math.ceil(problem_bytes(app, job) / room) if room > 0 else job.count
    return min(job.count, max(share, needed))


def host_link_bytes_per_s(gpu: GPU, catalog: Catalog) -> float | None:
    """What the card's own PCIe link achieves (the LAMMPS GPU package copies atoms across it every step)."""
    link = catalog.interconnects.get(gpu.native_link)  # a soc has none: nothing crosses a host link
    return link.achieved_bytes_per_s if link is not None else None
