"""What `estimate`, `fit` and `recommend` answer for an image-generation pipeline (SDXL, FLUX.1-dev): images of a
resolution, a batch per call, a step count, the runtime (diffusers or ComfyUI), its offload mode and the denoiser's
weight format.

``resolution``, ``steps`` (and ``guidance_passes``) are this job's own flags; ``batch``, ``quant``, ``offload`` and
``engine`` share their spelling with the language-model jobs and are validated here against this job's choices and
the runtime's profile (gpuwise/runtimes/engines.py).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuwise import runtimes
from gpuwise.flags import Flag, build
from gpuwise.runtimes.names import ImageEngine

IMAGE = "Job: image generation"
_COMMANDS = frozenset({"estimate", "fit", "recommend"})
PipelineOffload = Literal["auto", "none", "model-cpu", "sequential"]
DenoiserQuant = Literal["bf16", "fp16", "fp8", "nf4", "gguf-q8_0", "gguf-q4_k_m"]
SHARED = ("batch", "quant", "offload", "engine")
"""Fields whose flags the language-model jobs define (the same spelling on the command line)."""


class ImageJob(BaseModel):
    """Text-to-image generation with a diffusers pipeline, or the same models in ComfyUI, on one GPU."""

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
    engine: ImageEngine = Field(default="diffusers", description="the runtime: diffusers, or ComfyUI (which loads "
                                                                 "what fits and streams the rest)")
    offload: PipelineOffload | None = Field(
        default=None, description="diffusers: none (default), enable_model_cpu_offload (model-cpu) or "
                                  "enable_sequential_cpu_offload (sequential); ComfyUI: auto (default, by free "
                                  "memory), none (--highvram) or sequential (--novram)")
    quant: DenoiserQuant | None = Field(
        default=None, description="the denoiser's weights: bf16/fp16, fp8 (upcast per layer), nf4 (bitsandbytes, "
                                  "diffusers), gguf-q8_0 or gguf-q4_k_m; default the pipeline's dtype")

    @model_validator(mode="after")
    def _runtime_takes_it(self) -> ImageJob:
        profile = runtimes.engine(self.engine)
        assert profile.image is not None
        modes = profile.image.offload_modes.value
        if self.offload is not None and self.offload not in modes:
            raise ValueError(f"--offload {self.offload} is not a mode of {profile.name}; use one of: "
                             f"{', '.join(modes)}")
        if self.quant is not None and not runtimes.engine_runs(self.engine, self.quant):
            raise ValueError(f"--quant {self.quant} does not run on {profile.name}; use one of: "
                             f"{', '.join(sorted(profile.weight_formats.value or ()))}")
        return self

    @property
    def runtime(self) -> runtimes.EngineProfile:
        """The runtime's profile (its image fields are set: diffusers or ComfyUI)."""
        return runtimes.engine(self.engine)

    @property
    def offload_mode(self) -> str:
        """The offload mode in force: the one asked, else the runtime's default (its first)."""
        image = self.runtime.image
        assert image is not None
        return self.offload or next(iter(image.offload_modes.value))


def make_image_job(**values: object) -> ImageJob:
    """Validate flag values into an ImageJob; one-line ConfigError naming the flag and what it accepts."""
    return build(ImageJob, dict(values))
