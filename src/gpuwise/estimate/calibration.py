"""A user's measured figures for one card, as the plan carries them to every estimator.

``gpuwise bench --save`` measures matmul rates and memory bandwidth; ``gpuwise validate --save`` a runtime's host
seconds per dispatched operator; ``gpuwise calibrate --save`` rates read from benchmark exports. ``resolve`` puts the
record on the plan (``plan.calibration``), and the roofline's machine (``roofline.py``) and the runtime's launch
cost read it from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Calibration:
    """Measured figures of one card (from ``gpuwise bench``, or a ``gpuwise validate`` run); any left None falls back
    to the tables."""

    gemm_flops: Mapping[str, float]  # dtype -> achieved FLOP/s
    memory_bytes_per_s: float | None = None
    host_op_s: float | None = None  # an eager runtime's host seconds per dispatched operator, measured
    source: str | None = None  # the record it came from, named in the estimate

    @property
    def replaced(self) -> str:
        """What the record replaced, in words."""
        parts = [f"{dtype} matmuls at {rate / 1e12:,.3g} TFLOP/s" for dtype, rate in self.gemm_flops.items()]
        if self.memory_bytes_per_s:
            parts.append(f"memory at {self.memory_bytes_per_s / 1e9:,.0f} GB/s")
        if self.host_op_s:
            parts.append(f"{self.host_op_s * 1e6:,.1f} us of host time per dispatched operator")
        return ", ".join(parts) or "nothing it could apply"
