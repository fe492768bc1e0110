"""Convolutional networks (ResNet, YOLOv8, U-Net) as operators: FLOPs and bytes per image at an image side.

Each convolution producing an H x W x C_out map from C_in channels with a k x k kernel costs 2 H W C_in C_out k^2
FLOPs; it is followed by batch norm and an activation, memory-bound elementwise passes over its output. The network
itself -- its convolutions and its other passes (residual adds, concatenations, up-sampling, pooling) -- is the
workload's (workload/vision/convnets.py). Worked check: the sum over ResNet-50 at 224 x 224 is 8.2 GFLOP per image
forward, twice torchvision's 4.09 "GFLOPS" (which counts multiply-accumulates); YOLOv8n at 640 is 8.74 GFLOP,
Ultralytics' fused 8.7.

``layer_ops`` times any list of convolutions one by one (the diffusion UNet's and VAE decoder's, counted in
estimate/image/layers.py), with the NCHW <-> NHWC transposes cuDNN runs around a tensor-core convolution when the maps
are NCHW, PyTorch's default layout (LAYOUT_SOURCE); the vision networks here are timed without them (timm's and
Ultralytics' runs) -- a difference to settle with channels_last-aware cases.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuwise.catalog import GPU
from gpuwise.catalog.schema import Dtype
from gpuwise.estimate.roofline import Op
from gpuwise.fitted import FittedConstant
from gpuwise.workload.model.convnets import Conv, network

# implicit-GEMM convolutions reach this fraction of the card's dense-GEMM efficiency: a global parameter of the
# mechanism, its prior, bounds and sources in gpuwise/fitted/parameters.yaml
IMPLICIT_GEMM_FRACTION = FittedConstant("implicit_gemm_fraction", "fraction of the dense-GEMM efficiency")
LAYOUT_SOURCE = (
    "MosaicML Composer method card 'Channels Last' (docs.mosaicml.com/projects/composer/en/v0.3.0/method_cards/"
    "channels_last.html): tensor cores need NHWC, PyTorch makes NCHW tensors, and 'every time a convolution "
    "operation is called ... the cuDNN library performs a transpose to convert the tensor into NHWC format'; "
    "microsoft/onnxruntime@7c17e33c ('Make CUDA a NHWC EP', #17200) shows the NCHW<>NHWC kernels around each conv")


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


def layer_ops(convs: list[Conv], *, images: int, act_bytes: int, nchw_transposes: bool) -> list[Op]:
    """One operator per convolution of ``images`` images, each timed by its own roofline (FLOPs 2 H W C_in C_out k^2;
    traffic: the input map read, the output map written -- the weights are the caller's), and, where the maps are
    NCHW and the convolution runs on tensor cores (``nchw_transposes``), the layout transposes cuDNN runs around each:
    the input read and written as NHWC, the output read and written back as NCHW (LAYOUT_SOURCE), memory-bound
    kernels apart from the convolution's own.

    Worked example: the SDXL VAE decoder's 128 -> 128 3x3 conv at 1024 x 1024 is 2 x 128 x 128 x 9 x 1024^2 = 309 GFLOP
    and moves 2 x 128 x 1024^2 x 4 B = 1.07 GB in fp32; its transposes move twice that again."""
    ops, transposed = [], 0.0
    for c in convs:
        maps = (c.in_hw**2 * c.c_in + c.out_hw**2 * c.c_out) * images * act_bytes
        # the implicit GEMM's useful share of the tile work a dense GEMM of the same FLOPs would do
        ops.append(Op("convolutions", "gemm", 2.0 * c.macs * images, maps, 1, row_fill=IMPLICIT_GEMM_FRACTION.value))
        transposed += 2 * maps
    if nchw_transposes and convs:
        ops.append(Op("NCHW <-> NHWC transposes", "memory", 0.0, transposed, 2 * len(convs)))
    return ops
