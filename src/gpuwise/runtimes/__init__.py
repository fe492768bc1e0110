"""Runtime profiles: one record per inference engine and training framework (what it runs, what it does unless told
otherwise, how it launches work), each fact with its source. The one place a runtime's name is compared.

It sits at the catalog's level, below workload and estimate: the job (workload) validates the formats an engine runs
and fills a framework's defaults, and the estimators read how each runtime takes memory and time.
"""

from __future__ import annotations

from gpuwise.errors import ConfigError
from gpuwise.runtimes.engines import ENGINES, IMAGE_ENGINES
from gpuwise.runtimes.frameworks import FRAMEWORKS
from gpuwise.runtimes.schema import EngineProfile, FrameworkProfile

ENGINE_IDS: tuple[str, ...] = tuple(ENGINES)
IMAGE_ENGINE_IDS: tuple[str, ...] = tuple(IMAGE_ENGINES)
FRAMEWORK_IDS: tuple[str, ...] = tuple(FRAMEWORKS)
DEFAULT_FRAMEWORK = "hf"  # a training job without --framework runs as transformers' Trainer
VALIDATE_ENGINE: EngineProfile = next(p for p in ENGINES.values() if p.validate_runs)
"""The engine an inference job of ``gpuwise validate`` runs on (transformers' generate)."""
VALIDATE_IMAGE_ENGINE: EngineProfile = next(p for p in IMAGE_ENGINES.values() if p.validate_runs)
"""The runtime an image pipeline of ``gpuwise validate`` runs on (diffusers' modules)."""


def engine(engine_id: str) -> EngineProfile:
    """The profile of ``--engine engine_id`` (``diffusers`` or ``comfyui`` for an image pipeline)."""
    found = ENGINES.get(engine_id) or IMAGE_ENGINES.get(engine_id)
    if found is None:
        raise ConfigError(f"--engine {engine_id[:40]!r} is not accepted; use one of: {', '.join(ENGINE_IDS)} "
                          f"(an image pipeline: {', '.join(IMAGE_ENGINE_IDS)})")
    return found


def engine_runs(engine_id: str, quant: str) -> bool:
    """Whether ``--engine engine_id`` runs weights stored as ``quant`` (its profile's weight formats)."""
    formats = engine(engine_id).weight_formats.value
    return formats is None or quant in formats


def framework(framework_id: str | None) -> FrameworkProfile:
    """The profile of ``--framework framework_id`` (transformers' Trainer when None)."""
    found = FRAMEWORKS.get(framework_id or DEFAULT_FRAMEWORK)
    if found is None:
        raise ConfigError(f"--framework {str(framework_id)[:40]!r} is not accepted; use one of: "
                          f"{', '.join(FRAMEWORK_IDS)}")
    return found


__all__ = ["DEFAULT_FRAMEWORK", "ENGINE_IDS", "FRAMEWORK_IDS", "IMAGE_ENGINE_IDS", "VALIDATE_ENGINE",
           "VALIDATE_IMAGE_ENGINE", "EngineProfile", "FrameworkProfile", "engine", "engine_runs", "framework"]
