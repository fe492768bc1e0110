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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from gpuwise.errors import ConfigError, ProbeUnavailable

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


@dataclass(frozen=True)
class CalibrationRecord:
    """What `bench --save` writes and `estimate --calibration` reads: measured rates of one card."""

    gpu: str
    name: str
    driver: str | None
    torch: str | None
    date: str
    gemm_tflops: dict[str, float]
    memory_gb_s: float | None

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")


def load_calibration(path: Path) -> CalibrationRecord:
    try:
        data = json.loads(path.read_text("utf-8"))
        return CalibrationRecord(**{k: data[k] for k in ("gpu", "name", "driver", "torch", "date", "gemm_tflops",
                                                         "memory_gb_s")})
    except OSError as exc:
        raise ConfigError(f"cannot read calibration {str(path)!r}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a gpuwise calibration record ({type(exc).__name__}: {exc})") from None


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
