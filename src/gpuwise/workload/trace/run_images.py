"""An image pipeline's denoiser and VAE run for real on a device (``gpuwise validate`` of sdxl, flux.1-dev): each
built from its shipped config with random weights (diffusers ``from_config``), denoiser forwards of the job's batch
and guidance passes at its resolution, then the VAE decode of the batch, timed and with torch's peak memory.

The text encoders are not run: the denoiser takes random prompt embeddings of their output shapes (an SDXL UNet its
pooled text embeddings and six time ids, a FLUX transformer its pooled projection, packed latents and position ids),
so the run holds the denoiser and the VAE, and the prediction set beside it counts those two.
"""

from __future__ import annotations

import statistics
import warnings
from typing import Any

from gpuwise import runtimes
from gpuwise.errors import ConfigError, ProbeUnavailable
from gpuwise.workload.diffusion.pipeline import Pipeline
from gpuwise.workload.trace.run import Measured, RunSettings, _check_device, _device_freed, _peaks, _reset, _timed

LATENT_SCALE = 8  # image pixels per latent pixel (the SD and FLUX VAEs)
FLUX_PATCH = 2  # FLUX packs 2 x 2 latent pixels per token


def _imports() -> tuple[Any, Any]:
    try:
        import diffusers  # type: ignore[import-not-found]
        import torch
    except ImportError:
        raise ProbeUnavailable("validate of an image pipeline needs diffusers and torch: pip install diffusers and "
                               "a torch build") from None
    return torch, diffusers


def _check(job: Any) -> None:
    if not runtimes.engine(job.engine).validate_runs:
        runs = runtimes.VALIDATE_IMAGE_ENGINE
        raise ConfigError(f"validate runs {runs.validate_runs}: --engine {runs.id} (or leave it out)")
    if job.offload_mode != "none":
        raise ConfigError("validate runs every component on the device: --offload none (or leave it out)")
    if job.quant not in (None, "bf16", "fp16"):
        raise ConfigError("validate runs a bf16 or fp16 denoiser (quantized formats load from checkpoints): use "
                          "--quant bf16 or fp16")


def _unet_inputs(torch: Any, config: Any, images: int, latent: int, tokens: int, dtype: Any, device: str) -> dict[
        str, Any]:
    inputs = {"sample": torch.randn(images, config.in_channels, latent, latent, dtype=dtype, device=device),
              "timestep": torch.tensor(500, device=device),
              "encoder_hidden_states": torch.randn(images, tokens, config.cross_attention_dim, dtype=dtype,
                                                   device=device)}
    if config.addition_embed_type == "text_time":  # SDXL: pooled text embeddings and (size, crop, target) ids
        pooled = config.projection_class_embeddings_input_dim - 6 * config.addition_time_embed_dim
        inputs["added_cond_kwargs"] = {"text_embeds": torch.randn(images, pooled, dtype=dtype, device=device),
                                       "time_ids": torch.randn(images, 6, dtype=dtype, device=device)}
    return inputs


def _flux_inputs(torch: Any, config: Any, images: int, latent: int, tokens: int, dtype: Any, device: str) -> dict[
        str, Any]:
    packed = (latent // FLUX_PATCH) ** 2
    inputs = {"hidden_states": torch.randn(images, packed, config.in_channels, dtype=dtype, device=device),
              "encoder_hidden_states": torch.randn(images, tokens, config.joint_attention_dim, dtype=dtype,
                                                   device=device),
              "pooled_projections": torch.randn(images, config.pooled_projection_dim, dtype=dtype, device=device),
              "timestep": torch.full((images,), 0.5, dtype=dtype, device=device),
              "img_ids": torch.zeros(packed, 3, device=device), "txt_ids": torch.zeros(tokens, 3, device=device)}
    if config.guidance_embeds:
        inputs["guidance"] = torch.full((images,), 3.5, dtype=dtype, device=device)
    return inputs


def run_pipeline(pipeline: Pipeline, job: Any, settings: RunSettings) -> Measured:
    """Timed denoiser forwards (``step_s``: one forward of batch x guidance passes images) and VAE decodes
    (``decode_s``) of ``job`` (an ImageJob with the pipeline's defaults filled in)."""
    torch, diffusers = _imports()
    _check(job)
    _check_device(torch, settings.device)
    torch.manual_seed(0)
    _reset(torch, settings.device)
    dtype = torch.bfloat16 if job.quant == "bf16" else torch.float16
    vae_dtype = torch.float32 if pipeline.defaults.vae_dtype == "fp32" else dtype
    latent = job.resolution // LATENT_SCALE
    images, tokens = job.batch * job.guidance_passes, pipeline.defaults.text_tokens
    with _device_freed(torch, settings.device):
        level = diffusers.utils.logging.get_verbosity()
        diffusers.utils.logging.set_verbosity_error()  # its note on casting a from_config model with to()
        default = torch.get_default_dtype()
        try:  # built in their own dtypes: a 12 B transformer built in fp32 first would need twice its memory
            with warnings.catch_warnings(), torch.device(settings.device):
                warnings.simplefilter("ignore", FutureWarning)
                torch.set_default_dtype(dtype)
                denoiser = getattr(diffusers, pipeline.denoiser_class).from_config(dict(pipeline.denoiser_config))
                torch.set_default_dtype(vae_dtype)
                vae = diffusers.AutoencoderKL.from_config(dict(pipeline.vae_config))
            denoiser, vae = denoiser.to(dtype).eval(), vae.to(vae_dtype).eval()
        finally:
            torch.set_default_dtype(default)
            diffusers.utils.logging.set_verbosity(level)
        build = _flux_inputs if pipeline.is_dit else _unet_inputs
        inputs = build(torch, denoiser.config, images, latent, tokens, dtype, settings.device)
        z = torch.randn(job.batch, vae.config.latent_channels, latent, latent, dtype=vae_dtype, device=settings.device)

        def forward() -> object:
            with torch.no_grad():
                return denoiser(**inputs)

        def decode() -> object:
            with torch.no_grad():
                return vae.decode(z)

        steps, stopped = _timed(torch, settings.device, forward, settings)
        decodes, late = _timed(torch, settings.device, decode, settings)
        if not steps or not decodes:
            raise ConfigError(f"validate: no forward finished within --time-limit-s {settings.time_limit_s:g}")

        def both() -> None:
            forward()
            decode()

        allocated, reserved = _peaks(torch, settings.device, both, denoiser, vae)
        return Measured(allocated, reserved, statistics.median(steps), len(steps), stopped or late,
                        decode_s=statistics.median(decodes),
                        versions={"torch": str(torch.__version__), diffusers.__name__: str(diffusers.__version__)},
                        method=f"{pipeline.denoiser_class} forwards and an AutoencoderKL decode on {settings.device} "
                               "(random prompt embeddings: the text encoders are not run)")
