"""What a card makes of an application's kernels: its FLOP rate in each precision, and the share of peak and the
per-step cost each application reaches on GPUs, as measured (``data/hpc_calibration.yaml``).

FP32 on issue-bound cards (``GPU.fp32_issue_bound``): an NVIDIA SM issues one warp instruction per scheduler and
clock. With 32 FP32 lanes per scheduler (GA10x, AD10x, GH100, GB100, GB20x; RDNA 3 dual issue and CDNA 3 packed
FP32 likewise) the FP32 peak needs an FP32 instruction in every slot, so a kernel issuing r integer, load or
special-function instructions per FP32 one runs at peak / (1 + r). With 16 FP32 lanes per scheduler (V100, T4, A100)
an FP32 instruction takes two clocks and the others fill the idle slots: the peak holds while r <= 1. Molecular
dynamics kernels measure r = 0.7 (benchmarks/calibrate_hpc.py, fitted on OpenMM's runs on 22 GPUs).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from gpuwise.catalog import GPU
from gpuwise.errors import ConfigError
from gpuwise.workload.hpc.apps import HpcApp, Precision

CUT_FP64_RATIO = 1 / 8
"""gpuwise policy: a card whose FP64 rate is below 1/8 of its FP32 rate has cut-down FP64 (GeForce and RTX
workstation cards run it at 1/32-1/64, L4/T4/A10 at 1/32-1/64, B300 at 1/64; A100, H100, MI200/300 at 1/2 or 1/1)."""


@dataclass(frozen=True)
class AppCalibration:
    """The measured behaviour of one application on GPUs (or the application whose measurements it borrows)."""

    compute_efficiency: float  # share of the precision's peak its compute-bound kernels reach
    memory_efficiency: float  # share of datasheet bandwidth its memory-bound kernels reach
    step_overhead_s: float  # launch and synchronisation cost of one step, whatever the size
    int_share: float  # integer / unpaired instructions per FP32 instruction (dual-issue cards)
    size_exponent: float  # MD: cost per atom grows as (atoms / the profile's reference size) ** size_exponent
    basis: str  # what it was fitted on, or whose calibration it borrows
    band: tuple[float, float] | None  # measured / predicted, leave-one-GPU-out (10th, 90th percentile)
    fitted_on: tuple[str, ...] = ()  # the GPUs of the runs it was fitted on


@functools.cache
def _calibration_file() -> Mapping[str, Any]:
    text = (resources.files("gpuwise.estimate") / "data" / "hpc_calibration.yaml").read_text("utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or not isinstance(data.get("apps"), dict):
        raise ConfigError("estimate/data/hpc_calibration.yaml: no 'apps' mapping (run benchmarks/calibrate_hpc.py)")
    return data


def calibration(app: HpcApp, gpu: GPU) -> AppCalibration:
    """The app's calibration for ``gpu``'s software stack: its ROCm port's where one was measured, else the CUDA
    build's; an app with no runs of its own borrows another's (``borrow: <app>``)."""
    entries = _calibration_file()["apps"]
    entry = entries.get(app.id)
    if entry is None:
        raise ConfigError(f"estimate/data/hpc_calibration.yaml has no entry for {app.id}")
    basis = str(entry.get("basis", ""))
    if "borrow" in entry:
        lender = entries[entry["borrow"]]
        entry = {**lender, **{k: v for k, v in entry.items() if k not in ("borrow", "basis")}}
        basis = f"{basis}; {lender.get('basis', '')}"
    port = entry.get(gpu.software.stack) if gpu.software.stack != "cuda" else None
    if isinstance(port, dict):
        entry, basis = {**entry, **port}, str(port.get("basis", basis))
    elif gpu.software.stack != "cuda":
        basis += f"; measured on CUDA builds: no {gpu.software.stack} run of {app.id} was found"
    band = entry.get("band") if not isinstance(port, dict) else None  # a port's runs are on one GPU: no band
    return AppCalibration(
        compute_efficiency=float(entry["compute_efficiency"]), memory_efficiency=float(entry["memory_efficiency"]),
        step_overhead_s=float(entry.get("step_overhead_s", 0.0)), int_share=float(entry.get("int_share", 0.0)),
        size_exponent=float(entry.get("size_exponent", 0.0)), basis=basis,
        band=(float(band[0]), float(band[1])) if band else None,
        fitted_on=tuple(entry.get("fitted_on", ())))


def flop_rate(gpu: GPU, precision: Precision, int_share: float) -> float | None:
    """FLOP/s of ``gpu`` for a kernel in ``precision`` at 100% efficiency; None when the datasheet gives none."""
    if precision == "fp32":
        peak = gpu.fp32_tflops * 1e12
        return peak / (1.0 + int_share) if gpu.fp32_issue_bound else peak
    tflops = gpu.fp64_tflops if precision == "fp64" else (gpu.fp64_tensor_tflops or gpu.fp64_tflops)
    return tflops * 1e12 if tflops else None


def fp64_cut(gpu: GPU) -> bool:
    """FP64 below 1/8 of FP32 (consumer and inference parts), or no FP64 figure at all."""
    best = gpu.fp64_tensor_tflops or gpu.fp64_tflops
    return best is None or best < CUT_FP64_RATIO * gpu.fp32_tflops


def fp64_ratio_text(gpu: GPU) -> str:
    """'1/64 of FP32 (1.29 TFLOPS)', or that the datasheet gives no FP64 rate."""
    best = gpu.fp64_tensor_tflops or gpu.fp64_tflops
    if not best:
        return "no published FP64 rate"
    return f"1/{gpu.fp32_tflops / best:.0f} of FP32 ({best:,.2f} TFLOPS)"


def uses_fp64(app: HpcApp, kernels: tuple[Any, ...]) -> bool:
    return any(k.precision != "fp32" for k in kernels) or app.fp64_dominant
