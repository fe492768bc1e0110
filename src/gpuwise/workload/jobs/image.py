"""What `estimate`, `fit` and `recommend` answer for an image-generation pipeline (SDXL, FLUX.1-dev): images of a
resolution, a batch per call, a step count, diffusers' CPU offload mode and the denoiser's weight format.

``resolution``, ``steps`` (and ``guidance_passes``) are this job's own flags; ``batch``, ``quant`` and ``offload``
share their spelling with the language-model jobs and are validated here against this job's choices.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from gpuwise.flags import Flag, build

IMAGE = "Job: image generation"
_COMMANDS = frozenset({"estimate", "fit", "recommend"})
PipelineOffload = Literal["none", "model-cpu", "sequential"]
DenoiserQuant = Literal["bf16", "fp16", "fp8", "nf4"]
SHARED = ("batch", "quant", "offload")
"""Fields whose flags the language-model jobs define (the same spelling on the command line)."""


class ImageJob(BaseModel):
    """Text-to-image generation with a diffusers pipeline on one GPU."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    task: Literal["infer"] = "infer"
    count: Literal[1] = Field(default=1, description="one GPU: diffusers pipelines do not split over GPUs")
    batch: int = Field(default=1, ge=1, le=256, description="images per pipeline call")
    resolution: Annotated[int | None, Field(ge=256, le=4096, multiple_of=64), Flag(_COMMANDS, IMAGE)] = Field(
        default=None, description="image width and height in pixels, a multiple of 64 (default: the pipeline's, "
                                  "1024 for SDXL and FLUX)")
    steps: Annotated[int | None, Field(ge=1, le=1000), Flag(_COMMANDS, IMAGE)] = Field(
        default=None, description="denoising steps (default: the pipeline's, 50 for SDXL, 28 for FLUX.1-dev)")
    guidance_passes: Annotated[int | None, Field(ge=1, le=2), Flag(_COMMANDS, IMAGE)] = Field(
        default=None, description="denoiser passes per step: 2 with classifier-free guidance (SDXL's default), "
                                  "1 without it or with distilled guidance (FLUX.1-dev)")
    offload: PipelineOffload = Field(
        default="none", description="diffusers enable_model_cpu_offload (model-cpu) or "
                                    "enable_sequential_cpu_offload (sequential)")
    quant: DenoiserQuant | None = Field(
        default=None, description="the denoiser's weights: bf16/fp16, fp8 (layerwise casting) or nf4 "
                                  "(bitsandbytes); default the pipeline's dtype")


def make_image_job(**values: object) -> ImageJob:
    """Validate flag values into an ImageJob; one-line ConfigError naming the flag and what it accepts."""
    return build(ImageJob, dict(values))
