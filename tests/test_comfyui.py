"""ComfyUI as an image runtime, against its source (comfy/model_management.py load_models_gpu and its reserves,
comfy/sd.py's tiled VAE retry, comfy/ops.py's fp8 casting) and hand-worked figures."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from gpuwise import api, runtimes
from gpuwise.catalog import load_catalog
from gpuwise.cli.main import app
from gpuwise.errors import ConfigError
from gpuwise.estimate.image.pipeline import component_bytes, denoiser_bytes, image_estimate
from gpuwise.estimate.image.streaming import residency, tiled_area_ratio, weight_budget
from gpuwise.estimate.plan import resolve
from gpuwise.runtimes.schema import TiledDecode
from gpuwise.workload.diffusion.pipeline import find_pipeline
from gpuwise.workload.jobs.image import ImageJob, make_image_job

GIB, MIB = 2**30, 2**20
runner = CliRunner()
COMFY = runtimes.engine("comfyui").image
assert COMFY is not None


def _flux():  # type: ignore[no-untyped-def]
    found = find_pipeline("black-forest-labs/FLUX.1-dev")
    assert found is not None
    return found


def test_the_profile_holds_comfyuis_own_reserves() -> None:
    # model_management.py: EXTRA_RESERVED_VRAM = 400 * 1024 * 1024 on Linux; minimum_inference_memory =
    # 1024**3 * 0.8 + extra_reserved_memory(); decode_tiled_(tile_x=64, tile_y=64, overlap=16), three tilings
    assert COMFY.kept_free_bytes.value == 400 * MIB
    assert COMFY.working_floor_bytes.value == pytest.approx(0.8 * GIB)
    assert COMFY.tiled_decode is not None
    assert COMFY.tiled_decode.value == TiledDecode(tile_latent=64, overlap_latent=16, passes=3)
    assert COMFY.streams_by_free_memory.value and not runtimes.engine("diffusers").image.streams_by_free_memory.value


def test_comfyui_stores_every_linear_in_fp8_where_diffusers_keeps_the_modulation() -> None:
    tally = _flux().denoiser(1024)
    comfy = denoiser_bytes(tally, "fp8", fp8_every_linear=True)
    assert comfy == tally.linear_weights + 2 * (tally.params - tally.linear_weights)
    # Comfy-Org's flux1-dev-fp8 checkpoint holds the transformer in about 11.9 GB (17.2 GB less T5 fp8, CLIP, VAE)
    assert 11.5e9 < comfy < 12.2e9
    # diffusers keeps 3.2 B modulation and norm weights bf16, of which all but the 3 M non-linear ones are linears
    assert denoiser_bytes(tally, "fp8") - comfy == tally.kept_by_casting - (tally.params - tally.linear_weights)


def test_gguf_weights_take_their_bits_per_linear_weight() -> None:
    tally = _flux().denoiser(1024)
    # GGML Q8_0: blocks of 32 int8 and one fp16 scale = 34 bytes per 32 weights = 8.5 bits
    assert denoiser_bytes(tally, "gguf-q8_0") == pytest.approx(
        tally.linear_weights * 8.5 / 8 + 2 * (tally.params - tally.linear_weights))


def test_a_tiled_decode_covers_the_latent_as_comfyuis_three_tilings_do() -> None:
    # 1024 px = 128 latent px. Tiling 32x128 stepping 16 and 112: columns 0..112 (7 x 32 + 16 = 240), rows 0, 112
    # (128 + 16 = 144); the transpose the same; 64x64 stepping 48: 0, 48, 96 -> 64 + 64 + 32 = 160 each way.
    decoded, largest = tiled_area_ratio(1024, TiledDecode(64, 16, 3))
    assert decoded == pytest.approx((2 * 240 * 144 + 160 * 160) / 128**2)
    assert largest == pytest.approx(64 * 64 / 128**2)


def test_what_does_not_fit_stays_in_host_memory_and_streams() -> None:
    weights = {"transformer": 11 * GIB, "text_encoder_2": 9 * GIB, "vae": 0.2 * GIB}
    acts = {"transformer": 0.5 * GIB, "text_encoder_2": 0.0, "vae": 1.5 * GIB}
    held = residency(weights, acts, "auto", 12 * GIB, COMFY, None)
    budget = weight_budget(12 * GIB)
    # beside the transformer ComfyUI keeps max(0.8 GiB + 400 MiB, its activations + 400 MiB) = 1.2 GiB + ...
    assert held.resident_bytes["transformer"] == pytest.approx(budget - (0.8 * GIB + 400 * MIB))
    assert held.streamed_bytes["transformer"] == pytest.approx(11 * GIB - held.resident_bytes["transformer"])
    assert held.resident_bytes["vae"] == 0.2 * GIB and not held.all_loaded
    assert residency(weights, acts, "auto", 48 * GIB, COMFY, None).all_loaded
    assert sum(residency(weights, acts, "sequential", 48 * GIB, COMFY, None).resident_bytes.values()) == 0


def test_flux_fp8_runs_on_a_12_gb_card_under_comfyui_but_not_whole_under_diffusers() -> None:
    flux, catalog = _flux(), load_catalog()
    card = catalog.gpus["rtx-3060-12gb"]
    comfy = image_estimate(flux, make_image_job(engine="comfyui", quant="fp8"), card, catalog)
    whole = image_estimate(flux, make_image_job(quant="fp8"), card, catalog)
    assert comfy.memory.fits and not whole.memory.fits
    assert comfy.phases_s["host copies (offload)"] > 0  # the components reload each call: they do not fit at once
    on_3090 = image_estimate(flux, make_image_job(engine="comfyui", quant="fp8"), catalog.gpus["rtx-3090"], catalog)
    assert on_3090.working_set_bytes is not None and on_3090.phases_s["host copies (offload)"] == 0


def test_each_runtime_refuses_what_it_does_not_have() -> None:
    with pytest.raises(ConfigError, match="not a mode of ComfyUI"):
        make_image_job(engine="comfyui", offload="model-cpu")
    with pytest.raises(ConfigError, match="not a mode of diffusers"):
        make_image_job(offload="auto")
    with pytest.raises(ConfigError, match="does not run on ComfyUI"):
        make_image_job(engine="comfyui", quant="nf4")
    plan = resolve(_flux(), ImageJob(engine="comfyui"), load_catalog(use_user_dir=False).gpus["rtx-4090"])
    assert plan.offload == plan.job.offload == "auto"
    assert component_bytes(plan)


def test_the_cli_takes_the_engine_and_refuses_it_for_a_language_model() -> None:
    ok = runner.invoke(app, ["estimate", "flux.1-dev", "--gpu", "rtx-4060-ti-16gb", "--engine", "comfyui",
                             "--quant", "gguf-q8_0", "--json"])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(app, ["estimate", "llama-3.1-8b", "--gpu", "rtx-3090", "--task", "infer",
                              "--engine", "comfyui"])
    assert bad.exit_code == 2 and "runs image pipelines" in bad.output


def test_the_students_four_workloads_get_a_24_gb_class_card() -> None:
    rec = api.recommend({
        "workloads": [
            {"model": "stabilityai/stable-diffusion-xl-base-1.0", "task": "infer",
             "options": {"steps": 30, "resolution": 1024, "engine": "comfyui"}},
            {"model": "black-forest-labs/FLUX.1-dev", "task": "infer", "options": {"quant": "fp8",
                                                                                   "engine": "comfyui"}},
            {"model": "llama-3.1-8b", "task": "train", "options": {"method": "lora", "tokens": 10_000_000}},
            {"model": "Qwen/Qwen2.5-32B", "task": "infer",
             "options": {"quant": "gguf-q4_k_m", "engine": "llamacpp", "batch": 1}}],
        "budget_usd": 2000, "constraints": {"chassis": "desktop", "max_gpus": 1},
        "acquisitions": ["buy-new", "buy-used"], "objective": "perf-per-dollar"})
    assert rec.options
    cards = load_catalog().gpus
    assert all(22 <= cards[o.gpu].memory_gb <= 32 for o in rec.options[:3])
