"""Resolve a job into its plan for tests that call an estimator directly."""

from __future__ import annotations

from gpuwise.catalog import load_catalog
from gpuwise.estimate.plan import InferPlan, TrainPlan, resolve
from gpuwise.workload.jobs.job import InferJob, TrainJob
from gpuwise.workload.model.architecture import Architecture


def train_plan(arch: Architecture, job: TrainJob, gpu: str = "h100-sxm-80gb") -> TrainPlan:
    plan = resolve(arch, job, load_catalog(use_user_dir=False).gpu(gpu))
    assert isinstance(plan, TrainPlan)
    return plan


def infer_plan(arch: Architecture, job: InferJob, gpu: str = "h100-sxm-80gb") -> InferPlan:
    plan = resolve(arch, job, load_catalog(use_user_dir=False).gpu(gpu))
    assert isinstance(plan, InferPlan)
    return plan
