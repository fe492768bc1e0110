"""Side-by-side comparison of catalog GPUs, with each figure's ratio to the first GPU.

Derived rows (marked ``derived``):
  bf16 TFLOPS per 1,000 USD = bf16_dense_tflops / price_usd * 1000   (price: street, else MSRP)
  bf16 TFLOPS per kW        = bf16_dense_tflops / tdp_w * 1000
  bandwidth per 1,000 USD   = memory_bandwidth_gb_s / price_usd * 1000
Dense BF16 is the figure training runs at (FP32 accumulate); a missing input leaves the cell unknown.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpuwise.catalog.catalog import price_usd
from gpuwise.catalog.schema import GPU
from gpuwise.errors import ConfigError


@dataclass(frozen=True)
class Row:
    """One metric across the compared GPUs; ``ratios`` are value / value of the first GPU."""

    key: str
    label: str
    unit: str
    values: tuple[float | None, ...]
    ratios: tuple[float | None, ...]
    derived: bool = False
    higher_is_better: bool = True


@dataclass(frozen=True)
class Comparison:
    gpus: tuple[GPU, ...]
    rows: tuple[Row, ...]


def _per(numerator: float | None, denominator: float | None, scale: float) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator * scale


Metric = tuple[str, str, str, Callable[[GPU], float | None], bool, bool]
METRICS: tuple[Metric, ...] = (
    # key, label (with unit), unit, value, derived, higher_is_better
    ("memory_gb", "memory GB", "GB", lambda g: g.memory_gb, False, True),
    ("memory_bandwidth_gb_s", "bandwidth GB/s", "GB/s", lambda g: g.memory_bandwidth_gb_s, False, True),
    ("bf16_dense_tflops", "BF16 dense TFLOPS", "TFLOPS", lambda g: g.bf16_dense_tflops, False, True),
    ("fp8_dense_tflops", "FP8 dense TFLOPS", "TFLOPS", lambda g: g.fp8_dense_tflops, False, True),
    ("fp32_tflops", "FP32 TFLOPS", "TFLOPS", lambda g: g.fp32_tflops, False, True),
    ("tdp_w", "TDP W", "W", lambda g: g.tdp_w, False, False),
    ("price_usd", "price USD", "USD", price_usd, False, False),
    ("bf16_tflops_per_kusd", "BF16 TFLOPS per k$", "TFLOPS per k$",
     lambda g: _per(g.bf16_dense_tflops, price_usd(g), 1000.0), True, True),
    ("bf16_tflops_per_kw", "BF16 TFLOPS per kW", "TFLOPS per kW",
     lambda g: _per(g.bf16_dense_tflops, g.tdp_w, 1000.0), True, True),
    ("bandwidth_gb_s_per_kusd", "GB/s per k$", "GB/s per k$",
     lambda g: _per(g.memory_bandwidth_gb_s, price_usd(g), 1000.0), True, True),
)


def compare(gpus: Sequence[GPU]) -> Comparison:
    """Rows of figures for ``gpus`` (at least two, no repeats), ratios against the first."""
    if len(gpus) < 2:
        raise ConfigError(f"compare needs at least 2 GPUs, got {len(gpus)}")
    ids = [g.id for g in gpus]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ConfigError(f"GPU {repeated[0]!r} is named twice; compare distinct GPUs")
    rows = []
    for key, label, unit, value_of, derived, higher in METRICS:
        values = tuple(value_of(g) for g in gpus)
        first = values[0]
        ratios = tuple(None if v is None or not first else v / first for v in values)
        rows.append(Row(key, label, unit, values, ratios, derived, higher))
    return Comparison(tuple(gpus), tuple(rows))
