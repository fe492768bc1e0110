"""Catalog figures against datasheet values written here by hand, each with its source.

Tolerance 1%: the acceptance check allows 3%, so a failure here means a wrong record, not rounding.
"""

from __future__ import annotations

import pytest

from gpuwise.catalog import Catalog

NV_DC = "NVIDIA H100 Tensor Core GPU datasheet, Technical Specifications (sparse figures halved)"
A100 = "NVIDIA A100 Tensor Core GPU datasheet, Specifications table"
ADA = "NVIDIA Ada Lovelace GPU architecture whitepaper v2.1, Appendix A, Table 9 (RTX 4090)"
GA102 = "NVIDIA Ampere GA102 GPU architecture whitepaper v2.1, Appendix A, Table 9 (RTX 3090)"
MI300X = "AMD Instinct MI300X data sheet, Peak theoretical performance table"
BW_ULTRA = "NVIDIA Blackwell Ultra datasheet (HGX B300 / GB300 NVL72)"
GB200 = "NVIDIA GB200 NVL72 specifications, GB200 Grace Blackwell Superchip column"
MI355X = "AMD Instinct MI355X product page, specifications"
RTX5060TI = "NVIDIA GeForce RTX 5060 Ti specifications page"

SPOT = [
    # gpu id, field, datasheet value, source
    ("h100-sxm-80gb", "bf16_dense_tflops", 989.4, NV_DC),
    ("h100-sxm-80gb", "fp8_dense_tflops", 1978.9, NV_DC),
    ("h100-sxm-80gb", "memory_bandwidth_gb_s", 3350, NV_DC),
    ("h100-sxm-80gb", "tdp_w", 700, NV_DC),
    ("h100-pcie-80gb", "bf16_dense_tflops", 756.5, NV_DC + ", H100 PCIe column (1,513 sparse)"),
    ("h100-pcie-80gb", "memory_bandwidth_gb_s", 2000, NV_DC + ", H100 PCIe column"),
    ("a100-sxm-80gb", "memory_bandwidth_gb_s", 2039, A100),
    ("a100-sxm-80gb", "bf16_dense_tflops", 312, A100),
    ("a100-sxm-80gb", "tdp_w", 400, A100),
    ("a100-pcie-80gb", "memory_bandwidth_gb_s", 1935, A100),
    ("a100-sxm-40gb", "memory_bandwidth_gb_s", 1555, A100),
    ("h200-sxm-141gb", "memory_gb", 141, "NVIDIA H200 Tensor Core GPU datasheet"),
    ("h200-sxm-141gb", "memory_bandwidth_gb_s", 4800, "NVIDIA H200 Tensor Core GPU datasheet"),
    ("rtx-4090", "memory_bandwidth_gb_s", 1008, ADA),
    ("rtx-4090", "bf16_dense_tflops", 165.2, ADA + " (BF16 with FP32 accumulate)"),
    ("rtx-4090", "fp16_fp16acc_dense_tflops", 330.3, ADA + " (FP16 with FP16 accumulate)"),
    ("rtx-4090", "tdp_w", 450, ADA + " (total graphics power)"),
    ("rtx-3090", "memory_bandwidth_gb_s", 936, GA102),
    ("rtx-3090", "bf16_dense_tflops", 71, GA102 + " (BF16 with FP32 accumulate)"),
    ("rtx-3090", "tdp_w", 350, GA102),
    ("rtx-5090", "memory_gb", 32, "NVIDIA RTX Blackwell GPU architecture whitepaper, RTX 5090 table"),
    ("rtx-5090", "memory_bandwidth_gb_s", 1792, "NVIDIA RTX Blackwell GPU architecture whitepaper, RTX 5090 table"),
    ("rtx-5090", "tdp_w", 575, "NVIDIA RTX Blackwell GPU architecture whitepaper, RTX 5090 table"),
    ("l4", "bf16_dense_tflops", 121, "NVIDIA L4 datasheet (242 with sparsity)"),
    ("l4", "memory_bandwidth_gb_s", 300, "NVIDIA L4 datasheet"),
    ("l4", "tdp_w", 72, "NVIDIA L4 datasheet"),
    ("l40s", "memory_bandwidth_gb_s", 864, "NVIDIA L40S datasheet"),
    ("l40s", "tdp_w", 350, "NVIDIA L40S datasheet"),
    ("t4", "fp16_dense_tflops", 65, "NVIDIA T4 datasheet (mixed precision FP16/FP32)"),
    ("t4", "memory_bandwidth_gb_s", 320, "NVIDIA T4 datasheet"),
    ("v100-sxm2-32gb", "memory_bandwidth_gb_s", 900, "NVIDIA V100 datasheet, V100 SXM2 column"),
    ("v100-sxm2-32gb", "fp16_dense_tflops", 125, "NVIDIA V100 datasheet, tensor performance"),
    ("a10", "bf16_dense_tflops", 125, "NVIDIA A10 datasheet (250 with sparsity)"),
    ("a10", "memory_bandwidth_gb_s", 600, "NVIDIA A10 datasheet"),
    ("rtx-a6000", "memory_bandwidth_gb_s", 768, "NVIDIA RTX A6000 datasheet"),
    ("rtx-6000-ada", "memory_bandwidth_gb_s", 960, "NVIDIA RTX 6000 Ada datasheet"),
    ("mi300x", "memory_gb", 192, MI300X),
    ("mi300x", "memory_bandwidth_gb_s", 5300, MI300X),
    ("mi300x", "bf16_dense_tflops", 1307.4, MI300X),
    ("mi300x", "fp8_dense_tflops", 2614.9, MI300X),
    ("mi300x", "tdp_w", 750, MI300X),
    ("mi250x", "memory_bandwidth_gb_s", 3276.8, "AMD Instinct MI250X data sheet"),
    ("mi250x", "bf16_dense_tflops", 383, "AMD Instinct MI250X data sheet"),
    ("gaudi2", "memory_gb", 96, "Intel Gaudi 2 AI accelerator white paper"),
    ("gaudi2", "memory_bandwidth_gb_s", 2450, "Intel Gaudi 2 AI accelerator white paper"),
    ("rx-7900-xtx", "memory_bandwidth_gb_s", 960, "AMD Radeon RX 7900 XTX specifications page"),
    ("b200-sxm-180gb", "memory_bandwidth_gb_s", 8000, "NVIDIA HGX B200 datasheet (per GPU)"),
    # 2025-2026 systems (issue 12). Blackwell Ultra datasheet, Individual GPU Specifications: FP4 printed sparse | dense
    ("b300-sxm-288gb", "fp4_dense_tflops", 14000, BW_ULTRA + ", HGX B300 column: FP4 18 | 14 PFLOPS"),
    ("b300-sxm-288gb", "fp8_dense_tflops", 4500, BW_ULTRA + ", HGX B300 column: FP8 9 PFLOPS with sparsity"),
    ("gb300-288gb", "fp4_dense_tflops", 15000, BW_ULTRA + ", GB300 column: FP4 20 | 15 PFLOPS"),
    ("gb200-186gb", "fp4_dense_tflops", 10000, GB200 + ": NVFP4 40 | 20 PFLOPS per superchip (2 GPUs)"),
    ("gb200-186gb", "memory_bandwidth_gb_s", 8000, GB200 + ": 372 GB HBM3e, 16 TB/s per superchip (2 GPUs)"),
    ("gb200-186gb", "memory_gb", 186, GB200 + ": 372 GB HBM3e per superchip (2 GPUs)"),
    ("mi355x", "memory_gb", 288, MI355X),
    ("mi355x", "memory_bandwidth_gb_s", 8000, MI355X),
    ("mi355x", "bf16_dense_tflops", 2516.6, MI355X + ": FP16/BF16 2.5 PF dense"),
    ("mi355x", "fp4_dense_tflops", 10066.3, MI355X + ": FP6/FP4 10 PF dense"),
    ("rtx-5060-ti-16gb", "memory_bandwidth_gb_s", 448, RTX5060TI + ": 16 GB GDDR7, 448 GB/s"),
    ("rtx-5060-ti-16gb", "fp4_sparse_tflops", 759, RTX5060TI + ": 759 AI TOPS (FP4, sparse)"),
    ("rtx-5060-ti-16gb", "tdp_w", 180, RTX5060TI + ": total graphics power 180 W"),
    ("rtx-4090d", "tdp_w", 425, "NVIDIA China, GeForce RTX 4090 D specifications: graphics card power 425 W"),
    ("rtx-4090d", "memory_bandwidth_gb_s", 1008, "NVIDIA China, RTX 4090 D: 24 GB GDDR6X, 384-bit, 21 Gbps"),
    ("dgx-spark-128gb", "fp4_sparse_tflops", 1000, "NVIDIA DGX Spark page: 1 PFLOP FP4 with sparsity"),
    ("dgx-spark-128gb", "memory_bandwidth_gb_s", 273, "NVIDIA DGX Spark page: 128 GB LPDDR5x, 273 GB/s"),
    ("apple-m4-max-128gb", "memory_bandwidth_gb_s", 546, "Apple Newsroom 2024-10-30: M4 Max 546GB/s"),
    ("apple-m3-ultra-512gb", "memory_bandwidth_gb_s", 819, "Apple Newsroom 2025-03-05: M3 Ultra 819GB/s"),
    ("apple-m3-ultra-512gb", "memory_gb", 512, "Apple Newsroom 2025-03-05: up to 512GB unified memory"),
    ("apple-m3-ultra-96gb", "memory_bandwidth_gb_s", 819, "Macworld 2025-03-05: 60-core GPU, 96GB (819GBps)"),
    ("apple-m3-ultra-96gb", "memory_gb", 96, "Macworld 2025-03-05: M3 Ultra standard configuration, 96GB"),
    ("ryzen-ai-max-395-128gb", "memory_bandwidth_gb_s", 256, "AMD Ryzen AI Max+ 395: LPDDR5x-8000, 256-bit = 256 GB/s"),
]


@pytest.mark.parametrize(("gpu_id", "field", "expected", "source"), SPOT, ids=[f"{s[0]}-{s[1]}" for s in SPOT])
def test_datasheet_value(shipped: Catalog, gpu_id: str, field: str, expected: float, source: str) -> None:
    assert getattr(shipped.gpus[gpu_id], field) == pytest.approx(expected, rel=0.01), source


def test_si_views_convert_datasheet_units(shipped: Catalog) -> None:
    h100 = shipped.gpus["h100-sxm-80gb"]
    # DRAM "GB" is binary: nvidia-smi shows an A100 80GB as 81,920 MiB (the H100 as 81,559 MiB usable)
    assert h100.memory_bytes == 80 * 2**30
    assert shipped.gpus["a100-sxm-80gb"].memory_bytes / 2**20 == 81920
    # bandwidth GB/s is decimal: 3.35 TB/s = 3.35e12 bytes/s
    assert h100.memory_bandwidth_bytes_per_s == pytest.approx(3.35e12)
    assert h100.peak_flops("bf16") == pytest.approx(989.4e12, rel=0.01)
    assert h100.peak_flops("fp64") == pytest.approx(67e12, rel=0.01)  # FP64 tensor core rate
    assert h100.native_link == "pcie5-x16"


def test_unified_memory_machines_give_the_gpu_their_default_share(shipped: Catalog) -> None:
    """macOS wires 3/4 of RAM for Metal by default above 36 GB (96 of 128 GB); Linux amdgpu maps half of RAM as GTT
    (max(3 GB, RAM/2), kernel commit 'drm/amdgpu: Adjust logic around GTT size (v3)')."""
    assert shipped.gpus["apple-m4-max-128gb"].usable_memory_bytes == 96 * 2**30
    assert shipped.gpus["ryzen-ai-max-395-128gb"].usable_memory_bytes == 64 * 2**30
    for gpu in shipped.gpus.values():
        assert (gpu.form_factor == "soc") == (gpu.unified_memory is not None), gpu.id
        if gpu.unified_memory is None:
            assert gpu.usable_memory_bytes == gpu.memory_bytes
        else:
            assert "sysctl" in gpu.unified_memory.raise_with or gpu.vendor != "apple"
