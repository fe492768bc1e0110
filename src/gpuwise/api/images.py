"""Image-generation pipelines through the public API: which names are pipelines, their estimate and fit.

``gpuwise.api.image_estimate("black-forest-labs/FLUX.1-dev", gpu="rtx-4090", offload="model-cpu", quant="fp8")``
"""

from __future__ import annotations

from gpuwise.api.catalog import CatalogFiles, load_catalog
from gpuwise.errors import UnknownModel
from gpuwise.estimate.image.pipeline import ImageEstimate, ImageFit
from gpuwise.estimate.image.pipeline import image_estimate as _estimate
from gpuwise.estimate.image.pipeline import image_fit as _fit
from gpuwise.workload.diffusion.pipeline import Pipeline, find_pipeline, pipelines
from gpuwise.workload.jobs.image import ImageJob, make_image_job


def pipeline(name: str) -> Pipeline | None:
    """The image pipeline a preset id, alias or hub id names; None for any other model."""
    return find_pipeline(name)


def list_pipelines() -> list[Pipeline]:
    return [pipelines()[k] for k in sorted(pipelines())]


def _resolve(name: str | Pipeline) -> Pipeline:
    if isinstance(name, Pipeline):
        return name
    found = find_pipeline(name)
    if found is None:
        raise UnknownModel(name, suggestions=tuple(sorted(pipelines())))
    return found


def _job(job: ImageJob | None, options: dict[str, object]) -> ImageJob:
    return job if job is not None else make_image_job(**options)


def image_estimate(name: str | Pipeline, *, gpu: str, job: ImageJob | None = None, catalog_files: CatalogFiles = (),
                   **options: object) -> ImageEstimate:
    """Memory and seconds per image of a text-to-image job on one GPU."""
    cat = load_catalog(catalog_files=catalog_files)
    return _estimate(_resolve(name), _job(job, options), cat.gpu(gpu), cat)


def image_fit(name: str | Pipeline, *, gpu: str, job: ImageJob | None = None, catalog_files: CatalogFiles = (),
              **options: object) -> ImageFit:
    """The estimate plus every offload mode and denoiser format that fits this card, fastest first."""
    cat = load_catalog(catalog_files=catalog_files)
    return _fit(_resolve(name), _job(job, options), cat.gpu(gpu), cat)
