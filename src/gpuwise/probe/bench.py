"""Micro-benchmarks of the real card (PyTorch, optional): GEMM per dtype, device memory, host links, peers.

Method (research notes, diagnostics.md sec. 6): warm-up, then the median of timed repeats (CUDA events on a GPU,
perf_counter elsewhere); GEMM FLOPs 2mnk on square matrices large enough to saturate; device bandwidth from a copy
(read + write: 2N bytes) and a triad a = b + s*c (3N bytes) on buffers far above the L2 cache; host transfers with
pinned and pageable buffers. Every result is compared with the catalog's dense peak as a percentage and a verdict.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpuwise.errors import ConfigError, ProbeUnavailable
from gpuwise.safe_io import atomic_write_text, parse_json, read_text

Verdict = Literal["PASS", "WARN", "FAIL", "N/A"]


# ---- the arithmetic, testable anywhere ---------------------------------------------------------------------
def gemm_tflops(m: int, n: int, k: int, seconds: float) -> float:
    """2mnk FLOPs (one multiply and one add per term) over the time, in TFLOP/s."""
    return 2.0 * m * n * k / seconds / 1e12


def copy_gb_s(n_bytes: float, seconds: float) -> float:
    """A device-to-device copy reads and writes every byte: 2N over the time, in GB/s (1e9 bytes)."""
    return 2.0 * n_bytes / seconds / 1e9


def triad_gb_s(n_bytes: float, seconds: float) -> float:
    """a = b + s*c reads b and c and writes a: 3N bytes (STREAM/BabelStream convention)."""
    return 3.0 * n_bytes / seconds / 1e9


def transfer_gb_s(n_bytes: float, seconds: float) -> float:
    return n_bytes / seconds / 1e9


def verdict(measured: float | None, reference: float | None, *, pass_at: float, fail_below: float) -> Verdict:
    """PASS at >= pass_at x reference, FAIL below fail_below x reference, WARN between (diagnostics.md sec. 5.2)."""
    if measured is None or not reference:
        return "N/A"
    ratio = measured / reference
    if ratio >= pass_at:
        return "PASS"
    return "FAIL" if ratio < fail_below else "WARN"


@dataclass(frozen=True)
class Result:
    metric: str  # gemm_bf16, copy, triad, h2d_pinned ...
    value: float
    unit: str
    reference: float | None
    verdict: Verdict
    settings: str

    @property
    def percent(self) -> float | None:
        return None if not self.reference else 100.0 * self.value / self.reference


# ---- the measurements (torch) ------------------------------------------------------------------------------
def _timer(torch: Any, device: str) -> Callable[[Callable[[], object], int], float]:
    """Median seconds of ``repeats`` runs of ``fn`` after warm-up, on ``device``."""
    def measure(fn: Callable[[], object], repeats: int) -> float:
        for _ in range(max(2, repeats // 4)):
            fn()
        times = []
        for _ in range(repeats):
            if device.startswith("cuda"):
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                stop.record()
                stop.synchronize()
                times.append(start.elapsed_time(stop) / 1e3)
            else:
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
        return float(statistics.median(times))
    return measure


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise ProbeUnavailable("bench needs PyTorch: install the torch build for your GPU (pytorch.org)") from None
    return torch


_DTYPES = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16", "fp8": "float8_e4m3fn"}


def gemm(dtype: str, *, size: int, device: str, repeats: int) -> float:
    """Achieved TFLOP/s of an n x n x n matmul in ``dtype`` (fp8 through torch._scaled_mm)."""
    torch = _torch()
    measure = _timer(torch, device)
    if dtype not in _DTYPES:
        raise ConfigError(f"unknown dtype {dtype!r}; use one of: {', '.join(_DTYPES)}")
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    if dtype == "fp8":
        a = torch.randn(size, size, device=device).to(torch.float8_e4m3fn)
        b = torch.randn(size, size, device=device).to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device=device)
        seconds = measure(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
                          repeats)
    else:
        kind = getattr(torch, _DTYPES[dtype])
        a = torch.randn(size, size, device=device, dtype=kind)
        b = torch.randn(size, size, device=device, dtype=kind)
        out = torch.empty(size, size, device=device, dtype=kind)
        seconds = measure(lambda: torch.mm(a, b, out=out), repeats)
    return gemm_tflops(size, size, size, seconds)


def device_bandwidth(*, n_bytes: int, device: str, repeats: int) -> tuple[float, float]:
    """(copy GB/s, triad GB/s) on fp32 buffers of ``n_bytes`` each."""
    torch = _torch()
    measure = _timer(torch, device)
    n = n_bytes // 4
    a, b, c = (torch.empty(n, device=device, dtype=torch.float32).uniform_() for _ in range(3))
    copy = measure(lambda: a.copy_(b), repeats)
    triad = measure(lambda: torch.add(b, c, alpha=2.0, out=a), repeats)
    return copy_gb_s(n * 4, copy), triad_gb_s(n * 4, triad)


def host_transfers(*, n_bytes: int, device: str, repeats: int) -> dict[str, float]:
    """Host-to-device and device-to-host GB/s with pinned and pageable host buffers."""
    torch = _torch()
    measure = _timer(torch, device)
    out: dict[str, float] = {}
    gpu_buffer = torch.empty(n_bytes, dtype=torch.uint8, device=device)
    for pinned in (True, False):
        host = torch.empty(n_bytes, dtype=torch.uint8, pin_memory=pinned and device.startswith("cuda"))
        label = "pinned" if pinned else "pageable"

        def upload(h: Any = host) -> object:
            return gpu_buffer.copy_(h, non_blocking=True)

        def download(h: Any = host) -> object:
            return h.copy_(gpu_buffer, non_blocking=True)

        out[f"h2d_{label}"] = transfer_gb_s(n_bytes, measure(upload, repeats))
        out[f"d2h_{label}"] = transfer_gb_s(n_bytes, measure(download, repeats))
    return out


def peer_copy_gb_s(*, n_bytes: int, source: str, target: str, repeats: int) -> float:
    """One-way device-to-device copy between two GPUs (NVLink, PCIe P2P, or through the host when P2P is off)."""
    torch = _torch()
    measure = _timer(torch, source)
    a = torch.empty(n_bytes, dtype=torch.uint8, device=source)
    b = torch.empty(n_bytes, dtype=torch.uint8, device=target)
    return transfer_gb_s(n_bytes, measure(lambda: b.copy_(a, non_blocking=True), repeats))


class CalibrationRecord(BaseModel):
    """What `bench --save` writes and `estimate --calibration` reads: measured rates of one card."""

    model_config = ConfigDict(extra="ignore", frozen=True, allow_inf_nan=False)

    gpu: str = Field(min_length=1, max_length=100, description="catalog id (or the device name, for old records)")
    name: str = Field(max_length=200)
    driver: str | None = Field(default=None, max_length=100)
    torch: str | None = Field(default=None, max_length=100)
    date: str = Field(max_length=40)
    gemm_tflops: dict[Literal["fp32", "tf32", "fp16", "bf16", "fp8", "int8"], Annotated[float, Field(gt=0, le=1e5)]]
    memory_gb_s: float | None = Field(default=None, gt=0, le=1e5)
    host: str | None = Field(default=None, max_length=255, description="the node it was measured on")
    taken_at: str | None = Field(default=None, max_length=40, description="when, ISO 8601 UTC")

    def save(self, path: Path) -> None:
        atomic_write_text(path, json.dumps(self.model_dump(mode="json"), indent=2) + "\n", what="calibration record")


MAX_CALIBRATION_BYTES = 100_000


def load_calibration(path: Path) -> CalibrationRecord:
    data = parse_json(read_text(path, what="calibration", max_bytes=MAX_CALIBRATION_BYTES), origin=str(path))
    try:
        return CalibrationRecord.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(record)"
        raise ConfigError(f"{path}: not a gpuwise calibration record (field {where!r}: {err['msg']}); write one "
                          "with `gpuwise bench --save FILE`") from None


def today() -> str:
    return dt.date.today().isoformat()


# ---- the whole run against the catalog ---------------------------------------------------------------------
GEMM_PASS, GEMM_FAIL = 0.6, 0.45  # of the dense datasheet peak (diagnostics.md sec. 5.2)
MEMORY_PASS, MEMORY_FAIL = 0.75, 0.6
LINK_PASS, LINK_FAIL = 0.75, 0.5


def supported_dtypes(compute_capability: str | None, device: str) -> list[str]:
    """fp32 and tf32 everywhere; fp16; bf16 from sm_80; fp8 from sm_89 (torch._scaled_mm)."""
    if not device.startswith("cuda"):
        return ["fp32", "bf16"]
    major, minor = (int(x) for x in (compute_capability or "0.0").split("."))
    dtypes = ["fp32", "fp16"]
    if (major, minor) >= (8, 0):
        dtypes[1:1] = ["tf32"]
        dtypes.append("bf16")
    if (major, minor) >= (8, 9):
        dtypes.append("fp8")
    return dtypes


def run(card: Any, *, device: str, quick: bool, link_gb_s: float | None) -> list[Result]:
    """Every benchmark this device supports, each against the card's catalog figure (``card`` may be None)."""
    size = 1024 if not device.startswith("cuda") else (4096 if quick else 8192)
    repeats = 5 if quick or not device.startswith("cuda") else 20
    results = []
    cc = getattr(card, "compute_capability", None)
    for dtype in supported_dtypes(cc, device):
        tflops = gemm(dtype, size=size, device=device, repeats=repeats)
        peak = card.peak_flops(dtype) / 1e12 if card is not None and card.peak_flops(dtype) else None
        results.append(Result(f"gemm_{dtype}", tflops, "TFLOPS", peak,
                              verdict(tflops, peak, pass_at=GEMM_PASS, fail_below=GEMM_FAIL),
                              f"{size}x{size}x{size}, median of {repeats}"))
    n_bytes = (64 if not device.startswith("cuda") else (512 if quick else 2048)) * 2**20
    copy, triad = device_bandwidth(n_bytes=n_bytes, device=device, repeats=repeats)
    memory = card.memory_bandwidth_gb_s if card is not None else None
    for name, value in (("copy", copy), ("triad", triad)):
        results.append(Result(f"memory_{name}", value, "GB/s", memory,
                              verdict(value, memory, pass_at=MEMORY_PASS, fail_below=MEMORY_FAIL),
                              f"{n_bytes // 2**20} MiB buffers"))
    if device.startswith("cuda"):
        for name, value in host_transfers(n_bytes=256 * 2**20, device=device, repeats=repeats).items():
            reference = link_gb_s if "pinned" in name else None
            results.append(Result(name, value, "GB/s", reference,
                                  verdict(value, reference, pass_at=LINK_PASS, fail_below=LINK_FAIL)
                                  if reference else "N/A", "256 MiB"))
        torch = _torch()
        if torch.cuda.device_count() > 1:
            other = "cuda:1" if device != "cuda:1" else "cuda:0"
            value = peer_copy_gb_s(n_bytes=256 * 2**20, source=device, target=other, repeats=repeats)
            peer = getattr(card, "scale_up_gb_s", None)
            reference = peer / 2 if peer else link_gb_s  # NVLink totals count both directions
            results.append(Result(f"p2p_{device}_to_{other}", value, "GB/s", reference,
                                  verdict(value, reference, pass_at=LINK_PASS, fail_below=LINK_FAIL)
                                  if reference else "N/A", "256 MiB, one direction"))
    return results


def device_identity(device: str) -> tuple[str, float | None, str | None, str | None]:
    """Device name, memory in MiB (it settles names NVML shares between variants, e.g. H200 SXM/NVL), driver, torch."""
    torch = _torch()
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ProbeUnavailable("torch sees no CUDA device (CPU-only build, no driver, or no GPU): run "
                                   "`gpuwise doctor` to find which")
        if int(device.partition(":")[2] or 0) >= torch.cuda.device_count():
            raise ConfigError(f"--device {device}: torch sees {torch.cuda.device_count()} CUDA device(s)")
        memory_mib = torch.cuda.get_device_properties(device).total_memory / 2**20
        return torch.cuda.get_device_name(device), memory_mib, None, torch.__version__
    return "cpu", None, None, torch.__version__


@dataclass(frozen=True)
class BenchRun:
    """One `gpuwise bench`: the device, its catalog record (if matched) and every measurement."""

    device_name: str
    catalog_id: str | None
    results: tuple[Result, ...]
    record: CalibrationRecord
    host: str | None = None  # the node: a folder of bench results is a fleet's history
    taken_at: str | None = None

    @property
    def exit_code(self) -> int:
        return 1 if any(r.verdict in ("WARN", "FAIL") for r in self.results) else 0


def calibration_record(name: str, card_id: str | None, driver: str | None, torch_version: str | None,
                       results: list[Result], *, host: str | None = None,
                       taken_at: str | None = None) -> CalibrationRecord:
    rates: dict[str, float] = {r.metric.removeprefix("gemm_"): r.value for r in results
                               if r.metric.startswith("gemm_") and r.value > 0}
    return CalibrationRecord.model_validate({"gpu": card_id or name, "name": name, "driver": driver,
                                             "torch": torch_version, "date": today(), "gemm_tflops": rates,
                                             "memory_gb_s": next((r.value for r in results
                                                                  if r.metric == "memory_copy"), None),
                                             "host": host, "taken_at": taken_at})
