"""A job resolved once: everything the estimators need to know about how the job runs, decided in one place.

``resolve(model, job, gpu, calibration)`` turns the user's flags into a frozen plan, for every kind of job:

- a model's training or inference (``models.py``: :class:`TrainPlan`, :class:`InferPlan`) -- the dtype of each
  tensor class and of the matmuls, the trainable parameters, the parallel layout and the sharding runtime with its
  ZeRO stage, micro-batches and accumulation, the engine's batch and token limits on this card, the format of each
  weight class (the checkpoint's, unless --quant says otherwise) and of the KV cache, and the user's calibration of
  the card with the runtime's measured host cost;
- an image pipeline (``image.py``: :class:`ImagePlan`) -- the pipeline's defaults, the runtime and its offload mode;
- a scientific application (``hpc.py``: :class:`HpcPlan`) -- its profile and reference problem.

Each plan records every choice it took from a default, with where it came from (a flag, a framework's recipe, an
engine's code, the checkpoint, gpuwise). The memory, speed, serving and cost estimators read the plan and re-derive
none of it (vLLM gathers its model, cache, parallel and scheduler configs once, in its engine arguments, the same way).
"""

from __future__ import annotations

from typing import overload

from gpuwise.catalog import GPU
from gpuwise.estimate.calibration import Calibration
from gpuwise.estimate.plan.hpc import HpcPlan, hpc_plan
from gpuwise.estimate.plan.image import ImagePlan, image_plan
from gpuwise.estimate.plan.models import (
    UNBOUNDED_SEQUENCES,
    Choice,
    InferPlan,
    Plan,
    TrainPlan,
    adapted_linears,
    adapter_params,
    data_parallel_layout,
    model_plan,
    peft_targets_experts,
    require_tp,
    require_training_knobs,
    tp_divides,
    with_framework,
)
from gpuwise.workload.diffusion.pipeline import Pipeline
from gpuwise.workload.jobs.hpc import HpcJob
from gpuwise.workload.jobs.image import ImageJob
from gpuwise.workload.jobs.job import Job
from gpuwise.workload.model.architecture import Architecture

__all__ = ["UNBOUNDED_SEQUENCES", "Choice", "HpcPlan", "ImagePlan", "InferPlan", "Plan", "TrainPlan",
           "adapted_linears", "adapter_params", "data_parallel_layout",
           "peft_targets_experts", "require_tp", "require_training_knobs",
           "resolve", "tp_divides", "with_framework"]


@overload
def resolve(model: Architecture, job: Job, gpu: GPU, calibration: Calibration | None = None) -> TrainPlan | InferPlan:
    ...


@overload
def resolve(model: Pipeline, job: ImageJob, gpu: GPU, calibration: Calibration | None = None) -> ImagePlan:
    ...


@overload
def resolve(model: None, job: HpcJob, gpu: GPU, calibration: Calibration | None = None) -> HpcPlan:
    ...


def resolve(model: Architecture | Pipeline | None, job: Job | ImageJob | HpcJob, gpu: GPU,
            calibration: Calibration | None = None) -> TrainPlan | InferPlan | ImagePlan | HpcPlan:
    """``job`` on ``gpu`` resolved once: the one place a job's defaults are settled. ``model`` is the architecture
    (a model's training or inference), the pipeline (an image job), or None (an HPC job names its application);
    ``calibration``: the user's measured rates for the card (model jobs)."""
    if isinstance(job, HpcJob):
        return hpc_plan(job, gpu)
    if isinstance(job, ImageJob):
        assert isinstance(model, Pipeline)
        return image_plan(model, job, gpu)
    assert isinstance(model, Architecture)
    return model_plan(model, job, gpu, calibration)
