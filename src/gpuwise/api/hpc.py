"""Scientific computing through the public API: the application profiles and one job's estimate.

``gpuwise.api.hpc_estimate(gpu="rtx-4090", app="gromacs", atoms=250_000, ns=200)``
"""

from __future__ import annotations

from gpuwise.api.catalog import CatalogFiles, load_catalog
from gpuwise.errors import ConfigError
from gpuwise.estimate.hpc.estimate import HpcEstimate
from gpuwise.estimate.hpc.estimate import hpc_estimate as _estimate
from gpuwise.workload.hpc.apps import HpcApp, apps, resolved
from gpuwise.workload.jobs.hpc import HpcJob, make_hpc_job


def hpc_apps() -> list[HpcApp]:
    """The shipped application profiles (hpl, hpcg, gromacs ...), by id."""
    return [apps()[k] for k in sorted(apps())]


def hpc_estimate(*, gpu: str, job: HpcJob | None = None, catalog_files: CatalogFiles = (),
                 **options: object) -> HpcEstimate:
    """Memory, the application's own figure (ns/day, TFLOPS, GFLOPS, s per iteration), time and cost per job of a
    scientific-computing job on ``count`` GPUs of ``gpu``; ``options`` are the job's flags (app, atoms, ns ...)."""
    if job is not None and options:
        raise ConfigError(f"give job= or the job's options ({', '.join(sorted(options))}), not both")
    shaped = resolved(job if job is not None else make_hpc_job(**options))  # the flags first, then the card
    cat = load_catalog(catalog_files=catalog_files)
    return _estimate(shaped, cat.gpu(gpu), cat)
