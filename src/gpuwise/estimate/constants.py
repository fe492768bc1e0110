"""Every outside constant the memory estimators use, stored once with its source.

A value marked *gpuwise assumption* is our own choice, stated so it can be challenged; everything else
cites the document it comes from.
"""

from __future__ import annotations

from dataclasses import dataclass

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
GGUF_Q4_K_M_BITS = Constant(
    4.89, "bits/param",
    "llama.cpp tools/quantize help: Q4_K_M of Llama-3-8B (8.03e9 params) is 4.58 GiB -> 4.58*2^30*8/8.03e9",
)
FP8_BITS = Constant(8.0, "bits/param", "OCP FP8 formats (E4M3): one byte per weight; per-tensor scales negligible")
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
VLLM_OVERHEAD = Constant(
    0.15 * GIB + 0.5 * GIB, "bytes",
    "llm-d-planner capacity model (estimators notes sec. 5.9): vLLM non-torch memory 0.15 GiB at TP1; "
    "CUDA graphs of the default capture sizes about 0.5 GiB (vLLM docs, CUDA graphs)",
)

# ---- fractions of the card that serving engines pre-reserve --------------------------------------------
ENGINE_RESERVE_FRACTION = {
    "vllm": Constant(0.90, "of total memory", "vLLM engine args: gpu_memory_utilization default 0.9"),
    "sglang": Constant(0.88, "of total memory", "SGLang server args: mem_fraction_static (about 0.88 on 80 GB)"),
    "trtllm": Constant(0.90, "of free memory after weights",
                       "TensorRT-LLM KvCacheConfig: free_gpu_memory_fraction default 0.9"),
    "lmdeploy": Constant(0.80, "of free memory after weights",
                         "LMDeploy TurbomindEngineConfig: cache_max_entry_count default 0.8"),
}
