"""The public namespace is a promise: pinned here so a change to it is a decision, not an accident."""

from __future__ import annotations

import subprocess
import sys

import gpuwise


def test_all_is_sorted_and_pinned() -> None:
    assert gpuwise.__all__ == sorted(gpuwise.__all__)
    assert set(gpuwise.__all__) == {
        "AmbiguousGPU", "CatalogError", "ConfigError", "GpuwiseError", "InputTooLarge", "NotEstimable",
        "ProbeUnavailable", "TimeLimitExceeded", "UnknownGPU", "UnknownModel", "__version__", "bench", "burn_in",
        "compare_gpus", "diagnose", "doctor", "estimate", "exact_params", "find_gpu", "fit", "job", "list_gpus",
        "list_models", "load_catalog", "model", "model_from_config", "monitor", "recommend", "scale", "serve_sim",
        "tco",
    }


def test_importing_gpuwise_loads_no_ui_or_heavy_package_and_reads_no_data() -> None:
    code = (
        "import sys, gpuwise, gpuwise.catalog.loading as l;"
        "heavy = {'typer', 'rich', 'torch', 'pynvml', 'fastapi', 'transformers'} & set(sys.modules);"
        "assert not heavy, heavy;"
        "assert l.shipped_raw.cache_info().currsize == 0"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_find_gpu_from_python() -> None:
    assert gpuwise.find_gpu("RTX 4090").memory_gb == 24
    assert len(gpuwise.list_gpus(vendor="amd")) >= 5
