"""Parameters of the vision encoders multimodal decoders carry beside their language model (counted once, run per
image): a ViT of ``layers`` blocks of width w and MLP width i, its patch and position embeddings, and the projector
into the language model's hidden size.

A block holds two norms (LayerNorm: weight and bias; RMSNorm: weight), q/k/v/o projections (w x w each, biased or
not) and an MLP (w x i and i x w, or a gated one with three). Each family's code in transformers 5.24:
SigLIP (Gemma 3; Kimi-K2.5's MoonViT; Qwen3.5; Llama 4): LayerNorms, biases, plain GELU MLP;
Qwen2.5-VL: RMSNorms, biases, gated SwiGLU MLP with biases; Pixtral (Mistral 3): RMSNorms, no biases, gated MLP.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Config = Mapping[str, Any]


def vit_block(width: int, mlp: int, *, layer_norm: bool, bias: bool, gated: bool) -> int:
    norms = 2 * width * (2 if layer_norm else 1)
    attention = 4 * width * width + (4 * width if bias else 0)
    ffn = (3 if gated else 2) * width * mlp + (((2 if gated else 1) * mlp + width) if bias else 0)
    return norms + attention + ffn


def _i(config: Config, key: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if value is None:
        raise KeyError(key)
    return int(value)


def siglip(vision: Config) -> int:
    """SiglipVisionModel without its pooling head: patch conv (+bias), positions, blocks, post LayerNorm."""
    w, patch = _i(vision, "hidden_size", 768), _i(vision, "patch_size", 16)
    blocks = _i(vision, "num_hidden_layers", 12) * vit_block(w, _i(vision, "intermediate_size", 3072),
                                                             layer_norm=True, bias=True, gated=False)
    positions = (_i(vision, "image_size", 224) // patch) ** 2
    return _i(vision, "num_channels", 3) * patch * patch * w + w + positions * w + blocks + 2 * w


def gemma3_tower(config: Config, text_hidden: int) -> int:
    """SigLIP + Gemma3MultiModalProjector (mm_input_projection_weight w x h and an RMSNorm of w)."""
    vision = config.get("vision_config") or {}
    w = _i(vision, "hidden_size", 768)
    return siglip(vision) + w * text_hidden + w


def qwen3_5_tower(vision: Config) -> int:
    """Qwen3_5VisionModel: Conv3d patch embed (+bias), learned positions, SigLIP blocks, a patch merger of m x m
    patches (LayerNorm, two biased linears)."""
    w, patch = _i(vision, "hidden_size"), _i(vision, "patch_size")
    embed = _i(vision, "in_channels", 3) * _i(vision, "temporal_patch_size", 2) * patch * patch * w + w
    embed += _i(vision, "num_position_embeddings") * w
    blocks = _i(vision, "depth") * vit_block(w, _i(vision, "intermediate_size"), layer_norm=True, bias=True,
                                             gated=False)
    merged, out = w * _i(vision, "spatial_merge_size", 2) ** 2, _i(vision, "out_hidden_size")
    return embed + blocks + 2 * w + merged * merged + merged + merged * out + out


def qwen2_5_vl_tower(vision: Config) -> int:
    """Qwen2_5_VisionTransformer: bias-free Conv3d patch embed, RMSNorm blocks with a biased SwiGLU MLP, and a
    merger (RMSNorm, two biased linears)."""
    w, patch = _i(vision, "hidden_size"), _i(vision, "patch_size")
    embed = _i(vision, "in_chans", 3) * _i(vision, "temporal_patch_size", 2) * patch * patch * w
    blocks = _i(vision, "depth") * vit_block(w, _i(vision, "intermediate_size"), layer_norm=False, bias=True,
                                             gated=True)
    merged, out = w * _i(vision, "spatial_merge_size", 2) ** 2, _i(vision, "out_hidden_size")
    return embed + blocks + w + merged * merged + merged + merged * out + out


def pixtral_tower(config: Config, text_hidden: int) -> int:
    """PixtralVisionModel (bias-free patch conv, RMSNorm ln_pre and blocks, gated MLP) + Mistral3's projector:
    RMSNorm, a 2x2 patch merger (m^2 w x w) and two linears into the text width."""
    vision = config.get("vision_config") or {}
    w, patch = _i(vision, "hidden_size"), _i(vision, "patch_size")
    blocks = _i(vision, "num_hidden_layers") * vit_block(w, _i(vision, "intermediate_size"), layer_norm=False,
                                                         bias=False, gated=True)
    tower = _i(vision, "num_channels", 3) * patch * patch * w + w + blocks
    merge, bias = _i(config, "spatial_merge_size", 2), bool(config.get("multimodal_projector_bias", False))
    projector = w + merge * merge * w * w + w * text_hidden + text_hidden * text_hidden + 2 * text_hidden * bias
    return tower + projector


def llama4_tower(config: Config, text_hidden: int) -> int:
    """Llama4VisionModel: unfold + bias-free patch linear, class token, positions, pre/post LayerNorms, SigLIP-like
    blocks, the pixel-shuffle MLP, and the multimodal projector into the text width."""
    vision = config.get("vision_config") or {}
    w, patch, mlp = _i(vision, "hidden_size"), _i(vision, "patch_size"), _i(vision, "intermediate_size")
    positions = (_i(vision, "image_size") // patch) ** 2 + 1
    tower = _i(vision, "num_channels", 3) * patch * patch * w + w + positions * w + 4 * w
    tower += _i(vision, "num_hidden_layers") * vit_block(w, mlp, layer_norm=True, bias=True, gated=False)
    adapter = mlp * _i(vision, "projector_input_dim") + _i(vision, "projector_output_dim") ** 2
    return tower + adapter + _i(vision, "vision_output_dim") * text_hidden


def moonvit_tower(config: Config, text_hidden: int) -> int:
    """Kimi-K2.5's MoonViT (biased patch conv, a 64 x 64 learned position grid, SigLIP-like blocks, final LayerNorm)
    and its patch-merger projector (LayerNorm, two biased linears). transformers reads its own defaults for the
    vt_* keys, which equal the released config."""
    vision = config.get("vision_config") or {}
    w, patch = _i(vision, "vt_hidden_size", 1152), _i(vision, "patch_size", 14)
    grid = _i(vision, "init_pos_emb_height", 64) * _i(vision, "init_pos_emb_width", 64)
    blocks = _i(vision, "vt_num_hidden_layers", 27) * vit_block(w, _i(vision, "vt_intermediate_size", 4304),
                                                                layer_norm=True, bias=True, gated=False)
    tower = 3 * patch * patch * w + w + grid * w + blocks + 2 * w
    kernel = vision.get("merge_kernel_size") or [2, 2]
    merged = w * int(kernel[0]) * int(kernel[1])
    projector = 2 * _i(vision, "mm_hidden_size", w) + merged * merged + merged + merged * text_hidden + text_hidden
    return tower + projector
