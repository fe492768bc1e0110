"""What kind of workload a request is -- decided here once for the CLI, the web app and recommend.

    hpc    a scientific application (``--task hpc --app NAME``): a profile, no model
    image  an image-generation pipeline (sdxl, flux.1-dev; workload/diffusion/pipelines): its own job
    model  a language, vision or CNN model by preset id, hub id or config.json
"""

from __future__ import annotations

from typing import Literal

from gpuwise.workload.diffusion.pipeline import find_pipeline

WorkloadKind = Literal["hpc", "image", "model"]


def workload_kind(task: object, model: object) -> WorkloadKind:
    """The kind of a request with ``task`` (a --task value, or None) and ``model`` (a name, or None for an uploaded
    config.json or a scientific application)."""
    if task == "hpc":
        return "hpc"
    if isinstance(model, str) and find_pipeline(model) is not None:
        return "image"
    return "model"
