"""ResNet (HF ``resnet`` configs) as a list of convolutions: FLOPs, bytes and saved activations per image.

Each convolution producing an H x W x C_out map from C_in channels with a k x k kernel costs
2 H W C_in C_out k^2 FLOPs; it is followed by batch norm and (mostly) ReLU, memory-bound elementwise
passes over its output. Worked check: the sum over ResNet-50 at 224 x 224 is 8.2 GFLOP per image forward,
twice torchvision's 4.09 "GFLOPS" (which counts multiply-accumulates).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuwise.estimate.roofline import Op


@dataclass(frozen=True)
class Conv:
    in_hw: int
    out_hw: int
    c_in: int
    c_out: int
    kernel: int


def convolutions(config: Mapping[str, Any], image: int = 224) -> list[Conv]:
    """Every convolution of an HF ResNet (stem, bottleneck or basic blocks, projection shortcuts)."""
    stem = int(config.get("embedding_size", 64))
    convs = [Conv(image, image // 2, int(config.get("num_channels", 3)), stem, 7)]
    hw = image // 4  # stride-2 stem, then max pool
    c_in = stem
    bottleneck = config.get("layer_type", "bottleneck") == "bottleneck"
    for stage, (c_out, depth) in enumerate(zip(config["hidden_sizes"], config["depths"], strict=True)):
        for block in range(int(depth)):
            stride = 2 if block == 0 and stage > 0 else 1
            out_hw = hw // stride
            first_in = c_in if block == 0 else int(c_out)
            if first_in != c_out or stride != 1:
                convs.append(Conv(hw, out_hw, first_in, int(c_out), 1))
            if bottleneck:
                mid = int(c_out) // 4
                convs += [Conv(hw, hw, first_in, mid, 1), Conv(hw, out_hw, mid, mid, 3),
                          Conv(out_hw, out_hw, mid, int(c_out), 1)]
            else:
                convs += [Conv(hw, out_hw, first_in, int(c_out), 3), Conv(out_hw, out_hw, int(c_out), int(c_out), 3)]
            hw = out_hw
        c_in = int(c_out)
    return convs


def forward_flops_per_image(config: Mapping[str, Any], image: int = 224) -> float:
    return sum(2.0 * c.out_hw**2 * c.c_in * c.c_out * c.kernel**2 for c in convolutions(config, image))


def conv_ops(config: Mapping[str, Any], *, batch: int, act_bytes: int, train: bool, image: int = 224) -> list[Op]:
    """Forward (and, when training, backward: 2x GEMM FLOPs, 2x elementwise traffic) operators of one batch."""
    gemm_flops = gemm_bytes = elementwise = 0.0
    convs = convolutions(config, image)
    for c in convs:
        out = batch * c.out_hw**2 * c.c_out
        gemm_flops += 2.0 * out * c.c_in * c.kernel**2
        gemm_bytes += (batch * c.in_hw**2 * c.c_in + out) * act_bytes
        gemm_bytes += c.c_in * c.c_out * c.kernel**2 * act_bytes
        elementwise += 4 * out * act_bytes  # batch norm and ReLU: read and write the map
    scale = 3.0 if train else 1.0
    return [Op("convolutions", "gemm", gemm_flops * scale, gemm_bytes * scale, len(convs) * int(scale)),
            Op("batchnorm_relu", "memory", 0.0, elementwise * (3.0 if train else 1.0), 2 * len(convs))]


def activation_bytes_per_image(config: Mapping[str, Any], act_bytes: int, image: int = 224) -> float:
    """Saved for backward: each convolution's input, and its batch-norm input and ReLU output."""
    return sum(3.0 * c.out_hw**2 * c.c_out * act_bytes for c in convolutions(config, image))
