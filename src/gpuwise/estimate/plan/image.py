"""An image pipeline's job resolved once: the pipeline's defaults for what the user left out (resolution, steps,
guidance passes, the denoiser's format), the runtime's profile and offload mode, and the dtypes each component
computes in. The image estimators (``estimate/image/``) read the plan and re-derive none of it."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.catalog import GPU
from gpuwise.catalog.schema import Dtype
from gpuwise.estimate.dtypes import activation_bytes
from gpuwise.runtimes.schema import EngineProfile, ImageRuntime
from gpuwise.workload.diffusion.pipeline import Pipeline
from gpuwise.workload.jobs.image import ImageJob


@dataclass(frozen=True)
class ImagePlan:
    """An image job on a card: every field the pipeline's defaults fill is set on ``job``."""

    pipeline: Pipeline
    job: ImageJob
    gpu: GPU
    runtime: EngineProfile  # diffusers or ComfyUI
    image: ImageRuntime  # how that runtime holds a pipeline (offload modes, streaming, tiled decode)
    resolution: int
    steps: int
    guidance_passes: int
    quant: str  # the denoiser's stored format
    offload: str  # the offload mode in force: the one asked, else the runtime's default

    @property
    def compute_dtype(self) -> Dtype:
        """The pipeline's torch_dtype: bf16 or fp16 where the job stores the denoiser so, else the pipeline's default
        (fp8, nf4 and GGUF weights are upcast to it)."""
        return "bf16" if (self.quant if self.quant in ("bf16", "fp16") else self.pipeline.defaults.dtype) == "bf16" \
            else "fp16"

    @property
    def vae_dtype(self) -> str:
        """The VAE decodes in fp32 only where diffusers upcasts it: an fp16 pipeline whose VAE config sets force_upcast
        (diffusers@58eb52c0 pipeline_stable_diffusion_xl.py: ``needs_upcasting = self.vae.dtype == torch.float16 and
        self.vae.config.force_upcast``; the pipeline file's fp32 ``vae_dtype`` records that flag). A bf16 pipeline
        decodes in bf16."""
        upcast = self.pipeline.defaults.vae_dtype == "fp32" and self.compute_dtype == "fp16"
        return "fp32" if upcast else self.compute_dtype

    @property
    def act_bytes(self) -> int:
        """Bytes per activation of the denoiser and the text encoders (the pipeline's dtype)."""
        return activation_bytes(self.compute_dtype)

    @property
    def vae_act_bytes(self) -> int:
        return activation_bytes(self.vae_dtype)

    @property
    def matmul_dtype(self) -> Dtype:
        """The denoiser's matmuls run in the pipeline's 16-bit type."""
        return self.compute_dtype

    @property
    def vae_matmul_dtype(self) -> Dtype:
        """An fp32 VAE's convolutions run as TF32 on tensor cores (PyTorch's cuDNN default)."""
        return "tf32" if self.vae_dtype == "fp32" else self.compute_dtype

    @property
    def shares_host_memory(self) -> bool:
        """The GPU and the CPU use one DRAM (Apple, DGX Spark, Strix Halo, Jetson): offloading frees none."""
        return self.gpu.unified_memory is not None or self.gpu.form_factor == "module"


def image_plan(pipeline: Pipeline, job: ImageJob, gpu: GPU) -> ImagePlan:
    """``job`` with the pipeline's defaults and its runtime's offload mode, on ``gpu``."""
    d = pipeline.defaults
    runtime = job.runtime
    image = runtime.image
    assert image is not None  # the job's own validation accepts image runtimes only
    filled = job.model_copy(update={"resolution": job.resolution or d.resolution, "steps": job.steps or d.steps,
                                    "guidance_passes": job.guidance_passes or d.guidance_passes,
                                    "quant": job.quant or d.dtype, "offload": job.offload_mode})
    assert filled.resolution and filled.steps and filled.guidance_passes and filled.quant and filled.offload
    return ImagePlan(pipeline, filled, gpu, runtime, image, filled.resolution, filled.steps, filled.guidance_passes,
                     filled.quant, filled.offload)
