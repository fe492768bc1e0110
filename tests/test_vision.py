"""Vision models beyond ResNet: YOLOv8, U-Net and SAM counted against their authors' numbers and a PyTorch build,
a ViT's sequence from its image, published throughput, and the dataloader warning."""

from __future__ import annotations

import importlib.util
import itertools

import pytest

from conftest import load_benchmark
from gpuwise import api
from gpuwise.errors import ConfigError
from gpuwise.estimate.speed.convolutions import forward_flops_per_image
from gpuwise.estimate.speed.dataloader import dataloader_warning, images_per_core
from gpuwise.workload.model.convnets import unet
from gpuwise.workload.vision.inputs import image_tokens

# Ultralytics yolov8.yaml @ 023641f5, each scale's comment: 'YOLOv8n summary: 225 layers, 3157200 parameters ...';
# docs/en/models/yolov8.md table: FLOPs (B) of the fused model at 640
YOLOV8 = {"yolov8n": (3_157_200, 8.7), "yolov8s": (11_166_560, 28.6), "yolov8m": (25_902_640, 78.9),
          "yolov8l": (43_691_520, 165.2), "yolov8x": (68_229_648, 257.8)}


@pytest.mark.parametrize(("preset", "published"), sorted(YOLOV8.items()))
def test_yolov8_counts_are_ultralytics_own(preset: str, published: tuple[int, float]) -> None:
    params, gflops = published
    arch = api.model(preset)
    assert arch.total_params == params  # to the parameter: BN weights and biases, the Detect heads, DFL's 16
    assert forward_flops_per_image(arch.config, 640) / 1e9 == pytest.approx(gflops, rel=0.01)


def test_sam_encoders_are_timms_and_transformers_counts() -> None:
    """timm results/*.csv param_count (M) of samvit_{base,large,huge}_patch16; transformers' SamVisionModel on the
    meta device gives ViT-H's 637,026,048 exactly (tests/test_params.py builds every preset that way)."""
    for preset, millions in (("sam-vit-b", 89.67), ("sam-vit-l", 308.28), ("sam-vit-h", 637.03)):
        assert api.model(preset).total_params / 1e6 == pytest.approx(millions, abs=0.005)
    h = api.model("sam-vit-h")
    assert image_tokens(h, None) == 64 * 64
    assert [(b.count, b.attention.window) for b in h.blocks] == [(28, 196), (4, None)]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch (CI installs the CPU build)")
def test_unet_count_matches_a_pytorch_build_of_the_paper() -> None:
    """Ronneberger et al. 2015 with milesial's choices: padded 3x3 convolutions without bias, each with batch norm
    and ReLU, 2x2 max pools, 2x2 transposed convolutions halving the channels, a 1x1 head -- built in PyTorch and
    counted by PyTorch."""
    import torch
    from torch import nn

    def double(c_in: int, c_out: int) -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(),
                             nn.Conv2d(c_out, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU())

    widths = [64, 128, 256, 512, 1024]
    modules = [double(3, 64)] + [double(a, b) for a, b in itertools.pairwise(widths)]
    for a, b in zip(reversed(widths[1:]), reversed(widths[:-1]), strict=True):
        modules += [nn.ConvTranspose2d(a, b, 2, stride=2), double(a, b)]
    modules.append(nn.Conv2d(64, 2, 1))
    with torch.device("meta"):
        counted = sum(p.numel() for m in modules for p in m.parameters())
    assert api.model("unet").total_params == counted == 31_037_698


def test_unet_flops_by_hand_at_the_first_level() -> None:
    """The first double convolution at 256 px: 256^2 x (3 x 64 + 64 x 64) x 9 MACs."""
    first = unet({"in_channels": 3, "num_classes": 2}, 256).convs[:2]
    assert sum(c.macs for c in first) == 256**2 * (3 * 64 + 64 * 64) * 9


def test_a_vits_sequence_is_its_images_patches() -> None:
    vit = api.model("vit-l-16")
    assert image_tokens(vit, None) == 197 and image_tokens(vit, 384) == 577  # (384 / 16)^2 + the class token
    est = api.estimate("vit-l-16", gpu="rtx-4090", task="infer", batch=8, image_size=384)
    assert est.job.input_len == 577
    with pytest.raises(ConfigError, match="--image-size instead"):
        api.estimate("vit-l-16", gpu="rtx-4090", task="infer", input_len=500)
    with pytest.raises(ConfigError, match="applies to vision models"):
        api.estimate("llama-3.1-8b", gpu="rtx-4090", image_size=224)
    with pytest.raises(ConfigError, match="multiple of"):
        api.estimate("vit-l-16", gpu="rtx-4090", task="infer", image_size=230)


def test_a_bigger_image_costs_a_cnn_its_pixels() -> None:
    """Convolutions scale with the output pixels: twice the side, four times the FLOPs (ResNet-50, YOLOv8n)."""
    for preset in ("resnet-50", "yolov8n"):
        config = api.model(preset).config
        assert forward_flops_per_image(config, 448) == pytest.approx(4 * forward_flops_per_image(config, 224),
                                                                     rel=0.01)


def test_published_vision_throughput() -> None:
    """timm's own benchmark runs (benchmarks/vision_accuracy.py; README table): ResNet-50 and ViT-B/L within 35% and
    a median within 10%; SAM within 35% on the runs of timm 1.0 with PyTorch 2.1/2.4 (the PyTorch 2.9 runs of the
    same encoders ran at half that speed on the same RTX 4090: a software change gpuwise does not model)."""
    rows = load_benchmark("vision_accuracy").evaluate()
    plain = [r for r in rows if not r["model"].startswith("sam")]
    assert all(r["ratio"] and abs(r["ratio"] - 1) <= 0.35 for r in plain), plain
    assert sorted(abs(r["ratio"] - 1) for r in plain)[len(plain) // 2] <= 0.10
    sam = [r for r in rows if r["model"].startswith("sam") and "pt291" not in r["id"]]
    assert len(sam) == 4 and all(abs(r["ratio"] - 1) <= 0.35 for r in sam), sam


def test_dataloader_warning_follows_the_measured_decode_rate() -> None:
    assert images_per_core(224) == 200 and images_per_core(448) == 50  # decoding costs per pixel
    assert dataloader_warning(1_500, 224) is None  # 7.5 cores: within the 8 a GPU usually gets
    warning = dataloader_warning(2_861, 224)
    assert warning is not None and "14 CPU cores" in warning and "DALI" in warning
    resnet = api.estimate("resnet-50", gpu="a100-sxm-80gb", task="train", precision="fp16", optimizer="sgd",
                          batch=256, grad_ckpt=False, zero=0)
    assert any("dataloader-bound" in w for w in resnet.warnings)
    assert not any("dataloader-bound" in w for w in api.estimate("vit-l-16", gpu="t4", task="infer", batch=8).warnings)


def test_yolo_and_unet_train_and_serve_with_memory_that_grows_with_the_batch() -> None:
    small = api.estimate("yolov8m", gpu="rtx-4090", task="train", batch=8, optimizer="sgd")
    big = api.estimate("yolov8m", gpu="rtx-4090", task="train", batch=32, optimizer="sgd")
    assert small.memory.per_gpu_bytes < big.memory.per_gpu_bytes and small.perf and big.perf
    assert api.estimate("unet", gpu="l4", task="infer", batch=4, image_size=512).perf is not None
