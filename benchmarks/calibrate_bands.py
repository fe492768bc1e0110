"""Regenerate the uncertainty bands of the speed figures from the measured error distribution.

For each regime (training, decode, prefill, encoder/vision inference) the ratios measured / predicted over the
cases of benchmarks/data/public-measurements.yaml are summarised by their 10th and 90th percentiles (min and max
when there are fewer than 10 cases). gpuwise multiplies each predicted figure by them to show "likely low-high".
Throughput ratios apply inverted to times of the same regime.

Run: python benchmarks/calibrate_bands.py   (writes src/gpuwise/estimate/data/bands.yaml)
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).parent
OUT = HERE.parent / "src" / "gpuwise" / "estimate" / "data" / "bands.yaml"


def _accuracy():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("gpuwise_accuracy", HERE / "accuracy.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpuwise_accuracy"] = module
    spec.loader.exec_module(module)
    return module


def regime_of(key: str) -> tuple[str, bool]:
    """(regime, whether the figure is a time) of a contract key."""
    if key.startswith("perf.train."):
        return "train", key.endswith("_s") and not key.endswith("per_s")
    if key.endswith("ttft_ms"):
        return "prefill", True
    if key.endswith("samples_per_s"):
        return "samples", False
    return "decode", key.endswith("_ms")


def main() -> int:
    accuracy = _accuracy()
    cases = accuracy.load_cases("perf")
    rows = accuracy.evaluate("perf")
    ratios: dict[str, list[float]] = {}
    for case, row in zip(cases, rows, strict=True):
        if row.get("predicted"):
            regime, is_time = regime_of(case["key"])
            ratio = row["expected"] / row["predicted"]
            ratios.setdefault(regime, []).append(1 / ratio if is_time else ratio)  # stored as throughput ratios
    bands = {}
    for regime, values in sorted(ratios.items()):
        values.sort()
        if len(values) >= 10:
            low, high = accuracy.percentile_of(values, 0.1), accuracy.percentile_of(values, 0.9)
        else:
            low, high = values[0], values[-1]
        bands[regime] = {"low_ratio": round(low, 4), "high_ratio": round(high, 4), "cases": len(values)}
    document = {
        "generated": dt.date.today().isoformat(),
        "source": "benchmarks/calibrate_bands.py over benchmarks/data/public-measurements.yaml: measured / predicted "
                  "throughput (inverted for times), 10th-90th percentile, min-max under 10 cases",
        "regimes": bands,
    }
    OUT.write_text(yaml.safe_dump(document, sort_keys=False))
    print(yaml.safe_dump(document, sort_keys=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
