"""Convolutional networks (ResNet, YOLOv8, U-Net) as lists of convolutions: FLOPs, bytes and saved activations per
image at an image side.

Each convolution producing an H x W x C_out map from C_in channels with a k x k kernel costs 2 H W C_in C_out k^2
FLOPs; it is followed by batch norm and an activation, memory-bound elementwise passes over its output. The other
passes (residual adds, concatenations, up-sampling, pooling) are the network's own (workload/convnets.py). Worked
check: the sum over ResNet-50 at 224 x 224 is 8.2 GFLOP per image forward, twice torchvision's 4.09 "GFLOPS" (which
counts multiply-accumulates); YOLOv8n at 640 is 8.74 GFLOP, Ultralytics' fused 8.7.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from gpuwise.catalog import GPU
from gpuwise.catalog.schema import Dtype
from gpuwise.estimate.roofline import Op
from gpuwise.workload.convnets import DEFAULT_IMAGE, NETWORKS, Conv, Net


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
                          Conv(out_hw, out_hw, mid, int(c_out), 1, ends_block=True)]
            else:
                convs += [Conv(hw, out_hw, first_in, int(c_out), 3),
                          Conv(out_hw, out_hw, int(c_out), int(c_out), 3, ends_block=True)]
            hw = out_hw
        c_in = int(c_out)
    return convs


def image_side(config: Mapping[str, Any], image: int | None) -> int:
    """The job's image side, else the family's default (workload/convnets.py DEFAULT_IMAGE)."""
    return image or DEFAULT_IMAGE.get(str(config.get("model_type")), 224)


@functools.lru_cache(maxsize=64)
def _network(config_json: str, image: int) -> Net:
    config = json.loads(config_json)
    build = NETWORKS.get(str(config.get("model_type")))
    if build is not None:
        return build(config, image)
    convs = convolutions(config, image)
    # torchvision's blocks end in `out += identity; out = relu(out)`: read two maps, write one, then read and write
    ends = sum(c.out_hw**2 * c.c_out for c in convs if c.ends_block)
    blocks = sum(c.ends_block for c in convs)
    return Net(convs=convs, passes={"residual_add_relu": 5.0 * ends}, launches={"residual_add_relu": 2 * blocks})


def network(config: Mapping[str, Any], image: int | None = None) -> Net:
    """The network of ``config`` at an image side (a walk cached per config and side; do not modify it)."""
    return _network(json.dumps(dict(config), sort_keys=True, default=str), image_side(config, image))


def conv_dtype(dtype: str, gpu: GPU) -> Dtype:
    """What a convolution of ``dtype`` work runs in: fp32 ones in TF32 on tensor cores that have it, by PyTorch's
    default ``torch.backends.cudnn.allow_tf32 = True`` (PyTorch docs, 'TensorFloat-32 (TF32) on Ampere (and later)
    devices'); fp32 matmuls stay fp32 (``torch.backends.cuda.matmul.allow_tf32`` is False by default since 1.12)."""
    return "tf32" if dtype == "fp32" and gpu.peak_flops("tf32") else dtype  # type: ignore[return-value]


def forward_flops_per_image(config: Mapping[str, Any], image: int | None = None) -> float:
    return 2.0 * network(config, image).macs


def conv_ops(config: Mapping[str, Any], *, batch: int, act_bytes: int, train: bool, image: int | None = None
             ) -> list[Op]:
    """Forward (and, when training, backward: data and weight gradients, 2x the GEMM FLOPs and traffic; 2x the
    elementwise traffic) operators of one batch. Each convolution is its own operator, timed by its own roofline:
    a 1 x 1 convolution over 64 channels does ~50 FLOP per byte, below an A100's or V100's ridge point, so it is
    memory-bound while the 3 x 3 ones are compute-bound, and summing them before taking the maximum would hide it."""
    net = network(config, image)
    scale = 3.0 if train else 1.0
    ops, elementwise = [], 0.0
    for c in net.convs:
        out = batch * c.out_hw**2 * c.c_out
        moved = (batch * c.in_hw**2 * c.c_in + out + c.c_in * c.c_out * c.kernel**2) * act_bytes
        ops.append(Op("convolutions", "gemm", 2.0 * batch * c.macs * scale, moved * scale, int(scale)))
        if c.norm:
            elementwise += 4 * out * act_bytes  # batch norm and the activation: read and write the map
    ops.append(Op("batchnorm_activation", "memory", 0.0, elementwise * scale, 2 * len(net.convs)))
    backward = 11 / 5 if train else 1.0  # a residual add's backward reads the gradient and the output, writes two
    for name, elements in net.passes.items():
        launches = net.launches.get(name, 1) * (2 if train else 1)
        ops.append(Op(name, "memory", 0.0, batch * elements * act_bytes * (backward if train else 1.0), launches))
    return ops


def activation_bytes_per_image(config: Mapping[str, Any], act_bytes: int, image: int | None = None) -> float:
    """Saved for backward: each convolution's input, and its batch-norm input and activation output."""
    return sum(3.0 * c.out_hw**2 * c.c_out * act_bytes for c in network(config, image).convs)


def largest_map_elements(config: Mapping[str, Any], image: int | None = None) -> float:
    """The largest feature map of one image (inference keeps about two alive)."""
    return max(c.out_hw**2 * c.c_out for c in network(config, image).convs)
