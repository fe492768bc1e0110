"""The public door of gpuwise: what the CLI, the web app and Python users call, and the types they get back.

Every function takes keyword-only options and returns plain dataclasses or pydantic records; none prints. Job
options are the flags of the typed job (``method="qlora"``, ``seq=4096``), validated once by the same models the
CLI and the web app build. ``catalog_files`` adds or patches catalog records from the user's own YAML files.
A server that answers callers other than its user checks what they name with ``check_access`` (an ``AccessPolicy``
allows no path or URL by default) before any of these functions opens it.

``import gpuwise`` loads nothing else: each name is imported the first time it is used (PEP 562), so a command
builds only what it runs. ``gpuwise.__all__`` is this module's ``__all__``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_FROM: dict[str, str] = {
    # functions
    **dict.fromkeys(("AccessDenied", "AccessPolicy", "check_access", "check_arguments"), "gpuwise.api.access"),
    **dict.fromkeys(("compare_gpus", "find_gpu", "list_gpus", "load_catalog", "sync_offers"), "gpuwise.api.catalog"),
    **dict.fromkeys(("Diagnosis", "diagnose"), "gpuwise.api.diagnosis"),
    **dict.fromkeys(("FleetReport", "fleet_report"), "gpuwise.api.fleet"),
    **dict.fromkeys(("bench", "bench_collective", "burn_in", "doctor", "exporter_reader", "monitor"),
                    "gpuwise.api.hardware"),
    **dict.fromkeys(("hpc_apps", "hpc_estimate"), "gpuwise.api.hpc"),
    **dict.fromkeys(("image_estimate", "image_fit", "list_pipelines", "pipeline"), "gpuwise.api.images"),
    **dict.fromkeys(("Validation", "validate"), "gpuwise.api.validation"),
    **dict.fromkeys(("Calibrated", "calibrate"), "gpuwise.api.measured_runs"),
    **dict.fromkeys(("estimate", "exact_params", "fit", "job", "layer_split", "list_models", "model",
                     "model_from_config", "plan", "recommend", "scale", "serve_sim", "splits_by_layers", "tco",
                     "trace", "trace_time", "weights_bytes"),
                    "gpuwise.api.jobs"),
    # jobs, plans and results
    **dict.fromkeys(("InferJob", "Job", "TrainJob"), "gpuwise.workload.jobs.job"),
    "ImageJob": "gpuwise.workload.jobs.image",
    "HpcJob": "gpuwise.workload.jobs.hpc",
    "LoadTest": "gpuwise.workload.jobs.load_test",
    "Architecture": "gpuwise.workload.model.architecture",
    **dict.fromkeys(("InferPlan", "TrainPlan"), "gpuwise.estimate.plan"),
    "Estimate": "gpuwise.estimate.estimate",
    "FitReport": "gpuwise.estimate.fit",
    "MemoryEstimate": "gpuwise.estimate.memory.breakdown",
    "TrainPerf": "gpuwise.estimate.speed.training",
    "InferPerf": "gpuwise.estimate.speed.inference",
    "ScaleRow": "gpuwise.estimate.scaling",
    "ServingReport": "gpuwise.estimate.serving.simulate",
    "LayerSplit": "gpuwise.estimate.serving.layer_split",
    "TcoReport": "gpuwise.estimate.cost.report",
    **dict.fromkeys(("ImageEstimate", "ImageFit"), "gpuwise.estimate.image.pipeline"),
    "HpcEstimate": "gpuwise.estimate.hpc.estimate",
    "Recommendation": "gpuwise.recommend.engine",
    **dict.fromkeys(("GPU", "Catalog"), "gpuwise.catalog"),
    # errors
    **dict.fromkeys(("AmbiguousGPU", "CatalogError", "ConfigError", "GpuwiseError", "InputTooLarge", "NotEstimable",
                     "ProbeUnavailable", "TimeLimitExceeded", "UnknownGPU", "UnknownModel"), "gpuwise.errors"),
}

__all__ = sorted(_FROM)


def __getattr__(name: str) -> Any:
    """Import a public name on first use (PEP 562)."""
    module = _FROM.get(name)
    if module is None:
        raise AttributeError(f"module 'gpuwise.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # what type checkers and IDEs see: the same names, imported eagerly
    from gpuwise.api.access import AccessDenied as AccessDenied
    from gpuwise.api.access import AccessPolicy as AccessPolicy
    from gpuwise.api.access import check_access as check_access
    from gpuwise.api.access import check_arguments as check_arguments
    from gpuwise.api.catalog import compare_gpus as compare_gpus
    from gpuwise.api.catalog import find_gpu as find_gpu
    from gpuwise.api.catalog import list_gpus as list_gpus
    from gpuwise.api.catalog import load_catalog as load_catalog
    from gpuwise.api.catalog import sync_offers as sync_offers
    from gpuwise.api.diagnosis import Diagnosis as Diagnosis
    from gpuwise.api.diagnosis import diagnose as diagnose
    from gpuwise.api.fleet import FleetReport as FleetReport
    from gpuwise.api.fleet import fleet_report as fleet_report
    from gpuwise.api.hardware import bench as bench
    from gpuwise.api.hardware import bench_collective as bench_collective
    from gpuwise.api.hardware import burn_in as burn_in
    from gpuwise.api.hardware import doctor as doctor
    from gpuwise.api.hardware import exporter_reader as exporter_reader
    from gpuwise.api.hardware import monitor as monitor
    from gpuwise.api.hpc import hpc_apps as hpc_apps
    from gpuwise.api.hpc import hpc_estimate as hpc_estimate
    from gpuwise.api.images import image_estimate as image_estimate
    from gpuwise.api.images import image_fit as image_fit
    from gpuwise.api.images import list_pipelines as list_pipelines
    from gpuwise.api.images import pipeline as pipeline
    from gpuwise.api.jobs import estimate as estimate
    from gpuwise.api.jobs import exact_params as exact_params
    from gpuwise.api.jobs import fit as fit
    from gpuwise.api.jobs import job as job
    from gpuwise.api.jobs import layer_split as layer_split
    from gpuwise.api.jobs import list_models as list_models
    from gpuwise.api.jobs import model as model
    from gpuwise.api.jobs import model_from_config as model_from_config
    from gpuwise.api.jobs import plan as plan
    from gpuwise.api.jobs import recommend as recommend
    from gpuwise.api.jobs import scale as scale
    from gpuwise.api.jobs import serve_sim as serve_sim
    from gpuwise.api.jobs import splits_by_layers as splits_by_layers
    from gpuwise.api.jobs import tco as tco
    from gpuwise.api.jobs import trace as trace
    from gpuwise.api.jobs import trace_time as trace_time
    from gpuwise.api.jobs import weights_bytes as weights_bytes
    from gpuwise.api.measured_runs import Calibrated as Calibrated
    from gpuwise.api.measured_runs import calibrate as calibrate
    from gpuwise.api.validation import Validation as Validation
    from gpuwise.api.validation import validate as validate
    from gpuwise.catalog import GPU as GPU
    from gpuwise.catalog import Catalog as Catalog
    from gpuwise.errors import AmbiguousGPU as AmbiguousGPU
    from gpuwise.errors import CatalogError as CatalogError
    from gpuwise.errors import ConfigError as ConfigError
    from gpuwise.errors import GpuwiseError as GpuwiseError
    from gpuwise.errors import InputTooLarge as InputTooLarge
    from gpuwise.errors import NotEstimable as NotEstimable
    from gpuwise.errors import ProbeUnavailable as ProbeUnavailable
    from gpuwise.errors import TimeLimitExceeded as TimeLimitExceeded
    from gpuwise.errors import UnknownGPU as UnknownGPU
    from gpuwise.errors import UnknownModel as UnknownModel
    from gpuwise.estimate.cost.report import TcoReport as TcoReport
    from gpuwise.estimate.estimate import Estimate as Estimate
    from gpuwise.estimate.fit import FitReport as FitReport
    from gpuwise.estimate.hpc.estimate import HpcEstimate as HpcEstimate
    from gpuwise.estimate.image.pipeline import ImageEstimate as ImageEstimate
    from gpuwise.estimate.image.pipeline import ImageFit as ImageFit
    from gpuwise.estimate.memory.breakdown import MemoryEstimate as MemoryEstimate
    from gpuwise.estimate.plan import InferPlan as InferPlan
    from gpuwise.estimate.plan import TrainPlan as TrainPlan
    from gpuwise.estimate.scaling import ScaleRow as ScaleRow
    from gpuwise.estimate.serving.layer_split import LayerSplit as LayerSplit
    from gpuwise.estimate.serving.simulate import ServingReport as ServingReport
    from gpuwise.estimate.speed.inference import InferPerf as InferPerf
    from gpuwise.estimate.speed.training import TrainPerf as TrainPerf
    from gpuwise.recommend.engine import Recommendation as Recommendation
    from gpuwise.workload.jobs.hpc import HpcJob as HpcJob
    from gpuwise.workload.jobs.image import ImageJob as ImageJob
    from gpuwise.workload.jobs.job import InferJob as InferJob
    from gpuwise.workload.jobs.job import Job as Job
    from gpuwise.workload.jobs.job import TrainJob as TrainJob
    from gpuwise.workload.jobs.load_test import LoadTest as LoadTest
    from gpuwise.workload.model.architecture import Architecture as Architecture
