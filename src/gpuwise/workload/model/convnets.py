"""Convolutional networks as the layers they run: every convolution, and the memory passes between them (batch norm
and activation, residual adds, concatenations, up-sampling, pooling), with the exact parameter count.

ResNet comes from a Hugging Face config (``resnet_convolutions``: torchvision's blocks); these families from their
authors' own definitions:

    yolov8   Ultralytics YOLOv8 detection (ultralytics/cfg/models/v8/yolov8.yaml: the backbone and head as
             [from, repeats, module, args] rows, scaled by [depth, width, max_channels]; modules in
             ultralytics/nn/modules: Conv = Conv2d(bias=False) + BatchNorm2d + SiLU; C2f; SPPF; Detect with DFL)
    unet     U-Net (Ronneberger et al. 2015, arXiv 1505.04597) as milesial/Pytorch-UNet builds it: padded 3x3
             convolutions with batch norm, four 2x2 max-pool downs, four 2x2 transposed-convolution ups, 64 base
             channels doubling per level, a 1x1 head

Legend: s = the image's side in pixels, c = channels, k = kernel side.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Conv:
    """One convolution on one image: input and output sides, channels, kernel; ``ends_block``: a residual add and
    activation follow it (ResNet)."""

    in_hw: int
    out_hw: int
    c_in: int
    c_out: int
    kernel: int
    ends_block: bool = False
    bias: bool = False
    norm: bool = True  # followed by batch norm (2 parameters per channel) and an activation
    transposed: bool = False  # a transposed (up-sampling) convolution: each input pixel writes a k x k patch

    @property
    def params(self) -> int:
        return self.c_in * self.c_out * self.kernel**2 + (self.c_out if self.bias else 0) + (
            2 * self.c_out if self.norm else 0)

    @property
    def macs(self) -> float:
        """Multiply-accumulates per image (the 'GFLOPs' Ultralytics and torchvision print are MACs x 2 / MACs)."""
        pixels = self.in_hw if self.transposed else self.out_hw
        return float(pixels**2 * self.c_in * self.c_out * self.kernel**2)


@dataclass
class Net:
    """A network's convolutions in order, its other memory passes (elements read or written per image), and the
    parameters of its layers that are not convolutions."""

    convs: list[Conv] = field(default_factory=list)
    passes: dict[str, float] = field(default_factory=dict)
    extra_params: int = 0
    launches: dict[str, int] = field(default_factory=dict)  # kernels a pass launches forward (default 1)

    def conv(self, hw: int, c_in: int, c_out: int, k: int, stride: int = 1, **kw: Any) -> int:
        out = max(1, hw // stride)
        self.convs.append(Conv(hw, out, c_in, c_out, k, **kw))
        return out

    def elementwise(self, name: str, elements: float) -> None:
        self.passes[name] = self.passes.get(name, 0.0) + elements

    @property
    def params(self) -> int:
        return sum(c.params for c in self.convs) + self.extra_params

    @property
    def macs(self) -> float:
        return sum(c.macs for c in self.convs)


# ---- YOLOv8 ----------------------------------------------------------------------------------------------------

def _divisible(x: float, by: int = 8) -> int:
    """ultralytics.utils.ops.make_divisible: the channel count rounded up to a multiple of 8."""
    return int(math.ceil(x / by) * by)


def _c2f(net: Net, hw: int, c1: int, c2: int, n: int, shortcut: bool) -> None:
    """C2f: a 1x1 conv to 2c, n bottlenecks (two 3x3 convs, a residual add when shortcut) on half of it, every
    output concatenated, a 1x1 conv to c2 (ultralytics/nn/modules/block.py, e = 0.5)."""
    c = int(c2 * 0.5)
    net.conv(hw, c1, 2 * c, 1)
    for _ in range(n):
        net.conv(hw, c, c, 3)
        net.conv(hw, c, c, 3)
        if shortcut:
            net.elementwise("residual adds", 3 * c * hw**2)
    net.elementwise("concatenations", 2 * (2 + n) * c * hw**2)
    net.conv(hw, (2 + n) * c, c2, 1)


def _sppf(net: Net, hw: int, c1: int, c2: int) -> None:
    """SPPF: a 1x1 conv to c1/2, three chained 5x5 max pools, the four maps concatenated, a 1x1 conv to c2."""
    c = c1 // 2
    net.conv(hw, c1, c, 1)
    net.elementwise("pooling", 3 * 2 * c * hw**2)
    net.elementwise("concatenations", 2 * 4 * c * hw**2)
    net.conv(hw, 4 * c, c2, 1)


def _detect(net: Net, levels: list[tuple[int, int]], classes: int, reg_max: int = 16) -> None:
    """Detect: per level a box branch (two 3x3 convs, a 1x1 to 4 x reg_max) and a class branch (two 3x3 convs, a 1x1
    to the classes); the 1x1 heads carry biases; DFL's fixed 1x1 conv of reg_max weights is a parameter too."""
    c_box = max(16, levels[0][1] // 4, reg_max * 4)
    c_cls = max(levels[0][1], min(classes, 100))
    for hw, ch in levels:
        for width, out in ((c_box, 4 * reg_max), (c_cls, classes)):
            net.conv(hw, ch, width, 3)
            net.conv(hw, width, width, 3)
            net.conv(hw, width, out, 1, bias=True, norm=False)
    net.extra_params += reg_max


def yolov8(config: Mapping[str, Any], image: int) -> Net:
    """The YOLOv8 detection model of ``config`` ({depth, width, max_channels, classes}) at ``image`` pixels."""
    depth, width, top = float(config["depth_multiple"]), float(config["width_multiple"]), int(config["max_channels"])
    classes = int(config.get("num_classes", 80))

    def ch(c: int) -> int:
        return _divisible(min(c, top) * width)

    def reps(n: int) -> int:
        return max(round(n * depth), 1)

    net, hw = Net(), image
    hw = net.conv(hw, 3, ch(64), 3, 2)
    hw = net.conv(hw, ch(64), ch(128), 3, 2)
    _c2f(net, hw, ch(128), ch(128), reps(3), True)
    p3 = hw = net.conv(hw, ch(128), ch(256), 3, 2)
    _c2f(net, hw, ch(256), ch(256), reps(6), True)
    p4 = hw = net.conv(hw, ch(256), ch(512), 3, 2)
    _c2f(net, hw, ch(512), ch(512), reps(6), True)
    p5 = hw = net.conv(hw, ch(512), ch(1024), 3, 2)
    _c2f(net, hw, ch(1024), ch(1024), reps(3), True)
    _sppf(net, hw, ch(1024), ch(1024))
    net.elementwise("up-sampling", 5 * ch(1024) * p5**2 + 5 * ch(512) * p4**2)  # read once, write 4x
    _c2f(net, p4, ch(1024) + ch(512), ch(512), reps(3), False)
    _c2f(net, p3, ch(512) + ch(256), ch(256), reps(3), False)
    net.conv(p3, ch(256), ch(256), 3, 2)
    _c2f(net, p4, ch(256) + ch(512), ch(512), reps(3), False)
    net.conv(p4, ch(512), ch(512), 3, 2)
    _c2f(net, p5, ch(512) + ch(1024), ch(1024), reps(3), False)
    _detect(net, [(p3, ch(256)), (p4, ch(512)), (p5, ch(1024))], classes)
    return net


# ---- U-Net -----------------------------------------------------------------------------------------------------

def _double(net: Net, hw: int, c_in: int, c_out: int, bias: bool) -> None:
    net.conv(hw, c_in, c_out, 3, bias=bias)
    net.conv(hw, c_out, c_out, 3, bias=bias)


def unet(config: Mapping[str, Any], image: int) -> Net:
    """The U-Net of ``config`` ({in_channels, classes, base_channels, depth, conv_bias}) on an ``image``-pixel side
    (padded convolutions: the output is as large as the input)."""
    c0, depth = int(config.get("base_channels", 64)), int(config.get("depth", 4))
    c_in, classes, bias = int(config.get("in_channels", 3)), int(config.get("num_classes", 2)), bool(
        config.get("conv_bias", False))
    net, hw, skips = Net(), image, []  # the sides the skip connections come from
    _double(net, hw, c_in, c0, bias)
    channels = c0
    for _ in range(depth):
        skips.append(hw)
        net.elementwise("pooling", channels * hw**2 * 1.25)  # read the map, write a quarter
        hw //= 2
        _double(net, hw, channels, 2 * channels, bias)
        channels *= 2
    for skip_hw in reversed(skips):
        # ConvTranspose2d(c, c/2, 2, stride 2), with its bias
        net.convs.append(Conv(hw, skip_hw, channels, channels // 2, 2, bias=True, norm=False, transposed=True))
        net.elementwise("concatenations", 2 * channels * skip_hw**2)
        hw = skip_hw
        _double(net, hw, channels, channels // 2, bias)
        channels //= 2
    net.conv(hw, channels, classes, 1, bias=True, norm=False)
    return net


NETWORKS = {"yolov8": yolov8, "unet": unet}
DEFAULT_IMAGE = {"resnet": 224, "yolov8": 640, "unet": 512}
"""A family's image side when the job gives none: torchvision's 224, Ultralytics' imgsz 640 (cfg/default.yaml), and
512 for U-Net (a power of two the four pools divide)."""


def resnet_convolutions(config: Mapping[str, Any], image: int = 224) -> list[Conv]:
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
    """The job's image side, else the family's default (DEFAULT_IMAGE)."""
    return image or DEFAULT_IMAGE.get(str(config.get("model_type")), 224)


@functools.lru_cache(maxsize=64)
def _network(config_json: str, image: int) -> Net:
    config = json.loads(config_json)
    build = NETWORKS.get(str(config.get("model_type")))
    if build is not None:
        return build(config, image)
    convs = resnet_convolutions(config, image)
    # torchvision's blocks end in `out += identity; out = relu(out)`: read two maps, write one, then read and write
    ends = sum(c.out_hw**2 * c.c_out for c in convs if c.ends_block)
    blocks = sum(c.ends_block for c in convs)
    return Net(convs=convs, passes={"residual_add_relu": 5.0 * ends}, launches={"residual_add_relu": 2 * blocks})


def network(config: Mapping[str, Any], image: int | None = None) -> Net:
    """The network of ``config`` at an image side (a walk cached per config and side; do not modify it)."""
    return _network(json.dumps(dict(config), sort_keys=True, default=str), image_side(config, image))
