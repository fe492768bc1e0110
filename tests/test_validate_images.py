"""`gpuwise validate` of an image pipeline on the CPU with tiny configs of each denoiser kind (an SDXL-like UNet with
its pooled-text and time-id conditioning, a FLUX-like transformer with packed latents), run through diffusers' own
modules: the peak holds at least the two components' weights, and the figures come beside the estimate's for the
same two components. Skipped without diffusers (not a test dependency: its wheel pins what the rest does not)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("diffusers")

from gpuwise import api
from gpuwise.workload.diffusion.pipeline import _load

PIPELINES = Path(__file__).resolve().parents[1] / "src" / "gpuwise" / "workload" / "diffusion" / "pipelines"
TINY_VAE = {"_class_name": "AutoencoderKL", "in_channels": 3, "out_channels": 3, "latent_channels": 4,
            "down_block_types": ["DownEncoderBlock2D"] * 4, "up_block_types": ["UpDecoderBlock2D"] * 4,
            "block_out_channels": [32, 32, 32, 32], "layers_per_block": 1, "norm_num_groups": 32, "sample_size": 64}
TINY_UNET = {"_class_name": "UNet2DConditionModel", "sample_size": 8, "in_channels": 4, "out_channels": 4,
             "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D"],
             "up_block_types": ["CrossAttnUpBlock2D", "UpBlock2D"], "block_out_channels": [32, 64],
             "layers_per_block": 1, "cross_attention_dim": 32, "attention_head_dim": [2, 4],
             "transformer_layers_per_block": [1, 1], "addition_embed_type": "text_time", "addition_time_embed_dim": 8,
             "projection_class_embeddings_input_dim": 80, "norm_num_groups": 32, "use_linear_projection": True}
TINY_FLUX = {"_class_name": "FluxTransformer2DModel", "patch_size": 1, "in_channels": 16, "num_layers": 1,
             "num_single_layers": 1, "attention_head_dim": 16, "num_attention_heads": 2, "joint_attention_dim": 32,
             "pooled_projection_dim": 32, "guidance_embeds": True, "axes_dims_rope": [4, 6, 6]}


def _tiny(preset: str, denoiser: dict[str, object]):  # type: ignore[no-untyped-def]
    document = copy.deepcopy(json.loads((PIPELINES / f"{preset}.json").read_text()))
    document["denoiser"]["config"] = denoiser
    document["vae"]["config"] = {**TINY_VAE, "latent_channels": 16 if preset.startswith("flux") else 4}
    document["_pipeline"]["defaults"].update(resolution=64, steps=2, text_tokens=8)
    return _load(document)


@pytest.mark.parametrize(("preset", "denoiser"), [("sdxl", TINY_UNET), ("flux.1-dev", TINY_FLUX)])
def test_a_tiny_pipeline_runs_its_denoiser_and_vae(preset: str, denoiser: dict[str, object]) -> None:
    pipeline = _tiny(preset, denoiser)
    done = api.validate(pipeline, run={"device": "cpu", "steps": 1, "warmup": 0})
    weights = sum(done.estimate.weights_bytes[n] for n in (pipeline.denoiser_name, "vae"))  # type: ignore[union-attr]
    assert done.run.peak_allocated_bytes >= weights
    assert set(done.measured) == set(done.predicted) >= {"step_s", "decode_s", "seconds_per_image"}
    assert done.measured["decode_s"] and done.measured["step_s"]
    assert done.record()["job_class"] == "image-diffusers"
