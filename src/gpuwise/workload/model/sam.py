"""Segment Anything's image encoder (SAM ViT-B/L/H; transformers ``SamVisionModel``, model_type ``sam_vision_model``):
a ViT over a 64 x 64 grid of 16-pixel patches of a 1024-pixel image, attending inside 14 x 14 windows except in four
global layers, with relative position tables and a convolutional neck to 256 channels.

Parameters, block by block (segment_anything/modeling/image_encoder.py; transformers modeling_sam.py):
    patch embedding   Conv2d(3, D, 16, stride 16) with bias; absolute positions 64 x 64 x D
    each layer        two LayerNorms (2D each); qkv D x 3D and proj D x D, with biases; relative positions
                      2 x (2 s - 1) x head_dim, s = the window (14) or, in a global layer, the grid (64); MLP D x m
                      and m x D with biases
    neck              Conv2d(D, 256, 1) and Conv2d(256, 256, 3), no biases, each with a LayerNorm2d (2 x 256)
Worked check: ViT-H (D 1280, 32 layers, 16 heads, m 5120) is 637,026,048 -- what transformers builds on the meta
device and timm's samvit_huge_patch16 reports (637.03M).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuwise.workload.model.blocks import Attention, Block, FeedForward
from gpuwise.workload.model.counts import ParamCount, need

SAM_FAMILY = "sam_vision_model"


def _ints(config: Mapping[str, Any]) -> tuple[int, int, int, int, int, int, int, int]:
    d, layers, heads = int(need(config, "hidden_size")), int(need(config, "num_hidden_layers")), int(
        need(config, "num_attention_heads"))
    mlp = int(config.get("mlp_dim") or d * float(config.get("mlp_ratio", 4.0)))
    image, patch = int(config.get("image_size", 1024)), int(config.get("patch_size", 16))
    window, out = int(config.get("window_size", 14)), int(config.get("output_channels", 256))
    return d, layers, heads, mlp, image, patch, window, out


def global_layers(config: Mapping[str, Any]) -> set[int]:
    return {int(i) for i in config.get("global_attn_indexes", ())}


def sam_params(config: Mapping[str, Any]) -> ParamCount:
    d, layers, heads, mlp, image, patch, window, out = _ints(config)
    grid, head_dim = image // patch, d // heads
    embedding = 3 * patch * patch * d + d + grid * grid * d
    linear = layers * (4 * d * d + 3 * d + d + d * mlp + mlp + mlp * d + d)
    other = layers * 4 * d + sum(2 * (2 * (grid if i in global_layers(config) else window) - 1) * head_dim
                                 for i in range(layers))
    neck = d * out + 2 * out + out * out * 9 + 2 * out
    total = embedding + linear + other + neck
    return ParamCount(embedding, linear, 0, other + neck, total, ())


def sam_blocks(config: Mapping[str, Any]) -> tuple[Block, ...]:
    """The windowed layers (each token attends the 14 x 14 = 196 of its window) and the global ones."""
    d, layers, heads, mlp, _, _, window, _ = _ints(config)
    head_dim = d // heads
    ffn = FeedForward(mlp, False, 0, 0, 0)
    glob = len(global_layers(config) & set(range(layers)))
    windowed = Attention("gqa", heads, heads, head_dim, head_dim, window=window * window, bias="all")
    full = Attention("gqa", heads, heads, head_dim, head_dim, bias="all")
    return tuple(b for b in (Block(layers - glob, windowed, ffn, caches=False), Block(glob, full, ffn, caches=False))
                 if b.count)


def sam_shape(config: Mapping[str, Any]) -> dict[str, Any]:
    d, layers, heads, mlp, image, patch, _, _ = _ints(config)
    return dict(hidden=d, layers=layers, heads=heads, kv_heads=heads, head_dim=d // heads, intermediate=mlp,
                max_positions=(image // patch) ** 2)
