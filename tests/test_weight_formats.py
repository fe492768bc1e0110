"""Weight formats against their specifications and the checkpoints' published sizes: bits per weight with their
scales (OCP MX v1.0, NVFP4, DeepSeek-V3's 128 x 128 FP8 blocks, compressed-tensors INT4 groups), which weights a
checkpoint's quantization_config covers, where FP8/FP4 matmuls run natively (the cards' datasheets), and hub ids
whose suffix names a weight format resolving offline to their preset."""

from __future__ import annotations

import pytest

from gpuwise.catalog import Catalog
from gpuwise.estimate.compat import unmet
from gpuwise.estimate.dtypes import BITS
from gpuwise.estimate.estimate import estimate
from gpuwise.estimate.weights import matmul_dtype, weights
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.checkpoint import from_quantization_config, strip_variant
from gpuwise.workload.model.resolve import resolve_model

GIB = 2**30


def test_bits_per_weight_follow_the_format_specifications() -> None:
    assert BITS["mxfp4"] == (32 * 4 + 8) / 32  # OCP MX v1.0: 32 E2M1 values share one E8M0 scale
    assert BITS["nvfp4"] == (16 * 4 + 8) / 16  # NVFP4: 16 E2M1 values share one E4M3 scale
    assert BITS["fp8-block"] == 8 + 32 / (128 * 128)  # one fp32 scale per 128 x 128 block
    assert BITS["int4"] == 4 + 16 / 128  # one 16-bit scale per group of 128, symmetric
    assert BITS["fp8"] == 8


def test_gpt_oss_mxfp4_covers_the_experts_only() -> None:
    """gpt-oss config.json: quant_method mxfp4, modules_to_not_convert lists self_attn, router, embeddings, head."""
    arch = resolve_model("openai/gpt-oss-120b")
    assert arch.checkpoint is not None and (arch.checkpoint.quant, arch.checkpoint.scope) == ("mxfp4", "experts")
    stored = weights(arch, "mxfp4")
    # 36 layers x 128 experts x (2880 x 5760 gate_up + 2880 x 2880 down) = 114,661,785,600 weights in MXFP4
    assert stored.quantized == 36 * 128 * 3 * 2880 * 2880
    assert stored.experts_only and stored.dense_bytes_per_weight == 2


@pytest.mark.parametrize(("hub_id", "checkpoint_gib"), [("openai/gpt-oss-120b", 60.8), ("openai/gpt-oss-20b", 12.8)])
def test_gpt_oss_checkpoint_sizes_match_the_model_card(hub_id: str, checkpoint_gib: float) -> None:
    """OpenAI, gpt-oss-120b & gpt-oss-20b Model Card (arXiv 2508.10925), Table 1: checkpoint size 60.8 GiB and
    12.8 GiB."""
    stored = weights(resolve_model(hub_id), "mxfp4")
    assert stored.bytes / GIB == pytest.approx(checkpoint_gib, abs=0.05)


def test_gpt_oss_120b_in_mxfp4_fits_one_80_gb_card(shipped: Catalog) -> None:
    """The model card: 'gpt-oss-120b ... fits into a single 80GB GPU (like NVIDIA H100 or AMD MI300X)'."""
    result = estimate(resolve_model("openai/gpt-oss-120b"), InferJob(), shipped.gpus["h100-sxm-80gb"])
    assert result.memory.fits
    assert result.memory.breakdown_bytes["weights"] / GIB == pytest.approx(60.8, abs=0.05)


def test_kimi_k2_5_int4_groups_of_32_cost_four_and_a_half_bits() -> None:
    """Kimi-K2.5 config.json: compressed-tensors, weights num_bits 4, type int, group_size 32 (bf16 scales);
    ignore lists self_attn and shared_experts."""
    arch = resolve_model("moonshotai/Kimi-K2.5")
    assert arch.checkpoint is not None and arch.checkpoint.quant == "int4"
    assert arch.checkpoint.bits == 4 + 16 / 32 and arch.checkpoint.scope == "experts"
    assert weights(arch, "int4").bits == 4.5


def test_deepseek_v3_ships_fp8_in_128_blocks() -> None:
    arch = resolve_model("deepseek-ai/DeepSeek-V3")
    assert arch.checkpoint is not None and (arch.checkpoint.quant, arch.checkpoint.scope) == ("fp8-block", "all")


def test_quantization_configs_of_other_toolkits() -> None:
    nvfp4 = {"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4"}}
    awq = {"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}
    ct_fp8 = {"quantization_config": {"quant_method": "compressed-tensors", "format": "float-quantized",
                                      "config_groups": {"g": {"weights": {"num_bits": 8, "type": "float"}}}}}
    assert from_quantization_config(nvfp4).quant == "nvfp4"  # type: ignore[union-attr]
    assert from_quantization_config(awq).quant == "awq-int4"  # type: ignore[union-attr]
    assert from_quantization_config(ct_fp8).quant == "fp8"  # type: ignore[union-attr]
    assert from_quantization_config({"quantization_config": {"quant_method": "bitnet"}}) is None
    assert from_quantization_config({"torch_dtype": "bfloat16"}) is None


def test_fp4_runs_natively_on_blackwell_and_dequantizes_on_hopper(shipped: Catalog) -> None:
    """NVIDIA HGX B200 table lists FP4 Tensor Core figures; the H100 datasheet lists FP8 but no FP4."""
    job = InferJob(quant="nvfp4")
    h100, b200 = shipped.gpus["h100-sxm-80gb"], shipped.gpus["b200-sxm-180gb"]
    assert [r.feature for r in unmet(job, h100)] == ["nvfp4"] and unmet(job, b200) == ()
    # MI355X (CDNA 4) multiplies the OCP MX formats, not NVIDIA's NVFP4 (ROCm precision-support table)
    mi355x = shipped.gpus["mi355x"]
    assert [r.feature for r in unmet(job, mi355x)] == ["nvfp4"] and matmul_dtype("nvfp4", mi355x) == "fp16"
    assert unmet(InferJob(quant="mxfp4"), mi355x) == () and matmul_dtype("mxfp4", mi355x) == "fp4"
    assert matmul_dtype("nvfp4", b200) == "fp4" and matmul_dtype("nvfp4", h100) == "fp16"
    assert matmul_dtype("fp8", h100) == "fp8" and matmul_dtype("fp8", shipped.gpus["a100-sxm-80gb"]) == "fp16"


def test_fp4_memory_saving_holds_where_the_matmul_dequantizes(shipped: Catalog) -> None:
    arch, h100 = resolve_model("qwen3-32b"), shipped.gpus["h100-sxm-80gb"]
    bf16 = estimate(arch, InferJob(quant="bf16"), h100).memory.breakdown_bytes["weights"]
    fp4 = estimate(arch, InferJob(quant="nvfp4"), h100).memory.breakdown_bytes["weights"]
    # linears at 4.5 bits, embeddings and head at 16: well under a third of bf16
    assert 0.28 < fp4 / bf16 < 0.33


def test_variant_suffixes_resolve_offline_to_their_preset() -> None:
    assert strip_variant("Qwen/Qwen3-30B-A3B-Instruct-2507-FP8") == ("Qwen/Qwen3-30B-A3B", "fp8-block",
                                                                     ["-FP8", "-Instruct-2507"])
    fp8 = resolve_model("Qwen/Qwen3-8B-FP8")
    assert fp8.checkpoint is not None and fp8.checkpoint.quant == "fp8-block"  # Qwen3-8B-FP8 card: block size 128
    assert fp8.total_params == resolve_model("Qwen/Qwen3-8B").total_params
    assert fp8.resolved_as and "qwen3-8b" in fp8.resolved_as
    it = resolve_model("google/gemma-3-4b-it")
    assert it.total_params == resolve_model("gemma-3-4b").total_params


def test_default_quant_is_the_checkpoint_format_unless_the_engine_cannot_run_it(shipped: Catalog) -> None:
    arch = resolve_model("deepseek-ai/DeepSeek-V3")
    assert InferJob().for_checkpoint(arch.checkpoint).weights == "fp8-block"
    assert InferJob(quant="bf16").for_checkpoint(arch.checkpoint).weights == "bf16"  # an explicit --quant wins
    # llama.cpp runs GGUF (and gpt-oss's MXFP4), not FP8 blocks: the job falls back to 16-bit weights
    assert InferJob(engine="llamacpp").for_checkpoint(arch.checkpoint).weights == "bf16"
    gpt_oss = resolve_model("openai/gpt-oss-20b").checkpoint
    assert InferJob(engine="llamacpp").for_checkpoint(gpt_oss).weights == "mxfp4"
