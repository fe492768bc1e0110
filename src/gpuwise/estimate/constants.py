"""Every outside constant the estimators use, stored once with its source.

A FittedConstant is a global parameter of a speed mechanism: its value, bounds, prior and sources are in
gpuwise/fitted/parameters.yaml, chosen by benchmarks/fit.py out of sample.

A value marked *gpuwise assumption* is our own choice, stated so it can be challenged; everything else
cites the document it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.fitted import FittedConstant

MIB = 2**20
GIB = 2**30


@dataclass(frozen=True)
class Constant:
    value: float
    unit: str
    source: str


# ---- bits per weight of storage formats --------------------------------------------------------------
NF4_DOUBLE_QUANT_BITS = Constant(
    4.127, "bits/param",
    "Dettmers et al. 2023, QLoRA (arXiv 2305.14314) sec. 3: NF4 blocks of 64 plus double-quantized "
    "constants cost 4 + 8/64 + 32/(64*256) = 4.127 bits per parameter",
)
INT4_GROUP128_BITS = Constant(
    4.156, "bits/param",
    "AWQ/GPTQ GEMM packing, group size 128: 4-bit weights + an fp16 scale and a 4-bit zero point per 128 "
    "weights = 4 + 16/128 + 4/128 (AutoAWQ WQLinear_GEMM qweight/qzeros/scales shapes)",
)
GGUF_Q8_0_BITS = Constant(
    8.5, "bits/param", "llama.cpp ggml-common.h block_q8_0: 32 int8 weights + one fp16 scale = 34 bytes / 32"
)
GGUF_Q4_0_BITS = Constant(
    4.5, "bits/param", "llama.cpp ggml-common.h block_q4_0: 32 4-bit values + one fp16 scale = 18 bytes / 32"
)
GGUF_Q4_K_M_BITS = Constant(
    4.89, "bits/param",
    "llama.cpp tools/quantize help: Q4_K_M of Llama-3-8B (8.03e9 params) is 4.58 GiB -> 4.58*2^30*8/8.03e9",
)
FP8_BITS = Constant(8.0, "bits/param", "OCP FP8 formats (E4M3): one byte per weight; per-tensor scales negligible")
FP8_BLOCK_BITS = Constant(
    8 + 32 / (128 * 128), "bits/param",
    "DeepSeek-V3 config.json quantization_config weight_block_size [128, 128] with one fp32 weight_scale_inv per "
    "block (README_WEIGHTS.md 'FP8 Weight Documentation'): 8 + 32/16384 bits",
)
MXFP4_BITS = Constant(
    4.25, "bits/param",
    "OCP Microscaling Formats (MX) v1.0 spec, sec. 5: MXFP4 = blocks of 32 FP4 (E2M1) elements sharing one 8-bit "
    "E8M0 scale: (32 x 4 + 8) / 32 bits",
)
NVFP4_BITS = Constant(
    4.5, "bits/param",
    "NVIDIA, 'Introducing NVFP4' (developer blog, 2025) and the Blackwell architecture docs: 16 FP4 (E2M1) values "
    "share one FP8 (E4M3) scale, plus one fp32 scale per tensor: (16 x 4 + 8) / 16 bits",
)
INT4_GROUP128_SYMMETRIC_BITS = Constant(
    4 + 16 / 128, "bits/param",
    "weight-only INT4 with one 16-bit scale per group of 128 and no zero point (compressed-tensors W4A16 "
    "'pack-quantized' group strategy, Marlin kernels): 4 + 16/128 bits",
)
NF4_BNB_BITS = Constant(
    4 + 32 / 64, "bits/param",
    "bitsandbytes Params4bit (0.50.2) default blocksize 64 with one fp32 absmax per block and no double "
    "quantization (diffusers BitsAndBytesConfig default): 4 + 32/64 bits; measured on a 12288 x 3072 weight: "
    "0.5625 bytes per weight",
)
INT8_BITS = Constant(8.0, "bits/param", "LLM.int8() / W8A8: one byte per weight; per-row scales negligible")

# ---- training state, bytes per parameter (Hugging Face docs, 'Model training anatomy') -----------------
HF_ANATOMY = ("Hugging Face transformers docs, 'Model training anatomy', Anatomy of Model's Memory: weights 4 B "
              "(fp32) or 6 B (mixed precision: fp32 + 16-bit copy); gradients 4 B; AdamW 8 B, 8-bit AdamW 2 B, "
              "SGD with momentum 4 B per parameter")
ADAMW_STATES = Constant(2, "states/param", HF_ANATOMY + " (exp_avg and exp_avg_sq)")
EIGHT_BIT_STATE_BYTES = Constant(1, "byte/state", "Dettmers et al. 2022, 8-bit Optimizers via Block-wise "
                                 "Quantization (arXiv 2110.02861): each Adam state in 8 bits; " + HF_ANATOMY)

# ---- runtime overheads ---------------------------------------------------------------------------------
CUDA_CONTEXT = Constant(
    357 * MIB, "bytes",
    "Hugging Face docs 'Model training anatomy': loading the CUDA kernels (torch.ones((1,1)).to('cuda')) "
    "occupies 357 MB (MiB) of GPU memory; varies 0.3-2 GiB with GPU, driver and lazy loading",
)
CUBLAS_WORKSPACE = Constant(
    32 * MIB, "bytes",
    "PyTorch CUDA semantics, cuBLAS workspaces: default CUBLAS_WORKSPACE_CONFIG ':4096:8' = 8 x 4 MiB per "
    "handle/stream (Hopper uses 32 MiB)",
)
NCCL_BUFFERS = Constant(
    392 * MIB, "bytes",
    "NVIDIA aiconfigurator memory model (estimators notes sec. 5.9): NCCL communicator buffers 342 MB (TP2) "
    "to 392 MB (TP4-8) per GPU",
)
ALLOCATOR_RESERVE = Constant(
    0.05, "fraction of peak allocated",
    "gpuwise assumption: the PyTorch caching allocator rounds blocks (512 B small, 2 MiB large) and "
    "fragments; reserved exceeds allocated by a few percent in steady training",
)
LLMD_REPORT = ("llm-d-incubation/llm-d-planner docs/accuracy/vllm-v0.19.0-accuracy-report.md (commit 2d557dca, vLLM "
               "v0.19.0 on H100-80GB, 49 runs)")
VLLM_NON_TORCH = Constant(0.27 * GIB, "bytes", LLMD_REPORT + ": non-torch memory (CUDA runtime) 0.27 GiB at TP 1")
VLLM_NON_TORCH_TP = Constant(2.1 * GIB, "bytes", LLMD_REPORT + ": non-torch memory 2.08-2.17 GiB per GPU at TP 2-4 "
                                              "(NCCL and custom all-reduce buffers)")
CUDA_RESERVED_SHARE_NVIDIA = Constant(
    0.013, "fraction of memory_gb",
    "share of an NVIDIA card's memory the driver keeps from CUDA (cudaMemGetInfo's total, which PyTorch and vLLM "
    "report as total memory): RTX 4090 '23.68 GiB total capacity' of 24 (zai-org/CogVideo#36, 1.3 %), A100 40GB "
    "'total capacity of 39.50 GiB' of 40 (TianheWu/CoSeR#10, 1.25 %)")
CUDA_RESERVED_SHARE_AMD = Constant(
    0.0001, "fraction of memory_gb",
    "MI300X: rocminfo's GLOBAL pool 201,310,208 KB = 191.98 GiB of 192 (ROCm/legacy-rocm-build#4414); HIP's total "
    "is the whole pool")
GDDR_ECC_SHARE = Constant(
    1 / 16, "fraction of memory_gb",
    "GDDR cards with ECC on hold the check bits in-band: a T4's 16 GiB shows as 15,360 MiB in nvidia-smi (ECC on), "
    "15/16; HBM keeps ECC beside the data")
VLLM_GRAPH_BYTES_PER_PIECE = Constant(
    0.3275 * MIB, "bytes per captured graph",
    "gpuwise fit (benchmarks/engine_memory.py graph_fit): vLLM's CUDA graphs, one per (decoder layer + 1) piece per "
    "captured size, the graph memory growing with the kernel nodes they hold; the mean of 0.72 GiB / (41 x 51) "
    "(granite-4.0-micro, L40S, v0.11.0) and 1.22 GiB / (81 x 51) (Llama-3-70B-AWQ TP2, L40S, v0.16.0), the two "
    "public logs that print 'Graph capturing finished ... took'; leave-one-log-out error -14 % and +17 %")
ROCM_NON_TORCH = Constant(
    6.07 * GIB, "bytes",
    "vLLM 0.6.5/0.6.6 ROCm on MI300X, Llama-3.1-70B fp8 TP1: 'non_torch_memory=6.07GiB' (AUGMXNT/llm-tracker.info-"
    "vault@b56234c4 '_TOORG/vLLM MI300X vs H100.md'); ROCm's runtime and hipBLASLt workspaces; the one public log "
    "that prints it at TP 1 (gpuwise fit, in-sample there)")
VLLM_CUDA_GRAPHS = Constant(1.04 * GIB, "bytes", LLMD_REPORT + ": CUDA graph pools 0.51-1.85 GiB, mean 1.04 GiB, "
                                              "captured after the KV cache is sized")


# ---- achievable fractions of peak (performance model) ---------------------------------------------------
# A card's measured matmul rate (fraction of dense peak, with its source and date) lives on its catalog record:
# ``measured.gemm`` in catalog/data/gpus/<id>.yaml. A card without one borrows that of its architecture's reference
# card of the same segment (the record whose ``measured.stands_for`` says why), else GEMM_EFFICIENCY_DEFAULT
# (estimate/roofline.py, gemm_efficiency).
FIXED_SHAPE_FRACTION = FittedConstant("fixed_shape_fraction", "fraction of the best-shape maximum")
# by architecture generation (compute capability major): how far below a shape search's best a model's own GEMMs run
# (wave quantisation over the SM count, the sustained clock under a training load)
FIXED_SHAPE_FRACTION_BY_CC_MAJOR: dict[str, FittedConstant] = {
    "8": FittedConstant("fixed_shape_fraction_sm80", "fraction of the best-shape maximum"),
    "9": FittedConstant("fixed_shape_fraction_sm90", "fraction of the best-shape maximum"),
    "10": FittedConstant("fixed_shape_fraction_sm100", "fraction of the best-shape maximum"),
    "12": FittedConstant("fixed_shape_fraction_sm100", "fraction of the best-shape maximum"),
}
GEMM_EFFICIENCY_DEFAULT = FittedConstant("gemm_efficiency_default", "fraction")
GEMM_HALF_EFFICIENCY_FLOP = FittedConstant("gemm_half_efficiency_flop", "FLOP")
LLAMACPP_DECODE_REFERENCE = {
    # stack -> (the card it was measured on, llama-bench tg128 tokens/s of llama 7B Q4_0): one published single-user
    # decode measurement of llama.cpp on a backend other than CUDA. Its ratio to the model's own figure for that run
    # scales llama.cpp decode on the stack's consumer and workstation cards (estimate/speed/stacks.py); CUDA's decode is
    # modelled from the kernels and held to its measurements in benchmarks/
    "rocm": ("rx-7900-xtx", Constant(136.5, "tokens/s", "github.com/ggml-org/llama.cpp/issues/20934 (2026-03-24): "
                                                         "RX 7900 XTX, LLaMA 7B Q4_0, ROCm tg128 129-144 tokens/s "
                                                         "(midpoint); Vulkan on the same card 167-177")),
    "oneapi": ("arc-a770-16gb", Constant(55.0, "tokens/s", "github.com/ggml-org/llama.cpp docs/backend/SYCL.md "
                                                            "(news, 2025.2): Arc A770, llama-2-7b.Q4_0, 55 tokens/s")),
}
UNMEASURED_STACK_DISCOUNT = Constant(
    0.70, "x the modelled speed",
    "gpuwise policy (issue 14): a stack with no published end-to-end PyTorch measurement (training, diffusers) on "
    "consumer or workstation cards (ROCm on RDNA, oneAPI on Arc, Metal) runs slower kernels or falls back where CUDA "
    "has fused ones (attention backward, fused optimizers, bitsandbytes); its modelled speed is cut by 30% and the "
    "output says so",
)
UNMEASURED_STACKS = frozenset({"rocm", "oneapi", "metal"})  # on consumer, workstation and soc cards only
MEMORY_EFFICIENCY = FittedConstant("memory_efficiency", "fraction of datasheet bandwidth")
_SM80_ATTENTION = FittedConstant("attention_efficiency_sm80", "fraction of dense peak")
# the attention kernel PyTorch's SDPA picks, by the card's compute capability major (pytorch@001f694a
# aten/src/ATen/native/transformers/cuda/sdp_utils.cpp): FlashAttention-2 on sm_80-sm_89 and sm_120/121 (Ampere, Ada,
# GeForce and workstation Blackwell); cuDNN attention first on sm_90 (Hopper) and sm_100 (B200) from cuDNN 9.15.1
FLASH_ATTENTION_EFFICIENCY: dict[str, Constant | FittedConstant] = {
    "8": _SM80_ATTENTION,
    "12": _SM80_ATTENTION,
    "9": FittedConstant("attention_efficiency_sm90", "fraction of dense peak"),
    "10": FittedConstant("attention_efficiency_sm100", "fraction of dense peak"),
}
FLASH_ATTENTION_DEFAULT = Constant(0.40, "fraction of dense peak", "gpuwise assumption: FA-2-class kernels on "
                                   "chips they were not tuned for (as on Hopper per the FlashAttention-3 paper)")
KERNEL_OVERHEAD = FittedConstant("kernel_overhead_s", "s per kernel")
HOST_COPY_PAGEABLE = FittedConstant("host_copy_pageable", "fraction of the link's achieved bandwidth")
DESKTOP_HOST_BANDWIDTH_GB_S = Constant(
    89.6, "GB/s", "a desktop's dual-channel DDR5-5600: 2 channels x 8 bytes x 5,600 MT/s (the speed AMD's Ryzen 9000 "
    "and Intel's Core Ultra 200S list as supported; JEDEC JESD79-5 speed bin); a workstation or server: pass "
    "--host-bandwidth-gb-s")
CPU_MATVEC_BANDWIDTH_SHARE = Constant(
    0.80, "fraction of peak DRAM bandwidth",
    "ggml-org/llama.cpp issue #4716 (2023-12-31): Mixtral Q8_0 on the CPU at 3.37 tokens/s (Ryzen 7950X) and 3.58 "
    "(5900X), both with 3,600 MT/s dual-channel memory (57.6 GB/s): about 12.9 B active weights x 8.5 bits = 13.7 "
    "GB per token, 46-49 GB/s, 0.80-0.85 of peak")
EAGER_OVERHEAD = FittedConstant("eager_dispatch_s", "s per kernel")
COLLECTIVE_LATENCY = FittedConstant("collective_latency_s", "s per collective")
OVERLAP_SLOWDOWN = FittedConstant("overlap_slowdown", "fraction of overlapped compute")
SERVING_PLANNING_UTILISATION = Constant(
    0.8, "fraction of the saturation rate",
    "gpuwise assumption: with no latency SLO, plan a serving replica at 80 % of the rate that saturates it, so "
    "that queues stay short (Poisson arrivals at utilisation 0.8 wait about 4 service times in M/M/1)")
GPUS_PER_NODE = Constant(8, "GPUs per node", "NVIDIA DGX/HGX H100 and H200 systems: 8 GPUs per baseboard (DGX H100 "
                         "user guide, hardware overview); cloud 8-GPU instances (AWS p5, Azure ND H100 v5)")
WALL_CIRCUIT_CONTINUOUS_W = Constant(
    1440.0, "W", "NFPA 70 (NEC) 210.19(A)(1)/210.20(A): a continuous load may use 80 % of its branch circuit; a "
    "15 A, 120 V household circuit carries 0.8 x 15 x 120 = 1,440 W (a 230 V, 16 A circuit: 3,680 W at its rating)")
PSU_EFFICIENCY_GOLD = Constant(0.90, "output / input", "80 PLUS Gold (115 V internal): 90 % efficient at 50 % "
                               "load, 87 % at 20 % and 100 % (CLEAResult 80 PLUS program specifications)")
PSU_HEADROOM = Constant(1.2, "x sustained draw", "Tim Dettmers, 'Which GPU for deep learning' (2023), power supply "
                        "section, and Puget Systems PSU sizing: 10-20 % above the sustained draw for transient spikes")

# ---- cost of ownership --------------------------------------------------------------------------------
DECISION = "gpuwise research notes decision.md sec. 6.2-6.3 (parameter anchors and worked examples)"
GPU_LOAD_POWER = Constant(0.70, "fraction of TDP", "aiinframap H100/H200/B200 TCO model: energy = TDP x 70% x PUE "
                          "x hours (" + DECISION + ")")
HOST_POWER_DESKTOP = Constant(200.0, "W per host", "Tim Dettmers / decision notes: a desktop adds 150-250 W of CPU "
                              "and platform to the GPUs' draw (" + DECISION + ")")
SERVER_GPU_SLOTS = Constant(8.0, "PCIe GPUs per server", "the catalog's pcie-server system (systems.yaml: "
                            "Supermicro SYS-221GE-NR manual sec. 3.9, 8 double-width PCIe GPU bays)")
SLOT_POWER_W = Constant(75.0, "W", "PCI-SIG, PCI Express x16 Graphics 150W-ATX spec 1.0: a x16 card draws at most 75 W "
                        "through the slot (PCI Express CEM 1.1); cards within it (NVIDIA T4 70 W, L4 72 W) need no "
                        "power cable and fit any server's low-profile slot")
SERVER_POWER_OVERHEAD = Constant(0.30, "fraction of GPU TDP", "aiinframap: server wall power = GPU TDP x 1.3; an "
                                 "8x H100 node draws 10.2 kW (" + DECISION + ")")
RESIDUAL_DATACENTER = Constant(0.30, "of purchase price after 3 years", "v2-pseo via decision notes: H100 nodes "
                               "resell at 25-35% after 36 months; gpuwise decays it geometrically: 0.3^(years/3)")
RESIDUAL_CONSUMER = Constant(0.50, "of purchase price after 5.5 years", "decision notes sec. 5: used RTX 3090s sell "
                             "at 35-65% of the 1,499 USD MSRP 5-6 years on; 0.5^(years/5.5)")
SELLING_FEE = Constant(0.1325, "of the sale price", "eBay 2023 winter seller update, fees and financials "
                       "(https://export.ebay.com/en/seller-updates/releases-archive/2023-winter-seller-update/"
                       "fees-financials/): most categories 12.9% + the up-to-0.35% rise of 2023-02-15; applied to "
                       "every resale, data-center hardware included (brokers publish no fee)")
FAILURE_RATE_DATACENTER = Constant(0.10, "of GPUs per year", "Meta Llama 3 paper via DatacenterDynamics: 148 GPU + "
                                   "72 HBM3 failures on 16,384 H100s in 54 days, ~9-11% of GPUs per year")
FAILURE_RATE_CONSUMER = Constant(0.05, "of GPUs per year", "gpuwise assumption: no published fleet rate for GeForce "
                                 "cards at desk duty cycles; half the data-center rate of 24/7 training")
REPAIR_COST = Constant(0.5, "of the card price per failure", "gpuwise assumption: an out-of-warranty repair or "
                       "replacement averaged over warranty coverage")

# ---- feeding images to the GPU ---------------------------------------------------------------------------
JPEG_DECODE_IMAGES_PER_CORE = Constant(
    200.0, "images/s per CPU core",
    "ternaus/imread_benchmark README @ f869db85 (arXiv 2605.08731), 'Peak DataLoader throughput': torchvision decoding "
    "ImageNet validation JPEGs in a PyTorch DataLoader reached 1,596 images/s with 8 workers on an AMD EPYC 9B14 "
    "(16 vCPU), 200 per worker; decode only -- random-resized-crop and the other augmentations cost more on top")
JPEG_REFERENCE_SIDE = Constant(
    224.0, "pixels", "gpuwise assumption: the per-core rate holds for ImageNet-sized sources feeding 224-pixel inputs; "
                     "decoding costs per pixel, so larger inputs (read from larger sources) cost (side / 224)^2 more")
DATALOADER_CORES_PER_GPU = Constant(
    8.0, "CPU cores per GPU", "gpuwise policy: the DataLoader workers a typical node gives each GPU (a DGX A100: 128 "
                              "cores for 8 GPUs, with threads for the trainer and NCCL; imread_benchmark peaks at 8 "
                              "workers)")

# ---- energy per token (estimate/cost/energy.py) ------------------------------------------------------------
# Global parameters of the board-power mechanism, as fractions of each card's TDP (its catalog record's tdp_w):
# Splitwise's power model gives both cards it measured the same shape (prompt at TDP, tokens a little over half,
# idle an eighth), so the mean of the two is taken and their spread stated as the bounds.
SPLITWISE_POWER = ("Patel et al., 'Splitwise: Efficient Generative LLM Inference Using Phase Splitting', ISCA 2024 "
                   "(arXiv 2311.18677) sec. III, power: the prompt phase draws close to TDP, the token phase far "
                   "less; its simulator's measured per-phase draws, Mutinifni/splitwise-sim@378088013a54 "
                   "configs/power_model/constant.yaml ConstantPowerModel (as_of 2024-06)")
GPU_IDLE_POWER = Constant(0.13, "fraction of TDP", "board power of a card that holds a model and runs nothing: "
                          "idle_power H100-80GB 75 W of 700 W (0.107), A100-80GB 63 W of 400 W (0.158); mean 0.13, "
                          "bounds 0.107-0.158 (" + SPLITWISE_POWER + ")")
PREFILL_POWER = Constant(1.0, "fraction of TDP", "board power while prefilling (compute-bound): prompt_power "
                         "H100-80GB 700 W of 700 W, A100-80GB 400 W of 400 W; bounds 1.0-1.0 (" + SPLITWISE_POWER + ")")
DECODE_POWER = Constant(0.58, "fraction of TDP", "board power while decoding (memory-bound): token_power H100-80GB "
                        "380 W of 700 W (0.543), A100-80GB 250 W of 400 W (0.625); mean 0.58, bounds 0.543-0.625 ("
                        + SPLITWISE_POWER + ")")
MIXED_STEP_PREFILL_SHARE = Constant(
    1.0, "x the prompt tokens' share of a mixed iteration's tokens",
    "gpuwise assumption: an iteration that prefills prompt chunks and decodes the running batch in one forward "
    "(vLLM, TensorRT-LLM) draws prefill power for the prompt tokens' share of its tokens and decode power for the "
    "rest; where the time of each phase is known (a prefill-only iteration, a batch's TTFT) it is used instead")
JOULES_PER_KWH = Constant(3.6e6, "J/kWh", "SI: 1 kWh = 1,000 W x 3,600 s")
