"""Live view of every GPU with plain hints: what a utilisation, memory or throttle pattern usually means."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

from gpuwise.errors import ProbeUnavailable
from gpuwise.probe.checks import FAILING_REASONS


@dataclass(frozen=True)
class Reading:
    index: int
    name: str
    utilization_pct: float | None
    memory_used_mib: float | None
    memory_total_mib: float | None
    power_w: float | None
    power_limit_w: float | None
    temperature_c: float | None
    sm_clock_mhz: float | None
    reasons: tuple[str, ...] = ()


def hints(reading: Reading, *, cpu_busy_fraction: float | None) -> list[str]:
    """Rules of thumb from the seeds' troubleshooting, each with the first thing to try."""
    out = []
    if reading.utilization_pct is not None and reading.utilization_pct < 50:
        if cpu_busy_fraction is not None and cpu_busy_fraction > 0.8:
            out.append("low GPU utilisation with a busy CPU: the input pipeline is the bottleneck (more DataLoader "
                       "workers, pin_memory=True, pre-tokenised data)")
        elif reading.memory_used_mib and reading.memory_used_mib > 1024:
            out.append("low GPU utilisation: small batches, host-device copies or synchronisation in the loop")
    if reading.memory_used_mib and reading.memory_total_mib and \
            reading.memory_used_mib / reading.memory_total_mib > 0.95:
        out.append("memory nearly full: one larger batch or sequence away from an out-of-memory error")
    if set(reading.reasons) & {"sw_thermal", "hw_thermal"}:
        out.append("thermal throttling: clocks are cut to cool the card (airflow, fan curve, dust)")
    elif set(reading.reasons) & set(FAILING_REASONS):
        out.append("hardware slowdown or power brake: check power cables and the PSU")
    return out


def cpu_busy_fraction() -> float | None:
    """1-minute load average over the core count (Unix); None where it is not available."""
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except (OSError, AttributeError):
        return None


def read_all() -> list[Reading]:
    """One reading of every GPU through NVML (the doctor's query door)."""
    import pynvml as nvml

    from gpuwise.probe.backend import REASON_BITS, query

    readings = []
    for i in range(nvml.nvmlDeviceGetCount()):
        h = nvml.nvmlDeviceGetHandleByIndex(i)
        util = query(nvml, "nvmlDeviceGetUtilizationRates", h)
        memory = query(nvml, "nvmlDeviceGetMemoryInfo", h)
        power = query(nvml, "nvmlDeviceGetPowerUsage", h)
        limit = query(nvml, "nvmlDeviceGetEnforcedPowerLimit", h)
        mask = query(nvml, "nvmlDeviceGetCurrentClocksEventReasons", h) or 0
        name = query(nvml, "nvmlDeviceGetName", h)
        readings.append(Reading(
            index=i, name=name.decode() if isinstance(name, bytes) else str(name),
            utilization_pct=getattr(util, "gpu", None), memory_used_mib=memory.used / 2**20 if memory else None,
            memory_total_mib=memory.total / 2**20 if memory else None,
            power_w=None if power is None else power / 1000, power_limit_w=None if limit is None else limit / 1000,
            temperature_c=query(nvml, "nvmlDeviceGetTemperature", h, getattr(nvml, "NVML_TEMPERATURE_GPU", 0)),
            sm_clock_mhz=query(nvml, "nvmlDeviceGetClockInfo", h, getattr(nvml, "NVML_CLOCK_SM", 0)),
            reasons=tuple(n for bit, n in REASON_BITS.items() if mask & bit and n != "gpu_idle"),
        ))
    return readings


@dataclass(frozen=True)
class Round:
    """One reading of every GPU, with the host's CPU load and the hints for each GPU."""

    time_s: float
    cpu_busy_fraction: float | None
    readings: tuple[Reading, ...]
    hints: tuple[tuple[str, ...], ...]


def rounds(*, interval_s: float, count: int) -> Iterator[Round]:
    """Readings every ``interval_s`` seconds, ``count`` times (0: until the caller stops); NVML is opened for the
    duration and closed when the iteration ends."""
    try:
        import pynvml as nvml
    except ImportError:
        raise ProbeUnavailable("monitor needs nvidia-ml-py: pip install 'gpuwise[probe]'") from None
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        raise ProbeUnavailable(f"no NVIDIA driver ({exc}): install it so that nvidia-smi works") from None
    try:
        shown = 0
        while count == 0 or shown < count:
            if shown:
                time.sleep(interval_s)
            busy = cpu_busy_fraction()
            readings = tuple(read_all())
            yield Round(time.time(), busy, readings,
                        tuple(tuple(hints(r, cpu_busy_fraction=busy)) for r in readings))
            shown += 1
    finally:
        nvml.nvmlShutdown()
