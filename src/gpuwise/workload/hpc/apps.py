"""Application profiles for scientific computing (`--task hpc --app NAME`), read from ``apps.yaml``.

A profile says what one unit of the application's work costs, as its developers document the algorithm: the
kernels a step runs, each with its precision and its floating-point operations and bytes per *item* (an atom in
one MD step, a mesh cell in one solver iteration, N^3 for an LU factorisation), how memory grows with the system,
and how a run spreads over several GPUs. What a GPU makes of it (the share of peak each kind of kernel reaches, a
step's fixed cost) is measured, not documented: ``estimate/data/hpc_calibration.yaml`` holds it, fitted by
``benchmarks/calibrate_hpc.py`` on published per-GPU runs.

Legend: s = the system size (atoms, cells, N, GB), e = a kernel's exponent (work items = s**e per step).
"""

from __future__ import annotations

import datetime as dt
import functools
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpuwise.catalog.schema import Stack
from gpuwise.errors import ConfigError
from gpuwise.workload.jobs.hpc import APPS, App, HpcJob

Precision = Literal["fp32", "fp64", "fp64-matrix"]
"""fp32 and fp64: the vector (CUDA-core) rates; fp64-matrix: FP64 tensor cores where the chip has them (DGEMM)."""
Size = Literal["atoms", "cells", "matrix_n", "memory_gb"]
Work = Literal["ns", "iterations", "solves"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Reference(_Record):
    url: str = Field(min_length=8)
    title: str = Field(min_length=3)
    table: str | None = None


class Kernel(_Record):
    """One kind of work in a step: its FLOPs and its bytes to and from GPU memory per work item."""

    name: str
    precision: Precision
    flops: float = Field(ge=0, le=1e9, description="floating-point operations per work item")
    bytes: float = Field(ge=0, le=1e9, description="bytes to and from GPU memory per work item")
    exponent: int = Field(default=1, ge=1, le=3, description="work items per step = size ** exponent")
    basis: str = Field(min_length=10, description="how the counts follow from the algorithm, with the source")


class Memory(_Record):
    """GPU memory of the whole problem: ``per_size_bytes`` x size ** ``exponent``, split over the run's GPUs."""

    per_size_bytes: float = Field(gt=0, le=1e12)
    exponent: int = Field(default=1, ge=1, le=2)
    basis: str = Field(min_length=10)


class MultiGpu(_Record):
    """How one run uses several GPUs: not at all (``independent``: extra GPUs run other runs), or in parallel
    (domain decomposition, a distributed matrix) at ``efficiency_per_doubling`` of linear speed-up per doubling."""

    mode: Literal["independent", "parallel"]
    efficiency_per_doubling: float = Field(default=1.0, gt=0, le=1)
    note: str = Field(min_length=10)


class HpcApp(_Record):
    id: App
    name: str
    kind: Literal["md", "dense", "sparse", "cfd", "dft", "custom"]
    unit: Literal["ns/day", "TFLOPS", "GFLOPS", "s/iteration"]
    size: Size
    reference_size: float = Field(gt=0, description="the size a job has when the user gives none")
    work: Work
    reference_work: float = Field(gt=0, description="ns, iterations or solves one run makes by default")
    timestep_fs: float | None = Field(default=None, gt=0, le=10, description="md: the default integration step")
    precision: str = Field(min_length=10, description="the precision mix, as the developers document it")
    fp64_dominant: bool = Field(description="its time is FP64 arithmetic: cards with cut-down FP64 are refused")
    kernels: tuple[Kernel, ...] = Field(default=(), max_length=8)
    host_bytes_per_item: float = Field(default=0, ge=0, le=1e6, description="bytes that cross the host link per "
                                                                           "work item and step (LAMMPS GPU package)")
    memory: Memory | None = None
    multi_gpu: MultiGpu
    stacks: tuple[Stack, ...] = Field(min_length=1, description="GPU software stacks it has a GPU port for")
    stacks_basis: str = Field(min_length=10, description="where the ports are documented")
    ecc: str | None = Field(default=None, description="why its long runs want ECC memory (None: not flagged)")
    caveat: str | None = Field(default=None, description="what the estimate leaves out, said with every estimate")
    sources: tuple[Reference, ...] = Field(min_length=1)
    as_of: dt.date


@functools.cache
def apps() -> dict[str, HpcApp]:
    """The shipped profiles by id (validated once)."""
    text = resources.files("gpuwise.workload.hpc").joinpath("apps.yaml").read_text(encoding="utf-8")
    found: dict[str, HpcApp] = {}
    for record in yaml.safe_load(text)["apps"]:
        try:
            app = HpcApp.model_validate(record)
        except ValidationError as exc:
            raise ConfigError(f"workload/hpc/apps.yaml: {record.get('id', '?')}: {exc.errors()[0]['msg']}") from None
        found[app.id] = app
    missing = set(APPS) - set(found)
    if missing:
        raise ConfigError(f"workload/hpc/apps.yaml has no profile for {', '.join(sorted(missing))}")
    return found


def app_profile(job: HpcJob) -> HpcApp:
    assert job.app is not None  # HpcJob refuses a job without one
    return apps()[job.app]


_SIZE_OF = {"atoms": "--atoms", "cells": "--cells", "matrix_n": "--matrix-n", "memory_gb": "--memory-gb"}
_WORK_OF = {"ns": "--ns", "iterations": "--iterations", "solves": "--solves"}


def check_flags(app: HpcApp, job: HpcJob) -> None:
    """Refuse a size or work flag the application does not take, naming the ones it does."""
    for field, spelled in {**_SIZE_OF, **_WORK_OF}.items():
        if getattr(job, field) is None or field in (app.size, app.work):
            continue
        if field == "memory_gb" and app.id != "custom":
            continue  # HpcJob already refused it
        takes = [_SIZE_OF[app.size], _WORK_OF[app.work]]
        raise ConfigError(f"{spelled} does not apply to --app {app.id}; it takes {' and '.join(takes)}")
    if job.timestep_fs is not None and app.kind != "md":
        raise ConfigError(f"--timestep-fs is a molecular-dynamics step; --app {app.id} is not MD")


def resolved(job: HpcJob) -> HpcJob:
    """The job with the profile's defaults for what the user left out (size, work, time step)."""
    app = app_profile(job)
    check_flags(app, job)
    update: dict[str, object] = {}
    if getattr(job, app.size) is None:
        size = app.reference_size
        update[app.size] = size if app.size == "memory_gb" else int(size)
    if getattr(job, app.work) is None:
        work = app.reference_work
        update[app.work] = work if app.work == "ns" else int(work)
    if app.kind == "md" and job.timestep_fs is None:
        update["timestep_fs"] = app.timestep_fs
    return job.model_copy(update=update)


def size_of(job: HpcJob) -> float:
    """The system size the job names, in the profile's own measure (atoms, cells, N or GB)."""
    value = getattr(job, app_profile(job).size)
    assert value is not None, "resolve the job first"
    return float(value)


def work_of(job: HpcJob) -> float:
    value = getattr(job, app_profile(job).work)
    assert value is not None, "resolve the job first"
    return float(value)
