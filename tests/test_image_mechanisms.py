"""The image pipelines' convolution, memory-pass and attention mechanisms against independent truths: convolution FLOPs
and map bytes worked by hand from the layer shapes (2 C_in C_out k^2 H W), the decoder's and UNet's layer counts
read off diffusers' module structure, the Tally's FLOPs (a second walk that must agree), and the byte count of each
pass as diffusers' forward code runs it (huggingface/diffusers@58eb52c0)."""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.estimate.image.layers import Forward, decoder, flux, resnet, unet
from gpuwise.estimate.image.operators import FAST_F32_PRODUCTS, forward_ops, runs_nchw_transposes, sdpa_kernel
from gpuwise.estimate.speed.convolutions import IMPLICIT_GEMM_FRACTION, layer_ops
from gpuwise.workload.diffusion.pipeline import find_pipeline
from gpuwise.workload.model.convnets import Conv

MIB_1024 = 1024 * 1024  # pixels of a 1024 x 1024 map


def _pipeline(name: str):  # type: ignore[no-untyped-def]
    found = find_pipeline(name)
    assert found is not None
    return found


def test_a_conv_layer_worked_by_hand() -> None:
    """The SDXL VAE decoder's last 128 -> 128 3x3 conv at 1024 x 1024 in fp32: 2 x 128 x 128 x 9 x 1024^2 FLOPs;
    it reads a 128-channel map and writes one (4 bytes each); NCHW makes cuDNN transpose both ways around it."""
    conv = Conv(1024, 1024, 128, 128, 3)
    ops = layer_ops([conv], images=1, act_bytes=4, nchw_transposes=True)
    assert ops[0].flops == 2 * 128 * 128 * 9 * MIB_1024 == 309_237_645_312
    assert ops[0].bytes == 2 * 128 * MIB_1024 * 4
    assert ops[0].row_fill == IMPLICIT_GEMM_FRACTION.value
    assert ops[1].bytes == 2 * ops[0].bytes and ops[1].kind == "memory"
    strided = Conv(128, 64, 320, 320, 3)  # a stride-2 Downsample2D: FLOPs at the output side
    assert layer_ops([strided], images=2, act_bytes=2, nchw_transposes=False)[0].flops == 2 * 2 * 320 * 320 * 9 * 64**2


def test_vae_decoder_convolutions_agree_with_the_tally() -> None:
    """36 convolutions: post_quant_conv, conv_in, 2 mid resnets (2 each), 4 up levels of 3 resnets (the two channel
    changes add a 1x1 shortcut) and 3 Upsample2D convs, conv_out. With the mid attention's four 512 x 512 linears over
    128^2 latent pixels they are every matmul FLOP the Tally counts."""
    pipeline = _pipeline("sdxl")
    _, tally = pipeline.vae_parts(1024)
    forward = decoder(pipeline.vae_config, image_side=1024, act_bytes=4)
    assert len(forward.convs) == 1 + 1 + 4 + (6 + 1) + (6 + 1) + (7 + 1) + 7 + 1 == 36
    linears = 4 * 2 * 128 * 128 * 512 * 512
    assert sum(2 * c.macs for c in forward.convs) + linears == pytest.approx(tally.gemm_flops, rel=1e-12)
    assert forward.convs[-1] == Conv(1024, 1024, 128, 3, 3, bias=True, norm=False)


def test_unet_convolutions_and_linears_sum_to_the_tally() -> None:
    """SDXL's UNet: 51 convolutions (conv_in, 17 down, 4 mid, 29 up with 9 shortcuts, conv_out) and, by hand, the
    linear layers of its 70 transformer blocks (18 C^2 per token: self q/k/v/o, cross q/o, GEGLU; the 77 text tokens'
    keys and values) and 11 proj_in/proj_out pairs: together the Tally's FLOPs (time embeddings aside)."""
    pipeline = _pipeline("sdxl")
    tally = pipeline.denoiser(1024)
    forward = unet(pipeline.denoiser_config, latent_side=128, text_tokens=77, act_bytes=2)
    assert len(forward.convs) == 51
    linears = 0.0
    for width, tokens, blocks, transformers in ((640, 64 * 64, 10, 5), (1280, 32 * 32, 60, 6)):
        linears += blocks * 2 * (18 * tokens * width**2 + 2 * 77 * 2048 * width)
        linears += transformers * 2 * 2 * tokens * width**2
    convs = sum(2 * c.macs for c in forward.convs)
    assert convs + linears == pytest.approx(tally.gemm_flops, rel=1e-4)


def test_rms_norm_and_rotary_bytes_as_diffusers_runs_them() -> None:
    """RMSNorm on a bf16 tensor of E elements: to(fp32) 2E+4E, pow 4E+4E, mean 4E, x * rsqrt (promoted) 2E+4E,
    to(bf16) 4E+2E, * weight 2E+2E = 34E bytes; the rotary embedding: neg E, stack 2E+2E, x.float() 6E, * cos 8E,
    x_rotated.float() 6E, * sin 8E, add 12E, to(bf16) 6E = 52E (at half the tensor for neg: E/2 read, E/2 written)."""
    f = Forward(2)
    f.rms_norm(1000)
    assert f.moved_bytes == 34 * 1000
    f = Forward(2)
    f.rotary(1000)
    assert f.moved_bytes == 52 * 1000
    f = Forward(4)  # an fp32 module: the casts move 4 bytes each way
    f.rms_norm(1000)
    assert f.moved_bytes == (8 + 8 + 4 + 8 + 8 + 8) * 1000


def test_a_flux_single_block_moves_what_its_code_does() -> None:
    """One single-stream block over L tokens of width d (bf16): stream concat 2, modulated LayerNorm 6, GELU over 4d
    8, q/k RMSNorms 2 x 17, rotary q and k 2 x 26, SDPA 4, the output copy 2, the [attention, MLP] concat 10, gate and
    residual 5: 123 L d passes of 2 bytes, plus norm_out's 6 over the image tokens."""
    config = {"num_attention_heads": 24, "attention_head_dim": 128, "num_layers": 0, "num_single_layers": 1}
    image, text, d = 4096, 512, 3072
    f = flux(config, image_tokens=image, text_tokens=text, act_bytes=2)
    assert f.moved_bytes == pytest.approx((123 * (image + text) * d + 6 * image * d) * 2)


def test_a_resnet_block_moves_its_maps() -> None:
    """ResnetBlock2D 128 -> 128 at 1024 x 1024, fp32, no time embedding: GroupNorm 3 + SiLU 2 twice and
    (input + hidden) / 1.0 5: 15 passes over a 128 x 1024^2 map of 4-byte elements; two 3x3 convs, no shortcut."""
    f = Forward(4)
    resnet(f, 128, 128, 1024, False)
    assert f.moved_bytes == 15 * 128 * MIB_1024 * 4
    assert [c.kernel for c in f.convs] == [3, 3]
    resnet(f, 256, 128, 1024, False)  # a channel change adds the 1x1 shortcut
    assert [c.kernel for c in f.convs[2:]] == [3, 3, 1]


def test_fp32_attention_runs_three_tf32_products_and_transposes_follow_the_layout() -> None:
    pipeline = _pipeline("sdxl")
    _, tally = pipeline.vae_parts(1024)
    forward = decoder(pipeline.vae_config, image_side=1024, act_bytes=4)
    plain, fast = (forward_ops("vae", tally, forward, images=1, weight_bytes=0.0, act_bytes=4, transposes=t,
                               fp32_attention=t) for t in (False, True))
    attention = {op.name: op.flops for op in fast}["vae attention"]
    assert attention == FAST_F32_PRODUCTS * tally.attention_flops
    assert "NCHW <-> NHWC transposes" in {op.name for op in fast} - {op.name for op in plain}
    assert sum(op.flops for op in plain if op.kind == "gemm") == pytest.approx(tally.gemm_flops)
    cards = load_catalog(use_user_dir=False).gpus
    assert runs_nchw_transposes(cards["h100-sxm-80gb"], "bf16") and runs_nchw_transposes(cards["a100-sxm-80gb"], "tf32")
    assert not runs_nchw_transposes(cards["h100-sxm-80gb"], "fp32")


def test_more_pixels_move_more_bytes() -> None:
    pipeline = _pipeline("flux.1-dev")
    small, large = (flux(pipeline.denoiser_config, image_tokens=(side // 16) ** 2, text_tokens=512, act_bytes=2)
                    for side in (512, 1024))
    assert large.moved_bytes > 2 * small.moved_bytes


def test_the_attention_kernel_sdpa_picks_follows_the_compute_capability() -> None:
    """PyTorch's sdp_utils.cpp (pytorch/pytorch@001f694a): FlashAttention-2 on sm_80-sm_121 for 16-bit heads up to
    256, cuDNN attention first on sm_90 and sm_100, the memory-efficient kernel for fp32, wider heads, older cards."""
    cards = load_catalog(use_user_dir=False).gpus
    assert cards["rtx-5090"].compute_capability == "12.0"
    assert sdpa_kernel(cards["rtx-5090"], "bf16", 128) == "FlashAttention-2"  # consumer Blackwell: FA2
    assert sdpa_kernel(cards["rtx-pro-6000-blackwell"], "bf16", 128) == "FlashAttention-2"
    assert sdpa_kernel(cards["b200-sxm-180gb"], "bf16", 128).startswith("cuDNN attention")
    assert sdpa_kernel(cards["h100-sxm-80gb"], "bf16", 128).startswith("cuDNN attention")
    assert sdpa_kernel(cards["a100-sxm-80gb"], "fp16", 64) == "FlashAttention-2"
    assert sdpa_kernel(cards["a100-sxm-80gb"], "fp16", 512) == "memory-efficient attention"  # the VAE's 512-wide head
    assert sdpa_kernel(cards["a100-sxm-80gb"], "fp32", 512) == "memory-efficient attention (3xTF32)"
    assert sdpa_kernel(cards["t4"], "fp16", 64) == "memory-efficient attention"
