"""What the shells (the CLI and the web app) need besides the public functions, to build their flags, forms and
requests from the same typed models the core validates: the job models and their flag groups, the recommend request,
the purchase and usage records of a TCO, the hardware commands' settings and the catalog's vocabularies. Not part of
the Python API (``gpuwise.api.__all__``); an import-linter contract keeps the shells from reaching past this door.
"""

from __future__ import annotations

from gpuwise.catalog import FEATURES, SEGMENTS, VENDORS
from gpuwise.estimate.cost.report import Purchase
from gpuwise.estimate.cost.tco import Usage
from gpuwise.estimate.sharding import Sharding
from gpuwise.probe.settings import (
    BenchSettings,
    BurnInSettings,
    CollectiveSettings,
    DoctorSettings,
    ExporterSettings,
    MonitorSettings,
    ValidateSettings,
)
from gpuwise.recommend.request import Constraints, Request, Workload, load_scenario, parse_request, template_count
from gpuwise.workload.exports import CalibrateSettings
from gpuwise.workload.jobs.hpc import HPC_SHARED, HpcJob, make_hpc_job
from gpuwise.workload.jobs.image import SHARED, ImageJob, make_image_job
from gpuwise.workload.jobs.job import HARDWARE, JOB_MODELS, InferJob, TrainJob
from gpuwise.workload.jobs.load_test import LoadTest
from gpuwise.workload.jobs.parse import job_flag_fields, make_job
from gpuwise.workload.kind import workload_kind
from gpuwise.workload.model.presets import hub_index

__all__ = [
    "FEATURES", "HARDWARE", "HPC_SHARED", "JOB_MODELS", "SEGMENTS", "SHARED", "VENDORS", "BenchSettings",
    "BurnInSettings", "CalibrateSettings", "CollectiveSettings", "Constraints", "DoctorSettings", "ExporterSettings",
    "HpcJob", "ImageJob", "InferJob", "LoadTest", "MonitorSettings", "Purchase", "Request", "Sharding", "TrainJob",
    "Usage", "ValidateSettings", "Workload", "hub_index", "job_flag_fields", "load_scenario", "make_hpc_job",
    "make_image_job", "make_job", "parse_request", "template_count", "workload_kind",
]
