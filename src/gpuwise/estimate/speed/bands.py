"""Honest uncertainty: how far off gpuwise's speed figures were on published measurements, as a band.

The ratios come from ``data/bands.yaml``, written by ``benchmarks/fit.py`` from the out-of-sample errors of each
regime (training, batch-1 decode and prefill, encoder samples, serving TTFT and TPOT, image generation) on the public
corpus: each source's runs predicted with the parameters fitted without that source. A band says: on runs of this
kind the fit never saw, the measured figure lay between ``low_ratio`` and ``high_ratio`` times the estimate (between
the regime's ``percentiles``: the 10th-90th, widened where a publisher's runs err together), and
``coverage_out_of_sample`` says how often a band made without a publisher held that publisher's runs. The band always
holds the estimate itself.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib import resources
from typing import Any

import yaml

TIME_KEYS = frozenset({"step_time_s", "epoch_time_s", "ttft_ms", "tpot_ms", "e2e_latency_ms", "seconds_per_call",
                       "seconds_per_image"})
_INFER_REGIME = {"ttft_ms": "prefill", "samples_per_s": "samples"}
_SERVE_REGIME = {"ttft_ms": "serving_ttft", "tpot_ms": "serving_tpot"}


@functools.lru_cache(maxsize=1)
def _regimes() -> Mapping[str, Mapping[str, Any]]:
    text = (resources.files("gpuwise.estimate") / "data" / "bands.yaml").read_text("utf-8")
    return dict(yaml.safe_load(text)["regimes"])


def regime(task: str, key: str) -> str:
    """train; infer (decode, prefill, samples); serve (serving_ttft, serving_tpot); image."""
    if task in ("train", "image"):
        return task
    if task == "serve":
        return _SERVE_REGIME.get(key, "serving_tpot")
    return _INFER_REGIME.get(key, "decode")


def band_percentiles(task: str, key: str) -> str:
    """The percentile range a regime's band spans, as words: "10th-90th percentile", "3rd-97th percentile", or "their
    full range" (min to max)."""
    ratios = _regimes().get(regime(task, key)) or {}
    low, high = (float(p) for p in ratios.get("percentiles", (0.1, 0.9)))
    if low <= 0.0:
        return "their full range"
    return f"{_ordinal(round(100 * low))}-{_ordinal(round(100 * high))} percentile"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def band(task: str, key: str, value: float) -> tuple[float, float] | None:
    """(low, high) likely range of a predicted figure, or None when the regime has no measured cases."""
    ratios = _regimes().get(regime(task, key))
    if ratios is None:
        return None
    low, high = min(float(ratios["low_ratio"]), 1.0), max(float(ratios["high_ratio"]), 1.0)
    if key in TIME_KEYS:  # ratios are for throughput: a time scales inversely
        return value / high, value / low
    return value * low, value * high
