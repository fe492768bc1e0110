"""Diffusion pipeline components counted from their diffusers configs: the SDXL-style ``UNet2DConditionModel``, the
FLUX ``FluxTransformer2DModel`` and the ``AutoencoderKL`` decoder, each as a walk over its modules that yields
parameters and the FLOPs of one forward.

FLOPs count matmuls and convolutions at 2 per multiply-accumulate (norms, softmax and elementwise are
memory-bound and left to the roofline's traffic terms):

- a k x k convolution making an H x W x C_out map from C_in channels: 2 H W C_in C_out k^2;
- a linear layer over N tokens: 2 N d_in d_out; attention over N queries and M keys of width C: 4 N M C
  (Q K^T and P V);
- SDXL BasicTransformerBlock of width C at N tokens with T text tokens of width D (Podell et al. 2023,
  arXiv 2307.01952 sec. 2.1; diffusers attention.py): self q,k,v,o 4C^2, cross q,o 2C^2, GEGLU C->8C and 4C->C
  12C^2 per token, plus 4 N^2 C self-attention, 4 N T C cross-attention and 4 T D C for the text keys and values;
- FLUX (black-forest-labs/flux src/flux/model.py): a double block's two streams and a single block both cost
  24 d^2 per token plus 4 L^2 d attention over the joint L = image + text tokens.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Tally:
    """What a walk over a module tree adds up."""

    params: int = 0
    linear_weights: int = 0  # nn.Linear weights: what bitsandbytes NF4 / LLM.int8 quantize
    kept_by_casting: int = 0  # parameters fp8 layerwise casting leaves in the compute dtype (norm*, embeddings)
    gemm_flops: float = 0.0  # linear layers and convolutions, one forward
    attention_flops: float = 0.0
    blocks: list[int] = field(default_factory=list)  # parameters of each repeated block (sequential offload's unit)
    kernels: int = 0  # kernel launches of one forward: each layer, plus one elementwise pass per norm
    live_elements: float = 0.0  # the most activation elements alive at once inside one layer, per sample
    held_elements: float = 0.0  # activations held across layers (the UNet's skip connections), per sample
    elementwise_elements: float = 0.0  # elements the memory-bound passes (norms, activations, residuals) read+write
    dispatches: int = 0  # aten operators one forward dispatches from Python (DISPATCHES), views included

    def live(self, elements: float) -> None:
        self.live_elements = max(self.live_elements, elements)

    def linear(self, d_in: int, d_out: int, tokens: float, *, bias: bool = True, kept: bool = False) -> None:
        size = d_in * d_out + (d_out if bias else 0)
        self.params += size
        self.linear_weights += d_in * d_out
        self.kept_by_casting += size if kept else 0
        self.gemm_flops += 2.0 * tokens * d_in * d_out
        self.kernels += 1
        self.dispatches += DISPATCHES["Linear"]

    def conv(self, c_in: int, c_out: int, kernel: int, out_hw: float) -> None:
        self.params += c_in * c_out * kernel * kernel + c_out
        self.gemm_flops += 2.0 * out_hw * c_in * c_out * kernel * kernel
        self.kernels += 1
        self.dispatches += DISPATCHES["Conv2d"]

    def norm(self, width: int, *, bias: bool = True, tokens: float = 0.0, module: str = "GroupNorm") -> None:
        """A norm over ``tokens`` x ``width`` and the activation, modulation or residual pass after it: each reads
        and writes the tensor once."""
        self.elementwise_elements += 4 * tokens * width
        self.params += width * (2 if bias else 1)
        self.kept_by_casting += width * (2 if bias else 1)
        self.kernels += 2  # the norm and the activation / modulation that follows it
        self.dispatches += DISPATCHES[module] + DISPATCHES["SiLU"]

    def attention(self, queries: float, keys: float, width: int, *, module: str = "Attention") -> None:
        self.attention_flops += 4.0 * queries * keys * width
        self.kernels += 1
        self.dispatches += DISPATCHES[module]


DISPATCHES = {
    "Linear": 4, "Conv2d": 1, "GroupNorm": 1, "LayerNorm": 1, "RMSNorm": 8, "SiLU": 1, "Attention": 10,
    "ResnetBlock2D": 5, "Transformer2DModel": 6, "BasicTransformerBlock": 6, "FluxAttention": 41,
    "FluxTransformerBlock": 40, "FluxSingleTransformerBlock": 15, "FluxEmbeddings": 110,
}
"""Aten operators each diffusers module dispatches itself, its children apart (views included), traced over one forward
of diffusers 0.42.1's UNet2DConditionModel (SDXL base config, 5,332 in all) and FluxTransformer2DModel (FLUX.1-dev,
6,942) by benchmarks/trace_diffusers.py: a Linear on a 3-D input is view, t, addmm, view; an Attention processor
(AttnProcessor2_0) 10 besides its linears; a BasicTransformerBlock 3 and its GEGLU 3; FluxAttention 41 besides its
linears and q/k RMSNorms (8 each: to fp32, pow, mean, add, rsqrt, mul, to, mul); a double-stream block 22 and its
two AdaLayerNormZero 6 each, two LayerNorms and GELUs per stream; a single-stream block 7, its AdaLayerNormZeroSingle
6, a LayerNorm and a GELU; FLUX's position and timestep embeddings 110."""


def _int(config: Mapping[str, Any], key: str, default: int) -> int:
    value = config.get(key, default)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


# ---- FLUX -------------------------------------------------------------------------------------------------
def flux(config: Mapping[str, Any], *, image_tokens: float = 4096, text_tokens: float = 512) -> Tally:
    """FluxTransformer2DModel: 19 double-stream and 38 single-stream blocks of width d = heads x head_dim."""
    d = _int(config, "num_attention_heads", 24) * _int(config, "attention_head_dim", 128)
    head_dim, length = _int(config, "attention_head_dim", 128), image_tokens + text_tokens
    t = Tally()
    t.dispatches += DISPATCHES["FluxEmbeddings"]
    t.linear(_int(config, "in_channels", 64), d, image_tokens)  # x_embedder
    t.linear(_int(config, "joint_attention_dim", 4096), d, text_tokens)  # context_embedder
    embedders = 2 + (2 if config.get("guidance_embeds", True) else 0)  # timestep (+ guidance) MLPs: 256 -> d -> d
    for _ in range(embedders // 2):
        t.linear(256, d, 1)
        t.linear(d, d, 1)
    t.linear(_int(config, "pooled_projection_dim", 768), d, 1)  # pooled CLIP text -> d -> d
    t.linear(d, d, 1)
    for _ in range(_int(config, "num_layers", 19)):
        before = t.params
        t.dispatches += DISPATCHES["FluxTransformerBlock"]
        for tokens in (image_tokens, text_tokens):  # the image and the text stream have their own weights
            t.linear(d, 6 * d, 1, kept=True)  # AdaLN-Zero modulation (norm1 / norm1_context)
            for _ in range(4):  # q, k, v, out
                t.linear(d, d, tokens)
            t.norm(head_dim, bias=False, tokens=tokens * d / head_dim, module="RMSNorm")  # RMSNorm on q
            t.norm(head_dim, bias=False, tokens=tokens * d / head_dim, module="RMSNorm")  # and on k
            t.linear(d, 4 * d, tokens)
            t.linear(4 * d, d, tokens)
            # two LayerNorms with their scale/shift, two gated residuals (4 passes over d), GELU over 4 d
            t.elementwise_elements += 2 * tokens * (4 * d + 4 * d)
        t.attention(length, length, d, module="FluxAttention")
        t.blocks.append(t.params - before)
    for _ in range(_int(config, "num_single_layers", 38)):
        before = t.params
        t.dispatches += DISPATCHES["FluxSingleTransformerBlock"]
        t.linear(d, 3 * d, 1, kept=True)  # modulation (norm.linear)
        for _ in range(3):
            t.linear(d, d, length)
        t.norm(head_dim, bias=False, tokens=length * d / head_dim, module="RMSNorm")  # RMSNorm on q
        t.norm(head_dim, bias=False, tokens=length * d / head_dim, module="RMSNorm")  # and on k
        t.linear(d, 4 * d, length)  # proj_mlp
        # LayerNorm with scale/shift and the gated residual (2 passes over d), GELU over 4 d, the 5 d concat
        t.elementwise_elements += 2 * length * (2 * d + 4 * d + 5 * d)
        t.linear(5 * d, d, length)  # proj_out over [attention, MLP]
        t.attention(length, length, d, module="FluxAttention")
        t.blocks.append(t.params - before)
        # alive in a single block: input, norm, q, k, v, attention out (6 L d), MLP hidden and GELU (8 L d),
        # the [attention, MLP] concat (5 L d) and the output (L d)
        t.live(20 * length * d)
    t.linear(d, 2 * d, 1, kept=True)  # norm_out modulation
    t.linear(d, _int(config, "in_channels", 64), image_tokens, kept=True)  # proj_out (skipped by casting)
    return t


# ---- SDXL UNet --------------------------------------------------------------------------------------------
def _resnet(t: Tally, c_in: int, c_out: int, hw: float, temb: int | None) -> None:
    """ResnetBlock2D: GroupNorm, 3x3 conv, (time-embedding projection), GroupNorm, 3x3 conv, 1x1 shortcut."""
    t.dispatches += DISPATCHES["ResnetBlock2D"]
    t.norm(c_in, tokens=hw)
    t.conv(c_in, c_out, 3, hw)
    if temb:
        t.linear(temb, c_out, 1)
    t.norm(c_out, tokens=hw)
    t.conv(c_out, c_out, 3, hw)
    if c_in != c_out:
        t.conv(c_in, c_out, 1, hw)
    t.live(hw * (2 * c_in + 2 * c_out))  # input, normalised input, first conv, output


def _transformer(t: Tally, width: int, depth: int, hw: float, text_tokens: float, text_width: int) -> None:
    """Transformer2DModel with linear proj_in/proj_out and ``depth`` BasicTransformerBlocks (self-attention,
    cross-attention to the text, GEGLU feed-forward)."""
    t.dispatches += DISPATCHES["Transformer2DModel"] + depth * DISPATCHES["BasicTransformerBlock"]
    t.norm(width, tokens=hw)
    t.linear(width, width, hw)
    for _ in range(depth):
        before = t.params
        t.norm(width, tokens=hw, module="LayerNorm")
        for _ in range(3):
            t.linear(width, width, hw, bias=False)
        t.linear(width, width, hw)
        t.attention(hw, hw, width)
        t.norm(width, tokens=hw, module="LayerNorm")
        t.linear(width, width, hw, bias=False)
        t.linear(text_width, width, text_tokens, bias=False)
        t.linear(text_width, width, text_tokens, bias=False)
        t.linear(width, width, hw)
        t.attention(hw, text_tokens, width)
        t.norm(width, tokens=hw, module="LayerNorm")
        t.linear(width, 8 * width, hw)  # GEGLU: value and gate
        t.linear(4 * width, width, hw)
        t.blocks.append(t.params - before)
        # alive in a block: input, norm, q, k, v, attention out (6 N C), GEGLU projection (8 N C), gated (4 N C),
        # output (N C)
        t.live(19 * hw * width)
    t.linear(width, width, hw)


def _levels(config: Mapping[str, Any]) -> list[int]:
    depths = config.get("transformer_layers_per_block", 1)
    channels = [int(c) for c in config.get("block_out_channels", (320, 640, 1280))]
    kinds = list(config.get("down_block_types", ()))
    if isinstance(depths, int):
        depths = [depths] * len(channels)
    return [int(d) if i < len(kinds) and "CrossAttn" in str(kinds[i]) else 0 for i, d in enumerate(depths)]


def unet(config: Mapping[str, Any], *, latent_hw: int = 128, text_tokens: float = 77) -> Tally:
    """UNet2DConditionModel as SDXL configures it (text_time added embedding, linear projections)."""
    channels = [int(c) for c in config.get("block_out_channels", (320, 640, 1280))]
    depths, per_level = _levels(config), _int(config, "layers_per_block", 2)
    text_width, base = _int(config, "cross_attention_dim", 2048), channels[0]
    temb = 4 * base
    t = Tally()
    t.conv(_int(config, "in_channels", 4), base, 3, latent_hw**2)
    t.linear(base, temb, 1)
    t.linear(temb, temb, 1)
    if config.get("addition_embed_type") == "text_time":
        t.linear(_int(config, "projection_class_embeddings_input_dim", 2816), temb, 1)
        t.linear(temb, temb, 1)
    hw, c_prev, skips = latent_hw, base, [base]
    t.held_elements = base * hw**2  # each down-path output waits for its up-path block
    for level, (c, depth) in enumerate(zip(channels, depths, strict=True)):
        for _ in range(per_level):
            _resnet(t, c_prev, c, hw**2, temb)
            if depth:
                _transformer(t, c, depth, hw**2, text_tokens, text_width)
            c_prev = c
            skips.append(c)
            t.held_elements += c * hw**2
        if level < len(channels) - 1:
            hw //= 2
            t.conv(c, c, 3, hw**2)  # Downsample2D, stride 2
            skips.append(c)
            t.held_elements += c * hw**2
    mid = channels[-1]
    _resnet(t, mid, mid, hw**2, temb)
    _transformer(t, mid, depths[-1] or 1, hw**2, text_tokens, text_width)
    _resnet(t, mid, mid, hw**2, temb)
    for level, (c, depth) in enumerate(zip(reversed(channels), reversed(depths), strict=True)):
        for _ in range(per_level + 1):
            _resnet(t, c_prev + skips.pop(), c, hw**2, temb)
            if depth:
                _transformer(t, c, depth, hw**2, text_tokens, text_width)
            c_prev = c
        if level < len(channels) - 1:
            hw *= 2
            t.conv(c, c, 3, hw**2)  # Upsample2D: nearest x2, then a 3x3 conv
    t.norm(base)
    t.conv(base, _int(config, "out_channels", 4), 3, hw**2)
    return t


# ---- AutoencoderKL ----------------------------------------------------------------------------------------
def _vae_attention(t: Tally, width: int, hw: float) -> None:
    t.norm(width, tokens=hw)
    for _ in range(4):  # q, k, v, out: one head over every pixel of the latent
        t.linear(width, width, hw)
    t.attention(hw, hw, width)


def _mid(t: Tally, width: int, hw: float) -> None:
    _resnet(t, width, width, hw, None)
    _vae_attention(t, width, hw)
    _resnet(t, width, width, hw, None)


def _encoder(channels: list[int], config: Mapping[str, Any], latent: int, per_level: int) -> Tally:
    """Parameters only (gpuwise models text-to-image, which never encodes an image)."""
    t = Tally()
    t.conv(_int(config, "in_channels", 3), channels[0], 3, 0)
    c_prev = channels[0]
    for level, c in enumerate(channels):
        for _ in range(per_level):
            _resnet(t, c_prev, c, 0, None)
            c_prev = c
        if level < len(channels) - 1:
            t.conv(c, c, 3, 0)  # Downsample2D
    _mid(t, channels[-1], 0)
    t.norm(channels[-1])
    t.conv(channels[-1], 2 * latent, 3, 0)
    if config.get("use_quant_conv", True):
        t.conv(2 * latent, 2 * latent, 1, 0)
    return t


def _decoder(channels: list[int], config: Mapping[str, Any], latent: int, per_level: int, image_hw: int) -> Tally:
    levels = len(channels)
    hw = image_hw // 2 ** (levels - 1)
    t = Tally()
    if config.get("use_post_quant_conv", True):
        t.conv(latent, latent, 1, hw**2)
    t.conv(latent, channels[-1], 3, hw**2)
    _mid(t, channels[-1], hw**2)
    c_prev = channels[-1]
    for level, c in enumerate(reversed(channels)):
        for _ in range(per_level + 1):
            _resnet(t, c_prev, c, hw**2, None)
            c_prev = c
        if level < levels - 1:
            hw *= 2
            t.conv(c, c, 3, hw**2)  # Upsample2D
            t.live(3 * c * hw**2)  # the upsampled map, its conv and the next resnet's norm at the new size
    t.norm(channels[0])
    t.conv(channels[0], _int(config, "out_channels", 3), 3, hw**2)
    return t


def vae(config: Mapping[str, Any], *, image_hw: int = 1024) -> tuple[Tally, Tally]:
    """(encoder, decoder) of an AutoencoderKL; the decoder's FLOPs are one decode of an ``image_hw`` image."""
    channels = [int(c) for c in config.get("block_out_channels", (128, 256, 512, 512))]
    latent, per_level = _int(config, "latent_channels", 4), _int(config, "layers_per_block", 2)
    return _encoder(channels, config, latent, per_level), _decoder(channels, config, latent, per_level, image_hw)
