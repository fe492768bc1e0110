"""What a diffusers image module moves in one forward besides its matmul FLOPs: its convolutions layer by layer (the
UNet's resnets and samplers, the VAE decoder's), and the bytes of the memory-bound passes between the matmuls, each
counted from the module's own forward as diffusers runs it (huggingface/diffusers@58eb52c0, 0.40.0.dev0).

Legend: E = elements of the tensor a pass works on, a = bytes per activation (2 in fp16/bf16, 4 in fp32); a pass
costs what it reads plus what it writes.

- GroupNorm: 3 E a -- PyTorch's CUDA kernel (aten/src/ATen/native/cuda/group_norm_kernel.cu) reads x for the
  moments (RowwiseMomentsCUDAKernel), then reads it again and writes y = a x + b;
- LayerNorm, SiLU, GELU, a product with a broadcast vector, a division by a scalar, a copy: 2 E a; a residual add
  or the product of two tensors: 3 E a; nearest 2x up-sampling: E a in, 4 E a out;
- RMSNorm (diffusers normalization.py RMSNorm): to(float32) E(a+4), pow 8E, mean 4E, x * rsqrt promoted to fp32
  E(a+4), to(dtype) E(4+a), x weight 2Ea: 34 E bytes at a = 2;
- rotary embedding (embeddings.py apply_rotary_emb, use_real): -x_imag E a, stack 2 E a, x.float() E(a+4),
  x cos 8E, x_rotated.float() E(a+4), x sin 8E, the sum 12E, to(dtype) E(4+a): 52 E bytes at a = 2;
- SDPA reads q, k, v and writes its output once (the fused kernels keep no score matrix).

Worked example: one FLUX single-stream block at 1024 px (L = 4608 tokens of d = 3072, bf16) moves 123 L d a =
3.48 GB, of which the fp32 q/k norms and rotary embeddings are 86 L d a; the 38 such blocks and 19 double blocks
move about 200 GB per step, ~70 ms at an H100's ~3 TB/s.

ComfyUI runs its own modules (comfy/ldm); they are charged the same passes here, an approximation: its rotary
embedding also computes in fp32, while its RMSNorm may be one fused kernel where PyTorch has one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuwise.workload.diffusion.denoisers import _int, _levels  # the workload walk's own config readers
from gpuwise.workload.model.convnets import Conv

FP32 = 4


@dataclass
class Forward:
    """One forward of one image: its convolutions and the bytes its memory-bound passes move."""

    act_bytes: int
    convs: list[Conv] = field(default_factory=list)
    moved_bytes: float = 0.0
    kernels: int = 0

    def conv(self, side: int, c_in: int, c_out: int, kernel: int, stride: int = 1) -> None:
        self.convs.append(Conv(side, max(1, side // stride), c_in, c_out, kernel, bias=True, norm=False))

    def passes(self, elements: float, per_element: float, kernels: int = 1) -> None:
        """``kernels`` passes over ``elements`` moving ``per_element`` activations' bytes for each element."""
        self.moved_bytes += elements * per_element * self.act_bytes
        self.kernels += kernels

    def rms_norm(self, elements: float) -> None:
        a = self.act_bytes
        self.moved_bytes += elements * ((a + FP32) + 2 * FP32 + FP32 + (a + FP32) + (FP32 + a) + 2 * a)
        self.kernels += 6

    def rotary(self, elements: float) -> None:
        a = self.act_bytes
        self.moved_bytes += elements * (a + 2 * a + (a + FP32) + 2 * FP32 + (a + FP32) + 2 * FP32 + 3 * FP32
                                        + (FP32 + a))
        self.kernels += 8


# ---- FLUX -------------------------------------------------------------------------------------------------
def _flux_attention(f: Forward, length: float, d: int) -> None:
    """FluxAttnProcessor over the joint sequence: q/k RMSNorms, rotary q and k (fp32), SDPA, the output copy."""
    f.rms_norm(2 * length * d)
    f.rotary(2 * length * d)
    f.passes(length * d, 4, 0)  # SDPA: q, k, v in, the output out
    f.passes(length * d, 2)  # flatten(2, 3) of the permuted output: a copy


def flux(config: Mapping[str, Any], *, image_tokens: float, text_tokens: float, act_bytes: int) -> Forward:
    """FluxTransformer2DModel: per double block and stream, AdaLayerNormZero (LayerNorm, scale, shift), the q/k/v
    concat with the other stream, the gated residual, norm2 with scale and shift, tanh-GELU over 4d and the gated
    residual of the MLP; per single block the stream concat, the modulated norm, GELU, the [attention, MLP] concat
    over 5d and the gated residual."""
    d = _int(config, "num_attention_heads", 24) * _int(config, "attention_head_dim", 128)
    length = image_tokens + text_tokens
    f = Forward(act_bytes)
    for _ in range(_int(config, "num_layers", 19)):
        f.passes(length * d, 6, 3)  # norm1 / norm1_context: LayerNorm, * (1 + scale), + shift
        f.passes(3 * length * d, 2, 3)  # cat q, k, v of the text and image streams
        _flux_attention(f, length, d)
        f.passes(length * d, 2 + 3, 4)  # gate_msa * attn, + residual
        f.passes(length * d, 6, 6)  # norm2: LayerNorm, * (1 + scale_mlp), + shift_mlp
        f.passes(4 * length * d, 2, 2)  # tanh-GELU over the 4d hidden
        f.passes(length * d, 2 + 3, 4)  # gate_mlp * ff, + residual
    for _ in range(_int(config, "num_single_layers", 38)):
        f.passes(length * d, 2 + 6, 4)  # cat the streams; the modulated LayerNorm
        f.passes(4 * length * d, 2)  # GELU
        _flux_attention(f, length, d)
        f.passes(5 * length * d, 2)  # cat [attention, MLP]
        f.passes(length * d, 2 + 3, 2)  # gate * proj_out, + residual
    f.passes(image_tokens * d, 6, 3)  # norm_out
    return f


# ---- UNet2DConditionModel (SDXL) ------------------------------------------------------------------------------
def resnet(f: Forward, c_in: int, c_out: int, side: int, temb: bool) -> None:
    """ResnetBlock2D: GroupNorm, SiLU, 3x3 conv, (+ the time embedding), GroupNorm, SiLU, 3x3 conv, (1x1 shortcut),
    (input + hidden) / output_scale_factor."""
    pixels = side * side
    f.passes(c_in * pixels, 3 + 2, 3)
    f.conv(side, c_in, c_out, 3)
    if temb:
        f.passes(c_out * pixels, 2)
    f.passes(c_out * pixels, 3 + 2, 3)
    f.conv(side, c_out, c_out, 3)
    if c_in != c_out:
        f.conv(side, c_in, c_out, 1)
    f.passes(c_out * pixels, 3 + 2, 2)


def _transformer(f: Forward, width: int, depth: int, side: int, text_tokens: float) -> None:
    """Transformer2DModel (linear projections): GroupNorm, the NCHW -> tokens copy, ``depth`` BasicTransformerBlocks,
    the copy back and the residual. A block: three LayerNorms; self- and cross-attention, each with SDPA's traffic,
    the heads' transpose copy, the rescale division and the residual; GEGLU (GELU over 4C, the product) and the
    residual."""
    tokens = side * side * width  # elements of one token map
    f.passes(tokens, 3 + 2 + 2 + 3, 4)
    for _ in range(depth):
        f.passes(tokens, 3 * 2, 3)  # norm1, norm2, norm3
        f.passes(tokens, 4 + 2 + 2 + 3, 3)  # self-attention: SDPA, transpose copy, / rescale, + residual
        f.passes(tokens, 2 + 2 + 2 + 3, 3)  # cross-attention: q in and the output out (the text keys are small)
        f.passes(tokens, 4 * 2 + 4 * 3 + 3, 3)  # GEGLU: GELU of the 4C gate, value * gate, + residual
    del text_tokens  # 77 keys: their traffic is the linears'


def unet(config: Mapping[str, Any], *, latent_side: int, text_tokens: float, act_bytes: int) -> Forward:
    """UNet2DConditionModel: conv_in, the down path (resnets, transformers, stride-2 convs), the mid block, the up
    path (the skip concat before each resnet, nearest up-sampling and a conv), GroupNorm + SiLU and conv_out."""
    channels = [int(c) for c in config.get("block_out_channels", (320, 640, 1280))]
    depths, per_level = _levels(config), _int(config, "layers_per_block", 2)
    f, side, c_prev = Forward(act_bytes), latent_side, channels[0]
    f.conv(side, _int(config, "in_channels", 4), channels[0], 3)
    skips = [channels[0]]
    for level, (c, depth) in enumerate(zip(channels, depths, strict=True)):
        for _ in range(per_level):
            resnet(f, c_prev, c, side, True)
            if depth:
                _transformer(f, c, depth, side, text_tokens)
            c_prev = c
            skips.append(c)
        if level < len(channels) - 1:
            f.conv(side, c, c, 3, stride=2)
            side //= 2
            skips.append(c)
    resnet(f, c_prev, c_prev, side, True)
    _transformer(f, c_prev, depths[-1] or 1, side, text_tokens)
    resnet(f, c_prev, c_prev, side, True)
    for level, (c, depth) in enumerate(zip(reversed(channels), reversed(depths), strict=True)):
        for _ in range(per_level + 1):
            skip = skips.pop()
            f.passes((c_prev + skip) * side * side, 2)  # torch.cat([hidden, skip], dim=1)
            resnet(f, c_prev + skip, c, side, True)
            if depth:
                _transformer(f, c, depth, side, text_tokens)
            c_prev = c
        if level < len(channels) - 1:
            f.passes(c * side * side, 1 + 4)  # nearest 2x
            side *= 2
            f.conv(side, c, c, 3)
    f.passes(channels[0] * side * side, 3 + 2, 4)
    f.conv(side, channels[0], _int(config, "out_channels", 4), 3)
    return f


# ---- AutoencoderKL decoder ------------------------------------------------------------------------------------
def decoder(config: Mapping[str, Any], *, image_side: int, act_bytes: int) -> Forward:
    """The VAE decoder: post_quant_conv, conv_in, the mid block (resnet, one-head attention over every latent pixel
    with its GroupNorm, transposes, residual and rescale, resnet), per level layers_per_block + 1 resnets and an
    Upsample2D (nearest 2x, a 3x3 conv), GroupNorm + SiLU and conv_out."""
    channels = [int(c) for c in config.get("block_out_channels", (128, 256, 512, 512))]
    latent, per_level = _int(config, "latent_channels", 4), _int(config, "layers_per_block", 2)
    side = image_side // 2 ** (len(channels) - 1)
    f = Forward(act_bytes)
    if config.get("use_post_quant_conv", True):
        f.conv(side, latent, latent, 1)
    f.conv(side, latent, channels[-1], 3)
    resnet(f, channels[-1], channels[-1], side, False)
    f.passes(channels[-1] * side * side, 3 + 4 + 2 + 2 + 3 + 2, 6)  # the mid attention's passes
    resnet(f, channels[-1], channels[-1], side, False)
    c_prev = channels[-1]
    for level, c in enumerate(reversed(channels)):
        for _ in range(per_level + 1):
            resnet(f, c_prev, c, side, False)
            c_prev = c
        if level < len(channels) - 1:
            f.passes(c * side * side, 1 + 4)
            side *= 2
            f.conv(side, c, c, 3)
    f.passes(channels[0] * side * side, 3 + 2, 4)
    f.conv(side, channels[0], _int(config, "out_channels", 3), 3)
    return f
