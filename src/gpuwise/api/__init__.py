"""The public functions of gpuwise: what the CLI, the web app and Python users call.

Every function takes keyword-only options and returns plain dataclasses or pydantic records; none prints. Job
options are the flags of the typed job (``method="qlora"``, ``seq=4096``), validated once by the same models the
CLI and the web app build. ``catalog_files`` adds or patches catalog records from the user's own YAML files.
"""

from __future__ import annotations

from gpuwise.api.catalog import compare_gpus, find_gpu, list_gpus, load_catalog
from gpuwise.api.diagnose import Diagnosis, diagnose
from gpuwise.api.fleet import FleetReport, fleet_report
from gpuwise.api.hardware import bench, bench_collective, burn_in, doctor, exporter_reader, monitor
from gpuwise.api.hpc import hpc_apps, hpc_estimate
from gpuwise.api.images import image_estimate, image_fit, list_pipelines, pipeline
from gpuwise.api.jobs import (
    estimate,
    exact_params,
    fit,
    job,
    layer_split,
    list_models,
    model,
    model_from_config,
    recommend,
    scale,
    serve_sim,
    tco,
    trace,
)

__all__ = [
    "Diagnosis",
    "FleetReport",
    "bench",
    "bench_collective",
    "burn_in",
    "compare_gpus",
    "diagnose",
    "doctor",
    "estimate",
    "exact_params",
    "exporter_reader",
    "find_gpu",
    "fit",
    "fleet_report",
    "hpc_apps",
    "hpc_estimate",
    "image_estimate",
    "image_fit",
    "job",
    "layer_split",
    "list_gpus",
    "list_models",
    "list_pipelines",
    "load_catalog",
    "model",
    "model_from_config",
    "monitor",
    "pipeline",
    "recommend",
    "scale",
    "serve_sim",
    "tco",
    "trace",
]
