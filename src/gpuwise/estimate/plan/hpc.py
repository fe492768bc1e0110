"""A scientific application's job resolved once: its profile (kernels, memory, multi-GPU mode) and the job with the
profile's reference size, work and time step for what the user left out."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.catalog import GPU
from gpuwise.workload.hpc.apps import HpcApp, app_profile, resolved
from gpuwise.workload.jobs.hpc import HpcJob


@dataclass(frozen=True)
class HpcPlan:
    app: HpcApp
    job: HpcJob  # every size and work field set
    gpu: GPU


def hpc_plan(job: HpcJob, gpu: GPU) -> HpcPlan:
    return HpcPlan(app_profile(job), resolved(job), gpu)
