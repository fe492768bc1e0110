"""Image-generation pipelines (SDXL, FLUX.1-dev) against independent truths: the published checkpoint files'
sizes (2 bytes per bf16/fp16 parameter plus a safetensors header), hand-worked block formulas, FLOP counts that
torch.utils.flop_counter.FlopCounterMode measured on meta tensors of diffusers' own modules (diffusers 0.42.1),
the HF quantization blog's measured memory, and transformers' own build of the text encoders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwise import api
from gpuwise.catalog import Catalog, load_catalog
from gpuwise.estimate.image.pipeline import component_bytes, denoiser_bytes, image_estimate, image_fit
from gpuwise.estimate.plan import resolve
from gpuwise.workload.diffusion.pipeline import find_pipeline
from gpuwise.workload.jobs.image import ImageJob

GIB = 2**30
HEADER = 1_000_000  # a safetensors header is JSON of tensor names and shapes: well under 1 MB here
D = 3072  # FLUX hidden size: 24 heads x 128


def _pipeline(name: str):  # type: ignore[no-untyped-def]
    found = find_pipeline(name)
    assert found is not None
    return found


def test_flux_transformer_blocks_by_hand() -> None:
    """A double block: two streams of AdaLN 6d^2+6d, q/k/v/out 4(d^2+d), MLP 8d^2+5d, q/k RMSNorm 2 x 128;
    a single block: modulation 3d^2+3d, q/k/v 3(d^2+d), proj_mlp 4d^2+4d, proj_out 5d^2+d, 2 x 128."""
    tally = _pipeline("black-forest-labs/FLUX.1-dev").denoiser(1024)
    assert tally.blocks[0] == 2 * (18 * D * D + 15 * D + 256) == 339_831_296
    assert tally.blocks[-1] == 15 * D * D + 11 * D + 256 == 141_591_808
    assert len(tally.blocks) == 19 + 38


def test_component_counts_match_the_published_checkpoint_files() -> None:
    flux, sdxl = _pipeline("flux.1-dev").params(), _pipeline("stabilityai/stable-diffusion-xl-base-1.0").params()
    # FLUX.1-dev diffusers index total_size (bf16): transformer 23,802,816,640 B, text_encoder_2 9,524,621,312 B
    assert 2 * flux["transformer"] == 23_802_816_640
    assert 2 * flux["text_encoder_2"] == 9_524_621_312
    assert 0 < 335_304_388 - 4 * flux["vae"] < HEADER  # BFL ae.safetensors, fp32
    # SDXL base 1.0 *.fp16.safetensors at snapshot 4621659 (LFS pointer sizes)
    for name, size in (("unet", 5_135_149_760), ("vae", 167_335_342), ("text_encoder", 246_144_152),
                       ("text_encoder_2", 1_389_382_176)):
        assert 0 < size - 2 * sdxl[name] < HEADER, name


def test_totals_agree_with_the_published_figures() -> None:
    # HF blog 'Exploring simple optimizations for SDXL': "The base SDXL model has 3.5B parameters"
    assert round(_pipeline("sdxl").total_params / 1e9, 1) == 3.5
    # BFL model card: "FLUX.1 [dev] is a 12 billion parameter rectified flow transformer"
    assert round(_pipeline("flux.1-dev").params()["transformer"] / 1e9) == 12


def test_flops_per_step_match_the_formula_and_the_flop_counter() -> None:
    flux = _pipeline("flux.1-dev").denoiser(1024)
    image, text = 64 * 64, 512
    length = image + text
    blocks = 57 * (24 * D * D * length + 4 * length * length * D)
    embed = 2 * D * (64 * image + 4096 * text + 64 * image)
    assert flux.gemm_flops + flux.attention_flops == pytest.approx(blocks + embed, rel=1e-3)
    assert flux.gemm_flops + flux.attention_flops == pytest.approx(74.385e12, rel=1e-3)  # FlopCounterMode
    unet = _pipeline("sdxl").denoiser(1024)
    assert unet.gemm_flops + unet.attention_flops == pytest.approx(6.761236e12, rel=1e-4)  # batch 1, FlopCounterMode
    _, decoder = _pipeline("sdxl").vae_parts(1024)
    assert decoder.gemm_flops + decoder.attention_flops == pytest.approx(10.470e12, rel=1e-3)


def test_weights_in_each_format() -> None:
    flux = _pipeline("flux.1-dev")
    tally = flux.denoiser(1024)
    # diffusers layerwise casting measured on meta: 8,653,744,128 parameters to float8_e4m3fn, 3,247,664,192 bf16
    assert denoiser_bytes(tally, "fp8") == 8_653_744_128 + 2 * 3_247_664_192
    # bitsandbytes NF4: every nn.Linear weight at 4 + 32/64 bits, biases and norms bf16
    assert denoiser_bytes(tally, "nf4") == 11_898_322_944 * 4.5 / 8 + (tally.params - 11_898_322_944) * 2
    card = load_catalog(use_user_dir=False).gpus["h100-sxm-80gb"]
    # HF blog diffusers-quantization.md: bf16 pipeline "approximately 31.447 GB" after loading (printed / 1024**3)
    assert sum(component_bytes(resolve(flux, ImageJob(), card)).values()) / GIB == pytest.approx(31.447, rel=0.005)
    sdxl = _pipeline("sdxl")
    weights = component_bytes(resolve(sdxl, ImageJob(), card))
    # the single-file fp16 sd_xl_base_1.0.safetensors (UNet + text encoders + VAE): 6,938,078,334 B; our VAE is fp32
    assert sum(weights.values()) - weights["vae"] / 2 == pytest.approx(6_938_078_334, rel=0.001)


def test_activation_peaks_are_near_the_traced_ones(shipped: Catalog) -> None:
    """torch.distributed._tools.mem_tracker on meta tensors (diffusers modules, fused SDPA): FLUX transformer bf16
    0.45 GiB, SDXL UNet fp16 with CFG 0.31 GiB, SDXL VAE decode fp32 at 1024 px 3.00 GiB."""
    card = shipped.gpus["h100-sxm-80gb"]
    flux = image_estimate(_pipeline("flux.1-dev"), ImageJob(offload="model-cpu"), card)
    assert flux.memory.breakdown_bytes["activations"] / GIB == pytest.approx(0.45, rel=0.25)
    sdxl = image_estimate(_pipeline("sdxl"), ImageJob(resolution=1024), card)  # every component resident
    assert sdxl.memory.breakdown_bytes["activations"] / GIB == pytest.approx(3.00, rel=0.05)  # the VAE decode
    den = _pipeline("sdxl").denoiser(1024)
    assert 2 * (den.live_elements + den.held_elements) * 2 / GIB == pytest.approx(0.31, rel=0.25)


def test_offload_modes_trade_memory_for_host_copies(shipped: Catalog) -> None:
    flux, card = _pipeline("flux.1-dev"), shipped.gpus["rtx-4090"]
    runs = {m: image_estimate(flux, ImageJob(offload=m), card, shipped) for m in ("none", "model-cpu", "sequential")}
    memory = [runs[m].memory.per_gpu_bytes for m in ("none", "model-cpu", "sequential")]
    seconds = [runs[m].seconds_per_image or 0.0 for m in ("none", "model-cpu", "sequential")]
    assert memory[0] > memory[1] > memory[2] and seconds[0] < seconds[1] < seconds[2]
    # model-cpu holds the largest component (the transformer) and nothing else
    held = runs["model-cpu"].memory.breakdown_bytes
    assert held["weights: transformer (the others on the CPU)"] == 2 * 11_901_408_320
    assert runs["none"].phases_s["host copies (offload)"] == 0


def test_seconds_grow_with_steps_and_resolution(shipped: Catalog) -> None:
    sdxl, card = _pipeline("sdxl"), shipped.gpus["rtx-4090"]
    s20, s40 = (image_estimate(sdxl, ImageJob(steps=n), card, shipped).phases_s["denoising"] for n in (20, 40))
    assert s40 == pytest.approx(2 * s20)
    small, large = (image_estimate(sdxl, ImageJob(resolution=r), card, shipped).seconds_per_image for r in (768, 1024))
    assert small is not None and large is not None and small < large


def test_sdxl_and_flux_answer_on_a_24_gb_card(shipped: Catalog) -> None:
    card = shipped.gpus["rtx-4090"]
    assert image_estimate(_pipeline("sdxl"), ImageJob(), card, shipped).memory.fits
    assert not image_estimate(_pipeline("flux.1-dev"), ImageJob(), card, shipped).memory.fits  # 31.4 GiB of weights
    fitted = image_fit(_pipeline("flux.1-dev"), ImageJob(), card, shipped)
    flags = [o.flags for o in fitted.options]
    assert "--offload model-cpu --quant fp8" in flags and "--offload none --quant nf4" in flags
    assert all(o.estimate.memory.fits for o in fitted.options)


def test_a_12_gb_card_runs_flux_in_nf4_with_model_offload(shipped: Catalog) -> None:
    job = ImageJob(quant="nf4", offload="model-cpu")
    result = image_estimate(_pipeline("flux.1-dev"), job, shipped.gpus["rtx-3060-12gb"], shipped)
    assert result.memory.fits  # the T5 encoder (8.9 GiB bf16) is then the largest component on the GPU


def test_recommend_ranks_cards_for_images_per_second() -> None:
    result = api.recommend({"workloads": [{"model": "black-forest-labs/FLUX.1-dev", "qps": 0.5,
                                            "options": {"offload": "model-cpu", "quant": "fp8"}}], "top": 5})
    assert result.options
    for option in result.options:
        assert option.fit.seconds_per_image and option.fit.qps_capacity and option.fit.qps_capacity >= 0.5
        # pipelines are one-GPU copies: up to 32 cards, one fewer would miss the target (no grid rounds them up),
        # except where cards come in whole instances (a rental) or on whole baseboards (SXM/OAM modules)
        boards = api.load_catalog().gpus[option.gpu].board_gpus
        if option.count <= 32 and option.acquisition.startswith("buy") and not boards:
            assert option.fit.qps_capacity * (option.count - 1) / option.count < 0.5


@pytest.mark.parametrize("pipeline_id", ["sdxl", "flux.1-dev"])
def test_text_encoders_equal_transformers_meta_build(pipeline_id: str) -> None:
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    configs = {"CLIPTextModel": transformers.CLIPTextConfig, "CLIPTextModelWithProjection": transformers.CLIPTextConfig,
               "T5EncoderModel": transformers.T5Config}
    for encoder in _pipeline(pipeline_id).text_encoders:
        config = configs[encoder.cls](**{k: v for k, v in encoder.config.items() if not k.startswith("_")})
        with torch.device("meta"):
            model = getattr(transformers, encoder.cls)(config)
        assert sum(p.numel() for p in model.parameters()) == encoder.params, encoder.name


TRACED_DIFFUSERS = Path(__file__).parents[1] / "benchmarks" / "results" / "trace-diffusers.json"


@pytest.mark.parametrize(("pipeline_id", "traced_key"), [("sdxl", "sdxl_unet_step_batch2_1024"),
                                                         ("flux.1-dev", "flux_dev_step_1024")])
def test_a_denoiser_dispatches_what_diffusers_traced(pipeline_id: str, traced_key: str) -> None:
    """The per-module operator counts add up to diffusers' own forward, traced (benchmarks/trace_diffusers.py)."""
    traced = json.loads(TRACED_DIFFUSERS.read_text())[traced_key]["total"]
    assert find_pipeline(pipeline_id).denoiser(1024).dispatches == pytest.approx(traced, rel=0.05)


def test_an_sdxl_step_on_an_h200_is_the_host_dispatching_its_operators(shipped: Catalog) -> None:
    """58.9 ms measured per UNet step (batch 2, 1024 px) on an H200 (../shared/data/h200-runs.yaml): the GPU's work
    takes about 35 ms, the host's dispatch of 5,332 operators the rest."""
    job = ImageJob(resolution=1024, steps=30)
    phases = image_estimate(find_pipeline("sdxl"), job, shipped.gpu("h200-sxm-141gb"), shipped).phases_s
    assert phases["denoising"] / 30 == pytest.approx(0.0589, rel=0.1)
