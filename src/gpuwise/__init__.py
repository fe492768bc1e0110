"""gpuwise: which GPU to buy or rent for your AI work, what it will do, and proof on the real card."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from gpuwise.api import (
    compare_gpus,
    estimate,
    exact_params,
    find_gpu,
    fit,
    list_gpus,
    list_models,
    load_catalog,
    model,
    recommend,
    scale,
    serve_sim,
    tco,
)
from gpuwise.errors import (
    AmbiguousGPU,
    CatalogError,
    ConfigError,
    GpuwiseError,
    NotEstimable,
    ProbeUnavailable,
    UnknownGPU,
    UnknownModel,
)

try:
    __version__ = version("gpuwise")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0+unknown"

__all__ = [
    "AmbiguousGPU",
    "CatalogError",
    "ConfigError",
    "GpuwiseError",
    "NotEstimable",
    "ProbeUnavailable",
    "UnknownGPU",
    "UnknownModel",
    "__version__",
    "compare_gpus",
    "estimate",
    "exact_params",
    "find_gpu",
    "fit",
    "list_gpus",
    "list_models",
    "load_catalog",
    "model",
    "recommend",
    "scale",
    "serve_sim",
    "tco",
]
