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

from gpuwise.catalog import GPU
from gpuwise.catalog.schema import Dtype
from gpuwise.estimate.roofline import Op


@dataclass(frozen=True)
class Conv:
    in_hw: int
    out_hw: int
    c_in: int
    c_out: int
    kernel: int
    ends_block: bool = False  # its output meets the shortcut: the residual add and ReLU follow


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


def conv_dtype(dtype: str, gpu: GPU) -> Dtype:
    """What a convolution of ``dtype`` work runs in: fp32 ones in TF32 on tensor cores that have it, by PyTorch's
    default ``torch.backends.cudnn.allow_tf32 = True`` (PyTorch docs, 'TensorFloat-32 (TF32) on Ampere (and later)
    devices'); fp32 matmuls stay fp32 (``torch.backends.cuda.matmul.allow_tf32`` is False by default since 1.12)."""
    return "tf32" if dtype == "fp32" and gpu.peak_flops("tf32") else dtype  # type: ignore[return-value]


def forward_flops_per_image(config: Mapping[str, Any], image: int = 224) -> float:
    return sum(2.0 * c.out_hw**2 * c.c_in * c.c_out * c.kernel**2 for c in convolutions(config, image))


def conv_ops(config: Mapping[str, Any], *, batch: int, act_bytes: int, train: bool, image: int = 224) -> list[Op]:
    """Forward (and, when training, backward: data and weight gradients, 2x the GEMM FLOPs and traffic; 2x the
    elementwise traffic) operators of one batch. Each convolution is its own operator, timed by its own roofline:
    a 1 x 1 convolution over 64 channels does ~50 FLOP per byte, below an A100's or V100's ridge point, so it is
    memory-bound while the 3 x 3 ones are compute-bound, and summing them before taking the maximum would hide it."""
    scale = 3.0 if train else 1.0
    ops, elementwise = [], 0.0
    convs = convolutions(config, image)
    for c in convs:
        out = batch * c.out_hw**2 * c.c_out
        flops = 2.0 * out * c.c_in * c.kernel**2
        moved = (batch * c.in_hw**2 * c.c_in + out + c.c_in * c.c_out * c.kernel**2) * act_bytes
        ops.append(Op("convolutions", "gemm", flops * scale, moved * scale, int(scale)))
        elementwise += 4 * out * act_bytes  # batch norm and ReLU: read and write the map
    # torchvision's blocks end in `out += identity; out = relu(out)`: an in-place add (read two maps, write one)
    # and ReLU (read, write); backward reads the gradient and the output and writes the gradient, then adds the
    # shortcut's gradient into the branch's (read two, write one): 5 passes forward, 6 backward
    ends = sum(batch * c.out_hw**2 * c.c_out for c in convs if c.ends_block) * act_bytes
    residual = Op("residual_add_relu", "memory", 0.0, ends * (11 if train else 5), (4 if train else 2) * sum(
        c.ends_block for c in convs))
    return [*ops, Op("batchnorm_relu", "memory", 0.0, elementwise * scale, 2 * len(convs)), residual]


def activation_bytes_per_image(config: Mapping[str, Any], act_bytes: int, image: int = 224) -> float:
    """Saved for backward: each convolution's input, and its batch-norm input and ReLU output."""
    return sum(3.0 * c.out_hw**2 * c.c_out * act_bytes for c in convolutions(config, image))
