"""Burn-in of a new or used card: sustained GEMM load plus a memory pattern test, watched every second.

Stops by itself at the shutdown temperature minus 5 C, on new uncorrected ECC errors or on a wrong result.
The verdict never calls a skipped or interrupted test a pass. Clock stability compares the median SM clock of
the last third with the first minute (WARN below 0.9x, FAIL below 0.8x; diagnostics.md sec. 5.2).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpuwise.errors import ConfigError, ProbeUnavailable
from gpuwise.probe.checks import FAILING_REASONS
from gpuwise.safe_io import atomic_write_text

Status = Literal["PASS", "WARN", "FAIL"]
STOP_MARGIN_C = 5.0


@dataclass(frozen=True)
class Sample:
    t_s: float
    sm_clock_mhz: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    reasons: tuple[str, ...] = ()
    ecc_uncorrected: int | None = None
    wrong_results: int = 0
    memory_errors: int = 0


@dataclass(frozen=True)
class BurnInResult:
    status: Status
    reasons: tuple[str, ...]
    completed: bool
    clock_ratio: float | None
    samples: tuple[Sample, ...] = field(default_factory=tuple)
    host: str | None = None  # the node and the start: a folder of results is a fleet's history
    taken_at: str | None = None


def _median(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def should_stop(sample: Sample, *, shutdown_c: float | None, start_ecc: int | None) -> str | None:
    """A reason to stop now, or None."""
    if shutdown_c is not None and sample.temperature_c is not None and \
            sample.temperature_c >= shutdown_c - STOP_MARGIN_C:
        return f"temperature {sample.temperature_c:.0f} C reached the stop point ({shutdown_c - STOP_MARGIN_C:.0f} C)"
    if start_ecc is not None and sample.ecc_uncorrected is not None and sample.ecc_uncorrected > start_ecc:
        return f"{sample.ecc_uncorrected - start_ecc} new uncorrected ECC error(s)"
    if sample.wrong_results:
        return f"{sample.wrong_results} GEMM result(s) differed from the reference"
    if sample.memory_errors:
        return f"{sample.memory_errors} memory pattern mismatch(es)"
    return None


def judge(samples: Sequence[Sample], *, planned_s: float, stop_reason: str | None) -> BurnInResult:
    """The verdict of a finished (or stopped) burn-in from its samples."""
    reasons: list[str] = []
    status: Status = "PASS"
    completed = bool(samples) and samples[-1].t_s >= planned_s * 0.98 and stop_reason is None
    if stop_reason:
        reasons.append(f"stopped: {stop_reason}")
        status = "FAIL"
    elif not completed:
        reasons.append("the test did not run for its planned time: not a pass")
        status = "FAIL"
    throttled = sum(1 for s in samples if set(s.reasons) & set(FAILING_REASONS))
    if samples and throttled / len(samples) > 0.01:
        reasons.append(f"thermal/HW slowdown active in {throttled} of {len(samples)} samples")
        status = "FAIL"
    first = _median([s.sm_clock_mhz for s in samples if s.t_s <= 60.0])
    last = _median([s.sm_clock_mhz for s in samples[len(samples) * 2 // 3:]])
    ratio = last / first if first and last else None
    if ratio is not None and ratio < 0.8:
        reasons.append(f"sustained SM clock fell to {ratio:.0%} of the first minute")
        status = "FAIL"
    elif ratio is not None and ratio < 0.9:
        reasons.append(f"sustained SM clock fell to {ratio:.0%} of the first minute")
        status = "WARN" if status == "PASS" else status
    if status == "PASS":
        reasons.append("sustained load, stable clocks, no errors")
    return BurnInResult(status, tuple(reasons), completed, ratio, tuple(samples))


def run(*, seconds: float, workload: Callable[[], tuple[int, int]], sampler: Callable[[], Sample],
        shutdown_c: float | None, clock: Callable[[], float] = time.monotonic) -> BurnInResult:
    """Alternate workload slices and one-second samples until the time is up or a stop condition hits.

    ``workload`` runs about a second of load and returns (wrong GEMM results, memory mismatches).
    """
    start = clock()
    samples: list[Sample] = []
    start_ecc: int | None = None
    stop_reason = None
    while clock() - start < seconds:
        wrong, mismatches = workload()
        reading = sampler()
        sample = Sample(clock() - start, reading.sm_clock_mhz, reading.temperature_c, reading.power_w,
                        reading.reasons, reading.ecc_uncorrected, wrong, mismatches)
        if start_ecc is None:
            start_ecc = sample.ecc_uncorrected
        samples.append(sample)
        stop_reason = should_stop(sample, shutdown_c=shutdown_c, start_ecc=start_ecc)
        if stop_reason:
            break
    return judge(samples, planned_s=seconds, stop_reason=stop_reason)


def torch_workload(device: str, memory_fraction: float = 0.8) -> Callable[[], tuple[int, int]]:
    """GEMM stress with a bitwise reference check, and a write/read pattern over most of the free memory."""
    import torch

    a = torch.randn(8192, 8192, device=device, dtype=torch.float16)
    b = torch.randn(8192, 8192, device=device, dtype=torch.float16)
    reference = a @ b
    free, _ = torch.cuda.mem_get_info(device)
    chunk = 256 * 2**20
    blocks = [torch.empty(chunk // 4, dtype=torch.int32, device=device)
              for _ in range(max(1, int(free * memory_fraction) // chunk - 2))]
    state = {"round": 0}

    def step() -> tuple[int, int]:
        wrong = 0
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            out = a @ b
            torch.cuda.synchronize(device)
        if not torch.equal(out, reference):
            wrong += 1
        state["round"] += 1
        pattern = state["round"] * 2654435761 % 2**31
        mismatches = 0
        for block in blocks:
            block.fill_(pattern)
        for block in blocks:
            mismatches += int((block != pattern).sum().item())
        return wrong, mismatches

    return step


def nvml_sampler(index: int) -> tuple[Callable[[], Sample], float | None, Callable[[], None]]:
    """(sample function, shutdown temperature, close function) reading NVML for GPU ``index``."""
    import pynvml as nvml

    from gpuwise.probe.backend import REASON_BITS, query

    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(index)
    const: Callable[[str], Any] = lambda name: getattr(nvml, name, 0)  # noqa: E731
    shutdown = query(nvml, "nvmlDeviceGetTemperatureThreshold", h, const("NVML_TEMPERATURE_THRESHOLD_SHUTDOWN"))

    def sample() -> Sample:
        mask = query(nvml, "nvmlDeviceGetCurrentClocksEventReasons", h) or 0
        power = query(nvml, "nvmlDeviceGetPowerUsage", h)
        return Sample(
            t_s=0.0, sm_clock_mhz=query(nvml, "nvmlDeviceGetClockInfo", h, const("NVML_CLOCK_SM")),
            temperature_c=query(nvml, "nvmlDeviceGetTemperature", h, const("NVML_TEMPERATURE_GPU")),
            power_w=None if power is None else power / 1000.0,
            reasons=tuple(name for bit, name in REASON_BITS.items() if mask & bit),
            ecc_uncorrected=query(nvml, "nvmlDeviceGetTotalEccErrors", h,
                                  const("NVML_MEMORY_ERROR_TYPE_UNCORRECTED"), const("NVML_VOLATILE_ECC")),
        )

    return sample, shutdown, nvml.nvmlShutdown


def on_gpu(*, seconds: float, device: int) -> BurnInResult:
    """Burn in CUDA device ``device`` for ``seconds`` (torch for the load, NVML for the telemetry)."""
    try:
        import torch
    except ImportError:
        raise ProbeUnavailable("burn-in needs PyTorch with CUDA") from None
    if not torch.cuda.is_available():
        raise ProbeUnavailable("torch sees no CUDA device: run `gpuwise doctor` to find out why")
    if device >= torch.cuda.device_count():
        raise ConfigError(f"--device {device}: torch sees {torch.cuda.device_count()} CUDA device(s)")
    try:
        sampler, shutdown, close = nvml_sampler(device)
    except ImportError:
        raise ProbeUnavailable("burn-in needs nvidia-ml-py for telemetry: pip install 'gpuwise[probe]'") from None
    try:
        return run(seconds=seconds, workload=torch_workload(f"cuda:{device}"), sampler=sampler, shutdown_c=shutdown)
    finally:
        close()


def timeline_csv(result: BurnInResult) -> str:
    rows = ["t_s,sm_clock_mhz,temperature_c,power_w,reasons,ecc_uncorrected,wrong_results,memory_errors"]
    rows += [f"{s.t_s:.1f},{s.sm_clock_mhz},{s.temperature_c},{s.power_w},{'|'.join(s.reasons)},"
             f"{s.ecc_uncorrected},{s.wrong_results},{s.memory_errors}" for s in result.samples]
    return "\n".join(rows) + "\n"


def write_timeline(result: BurnInResult, path: Path) -> Path:
    """CSV of the samples; for an .html path, an interactive chart (plotly, bundled: no CDN); returns what was
    written (the .csv beside it when plotly is not installed). Written atomically."""
    if path.suffix != ".html":
        atomic_write_text(path, timeline_csv(result), what="timeline")
        return path
    try:
        import plotly.graph_objects as go
    except ImportError:
        atomic_write_text(path.with_suffix(".csv"), timeline_csv(result), what="timeline")
        return path.with_suffix(".csv")
    t = [s.t_s for s in result.samples]
    figure = go.Figure()
    for name, values in (("SM clock MHz", [s.sm_clock_mhz for s in result.samples]),
                         ("temperature C", [s.temperature_c for s in result.samples]),
                         ("power W", [s.power_w for s in result.samples])):
        figure.add_trace(go.Scatter(x=t, y=values, name=name))
    figure.update_layout(title=f"gpuwise burn-in: {result.status}", xaxis_title="seconds")
    atomic_write_text(path, figure.to_html(include_plotlyjs=True), what="timeline")
    return path
