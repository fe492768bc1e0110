"""gpuwise: which GPU to buy or rent for your AI work, what it will do, and proof on the real card."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from gpuwise.api import (
    bench,
    burn_in,
    compare_gpus,
    diagnose,
    doctor,
    estimate,
    exact_params,
    find_gpu,
    fit,
    job,
    list_gpus,
    list_models,
    load_catalog,
    model,
    model_from_config,
    monitor,
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
    InputTooLarge,
    NotEstimable,
    ProbeUnavailable,
    TimeLimitExceeded,
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
    "InputTooLarge",
    "NotEstimable",
    "ProbeUnavailable",
    "TimeLimitExceeded",
    "UnknownGPU",
    "UnknownModel",
    "__version__",
    "bench",
    "burn_in",
    "compare_gpus",
    "diagnose",
    "doctor",
    "estimate",
    "exact_params",
    "find_gpu",
    "fit",
    "job",
    "list_gpus",
    "list_models",
    "load_catalog",
    "model",
    "model_from_config",
    "monitor",
    "recommend",
    "scale",
    "serve_sim",
    "tco",
]
