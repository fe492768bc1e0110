"""The roofline operators of one denoiser or VAE forward: the matmuls (linear layers), each convolution apart with the
layout transposes cuDNN runs around it, attention, and the memory-bound passes the module's own forward makes
(estimate/image/layers.py), for every image the forward carries.

Attention in fp32 (an fp32 VAE's mid-block attention): SDPA's memory-efficient kernel is the one that takes fp32,
and on sm_80 and later it runs fp32 products as OpMultiplyAddFastF32 (PyTorch aten/src/ATen/native/transformers/cuda/
mem_eff_attention/gemm_kernel_utils.h DefaultGemmType<ArchTag, float>), which CUTLASS defines as 'the input is
converted to 2 (big and small) TF32 components; perform 3xTF32 ... for every F32 output element'
(cutlass/arch/mma.h): three TF32 tensor-core products for each, so its FLOPs count three times at the TF32 rate.
"""

from __future__ import annotations

from gpuwise.catalog import GPU
from gpuwise.estimate.image.layers import Forward, decoder, flux, unet
from gpuwise.estimate.roofline import Op
from gpuwise.estimate.speed.convolutions import layer_ops
from gpuwise.workload.diffusion.denoisers import Tally
from gpuwise.workload.diffusion.pipeline import FLUX_PATCH, LATENT_SCALE, Pipeline

FAST_F32_PRODUCTS = 3  # TF32 tensor-core products per fp32 product in 3xTF32 (cutlass/arch/mma.h)
SDPA_SOURCE = "pytorch/pytorch@001f694a aten/src/ATen/native/transformers/cuda/sdp_utils.cpp"


def sdpa_kernel(gpu: GPU, dtype: str, head_dim: int) -> str:
    """The kernel PyTorch's SDPA picks on a CUDA card (SDPA_SOURCE): FlashAttention-2 on sm_80 to sm_121 for 16-bit
    heads up to 256 wide (check_flash_attention_hardware_support, check_head_dim_size_flash); before it, cuDNN's
    attention on sm_90 and sm_100 (H100/H200, B200) from cuDNN 9.15.1 (check_prefer_cudnn_attention); fp32, wider
    heads and older cards fall to the memory-efficient kernel (sm_50 to sm_121). So consumer and workstation Blackwell
    (sm_120: RTX 5090, RTX PRO 6000) run FlashAttention-2's Ampere-style kernels, not Hopper's or B200's."""
    cc = gpu.compute_capability
    if gpu.software.stack != "cuda" or cc is None:
        return f"PyTorch SDPA on {gpu.software.stack}"
    major, minor = (int(x) for x in cc.split("."))
    flash = dtype in ("fp16", "bf16") and head_dim <= 256 and (8, 0) <= (major, minor) <= (12, 1)
    if flash and major in (9, 10):
        return "cuDNN attention (FlashAttention-2 with cuDNN before 9.15.1)"
    if flash:
        return "FlashAttention-2"
    return "memory-efficient attention" + (" (3xTF32)" if dtype == "fp32" and major >= 8 else "")


def denoiser_forward(pipeline: Pipeline, resolution: int, act_bytes: int) -> Forward:
    """The denoiser's convolutions and memory-bound passes for one image at ``resolution`` pixels square."""
    latent = resolution // LATENT_SCALE
    if pipeline.is_dit:
        return flux(pipeline.denoiser_config, image_tokens=(latent // FLUX_PATCH) ** 2,
                    text_tokens=pipeline.defaults.text_tokens, act_bytes=act_bytes)
    return unet(pipeline.denoiser_config, latent_side=latent, text_tokens=pipeline.defaults.text_tokens,
                act_bytes=act_bytes)


def decoder_forward(pipeline: Pipeline, resolution: int, act_bytes: int) -> Forward:
    return decoder(pipeline.vae_config, image_side=resolution, act_bytes=act_bytes)


def runs_nchw_transposes(gpu: GPU, conv_dtype: str) -> bool:
    """cuDNN transposes NCHW maps for its tensor-core kernels: a 16-bit or TF32 convolution on a CUDA card (an fp32
    one without TF32 runs on the CUDA cores in NCHW; other stacks' libraries are not modelled)."""
    return gpu.software.stack == "cuda" and conv_dtype != "fp32"


def forward_ops(name: str, tally: Tally, forward: Forward, *, images: int, weight_bytes: float, act_bytes: int,
                transposes: bool, fp32_attention: bool = False) -> list[Op]:
    """``tally`` (workload/diffusion/denoisers.py) gives the FLOPs of every linear layer and convolution together and
    the attention FLOPs; ``forward`` lists the convolutions, which leave the linear layers' share when taken out."""
    convs = layer_ops(forward.convs, images=images, act_bytes=act_bytes, nchw_transposes=transposes)
    conv_flops = sum(op.flops for op in convs)
    live = (tally.live_elements + tally.held_elements) * images * act_bytes
    linears = Op(f"{name} linear layers", "gemm", max(0.0, tally.gemm_flops * images - conv_flops),
                 weight_bytes + live, max(1, tally.kernels - len(forward.convs)))
    attention = tally.attention_flops * images * (FAST_F32_PRODUCTS if fp32_attention else 1)
    return [linears, *convs, Op(f"{name} attention", "attention", attention, 0.0, 0),
            Op(f"{name} norms, activations, copies", "memory", 0.0, forward.moved_bytes * images,
               forward.kernels)]
