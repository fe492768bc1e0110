"""One record per inference engine: what it runs and what it does unless told otherwise, each fact with its source.

Adding an engine is adding a record here and a test in tests/test_runtimes.py that pins each field to its source.
"""

from __future__ import annotations

from typing import Any

from gpuwise.fitted import FittedConstant
from gpuwise.runtimes.memory_rules import SGLANG_MEMORY_PROFILES, VLLM_MEMORY_PROFILES
from gpuwise.runtimes.schema import (
    CardRule,
    EngineProfile,
    GraphCapture,
    HostOps,
    ImageRuntime,
    Kernels,
    KvReuse,
    Requirement,
    Sourced,
    TiledDecode,
)

ALL_FORMATS = None  # every --quant format gpuwise models
_INF = float("inf")

VLLM_ARGS = "vllm-project/vllm@99d7eb5d vllm/engine/arg_utils.py EngineArgs._set_default_args"
VLLM_CACHE = "vllm-project/vllm@c1d86421 vllm/config/cache.py CacheConfig"
SGLANG_MEMORY = "sgl-project/sglang@a82da8da python/sglang/srt/arg_groups/memory_hook.py handle_gpu_memory_settings"
TRTLLM_ARGS = "NVIDIA/TensorRT-LLM@00043967 tensorrt_llm/llmapi/llm_args.py"
LMDEPLOY_CONFIG = "InternLM/lmdeploy@9f134dc4 lmdeploy/messages.py TurbomindEngineConfig"
LLAMACPP_COMMON = "ggml-org/llama.cpp@de93b991 common/common.h common_params"
LLAMACPP_ARGS = "ggml-org/llama.cpp@145b6280 common/arg.cpp"
VLLM_SCHEDULE = ("vllm-project/vllm@b4622cf9 vllm/v1/core/sched/scheduler.py Scheduler.schedule: token_budget = "
                 "max_num_scheduled_tokens; the RUNNING requests first (a decode takes one token, a prompt being "
                 "prefilled min(what is left, the budget)), then WAITING requests while token_budget > 0: decodes and "
                 "prompt chunks share one step and one budget")
VLLM_ASYNC = ("vllm-project/vllm@09f030ea vllm/config/vllm.py VllmConfig.__post_init__: async_scheduling None -> True "
              "unless pipeline parallel, non-EAGLE speculative decoding or an executor without it; the engine then "
              "forms step N + 1 while step N runs (a batch queue of 2), so a request that arrives during step N is "
              "scheduled in step N + 2")
SGLANG_SCHEDULE = ("sgl-project/sglang@0003215c python/sglang/srt/managers/scheduler.py "
                   "Scheduler._get_new_batch_prefill_raw: PrefillAdder(..., chunked_prefill_size, running_bs if "
                   "self.is_mixed_chunk else 0) -- decodes take none of the chunk -- and the prefill batch mixes with "
                   "the running batch only when is_mixed_chunk, else decoding_reqs = None; get_next_batch_to_run "
                   "runs a prefill batch when one forms ('Run prefill first if possible'), the decode batch "
                   "otherwise; enable_mixed_chunk False (@001b8862 python/sglang/srt/arg_groups/fields/schedule.py)")
SGLANG_OVERLAP = ("sgl-project/sglang@0003215c python/sglang/srt/managers/scheduler.py Scheduler.event_loop_overlap: "
                  "batch N + 1 is formed and launched before batch N's results are processed (disable_overlap_schedule "
                  "False, @001b8862 fields/schedule.py), so a request that arrives during batch N joins N + 2")
NO_SCHEDULER_CAP = ("gpuwise: no scheduler of its own caps the batch; serve-sim caps a replica at vLLM's small-card "
                    "max_num_seqs 256 (" + VLLM_ARGS + ")")

FUSED_MOE_CALL = Sourced(27e-6, "vLLM's Triton fused_moe timed by benchmarks/kernels/benchmark_moe.py (CUDA graphs): "
                                "vllm-project/vllm#31448, B200, E=128 N=768 bf16 top-8: 39.6 us at batch 1 (8 experts, "
                                "75 MB) and 73.2 us at batch 4 (29.5 experts, 278 MB), so 27 us plus the bytes at "
                                "6.0 TB/s; vllm-project/vllm#44830, H100, E=512 N=128 fp8 top-10: 29.5 us at batch 1 "
                                "for 7.9 MB. SGLang runs the same Triton kernel (sglang srt/layers/moe/"
                                "fused_moe_triton)")


MARLIN = ("vllm-project/vllm model_executor/layers/quantization/awq_marlin.py AWQMarlinConfig."
          "override_quantization_method: a checkpoint Marlin runs is served with awq_marlin ('The model is convertible "
          "to awq_marlin during runtime'), GPTQ with gptq_marlin; utils/marlin_utils.py check_marlin_supported: "
          "compute capability 8.0 and up; Marlin dequantizes in registers inside the GEMM")

VLLM_REUSE = Sourced(KvReuse(16, "lru", offload="--kv-transfer-config OffloadingConnector or LMCacheConnectorV1"),
                     "vllm-project/vllm@003df296 vllm/v1/core/kv_cache_manager.py KVCacheManager.get_computed_blocks: "
                     "'the computed blocks must be full'; max_cache_hit_length = request.num_tokens - 1 ('When all "
                     "tokens hit the cache, we must recompute the last token'); SingleTypeKVCacheManager.free: 'we "
                     "free the blocks in reverse order so that the tail blocks are evicted first' onto the LRU free "
                     "queue (block_pool.py FreeKVCacheBlockQueue); block size CacheConfig.DEFAULT_BLOCK_SIZE = 16 "
                     "(vllm/config/cache.py); host offload through the OffloadingConnector or LMCache KV connectors")
SGLANG_REUSE = Sourced(KvReuse(1, "lru", offload="--enable-hierarchical-cache (HiCache)"),
                       "sgl-project/sglang@95769b28 python/sglang/srt/mem_cache/radix_cache.py RadixCache.evict: "
                       "unlocked leaves (evictable_leaves) popped by the eviction strategy's priority, LRU by "
                       "default (--radix-eviction-policy lru), token by token; page_size None -> 1 "
                       "(server_args.py); the prefix matched is of the prompt less its last token "
                       "(schedule_batch.py Req.adjust_max_prefix_ids); HiCache keeps evicted nodes in host memory")
TRTLLM_REUSE = Sourced(KvReuse(32, "lru", offload="kv_cache_config.host_cache_size"),
                       TRTLLM_ARGS + " KvCacheConfig: enable_block_reuse True, tokens_per_block 32 ('The number of "
                                     "tokens per block'), host_cache_size: secondary (host) memory for offloaded "
                                     "blocks; reuse is of whole blocks, least recently used first")
LLAMACPP_REUSE = Sourced(KvReuse(1, "slot"),
                         "ggml-org/llama.cpp tools/server/server.cpp: cache_prompt true by default; a slot keeps "
                         "the tokens of its last prompt and reuses their longest common prefix with the next prompt "
                         "it takes (n_past from common_part), token by token; another request on the slot replaces "
                         "it")


MXFP4_MARLIN = ("vllm-project/vllm model_executor/layers/quantization/mxfp4.py (2025-26, as indexed) "
                "get_mxfp4_backend: Triton on SM90-SM100, Marlin the universal fallback below (Ampere, Ada); "
                "Mxfp4MoEMethod.create_weights "
                "then pads 'n % 256 == 0 and k % 128 == 0': intermediate_size_per_partition to a multiple of 128, "
                "hidden_size to 256 (gpt-oss's 2880 -> 2944 and 3072, +9 % on its experts)")

VLLM = EngineProfile(
    id="vllm", name="vLLM",
    prefix_caching=Sourced("vLLM caches prompt prefixes by default since v0.8, and a sweep that sends the same "
                           "prompts at several rates finds them cached",
                           "vllm-project/vllm vllm/engine/arg_utils.py EngineArgs.enable_prefix_caching: on by "
                           "default in the V1 engine (docs/features/automatic_prefix_caching.md)"),
    kv_reuse=VLLM_REUSE,
    weight_formats=Sourced(ALL_FORMATS, "vllm-project/vllm@05d90956 vllm/model_executor/layers/quantization/"
                                        "__init__.py QuantizationMethods (awq, gptq, fp8, mxfp4, modelopt_fp4, gguf "
                                        "...)"),
    formats_instead="",
    kv_formats=Sourced(frozenset({"fp16", "bf16", "fp8"}), VLLM_CACHE + " CacheDType: auto, bfloat16, fp8, fp8_e4m3, "
                                                           "fp8_e5m2"),
    kv_pool=Sourced("of_total", "vllm-project/vllm v1/worker/gpu_worker.py determine_available_memory: "
                                "gpu_memory_utilization x total, less weights, the profiling peak and non-torch "
                                "memory"),
    memory_fraction=Sourced(0.90, VLLM_CACHE + ": gpu_memory_utilization default 0.9"),
    kv_block_tokens=Sourced(16, VLLM_CACHE + ": block_size 16 on CUDA and ROCm; the pool is whole blocks, "
                                "v1/core/kv_cache_utils.py get_num_blocks: available // page_size // layers"),
    memory_profiles=VLLM_MEMORY_PROFILES,
    activations=Sourced("profile_run", "vllm-project/vllm@4e179065 vllm/v1/worker/gpu_model_runner.py profile_run: "
                                       "_dummy_run(max_num_batched_tokens), then _dummy_sampler_run over "
                                       "min(tokens, max_num_seqs) rows"),
    sampler_bytes_per_logit=Sourced(14.0, "vllm v1/sample/ops/topk_topp_sampler.py with the Triton top-k/top-p "
                                          "kernel (vllm-project/vllm#33538): bf16 logits, their fp32 copy, the "
                                          "fp32 probabilities and the exponential noise (2 + 4 + 4 + 4), gathered "
                                          "whole on each rank"),
    overhead="measured_python_engine", allocator_reserve=False,
    card_rules=Sourced((CardRule(at_least_gib=70, unless_named=("a100",), max_num_seqs=1024,
                                 max_batched_tokens=8192),
                        CardRule(max_num_seqs=256, max_batched_tokens=2048)),
                       VLLM_ARGS + ": 'if device_memory >= 70 * GiB_bytes and \"a100\" not in device_name' the "
                                   "OpenAI API server takes max_num_seqs 1024 and max_num_batched_tokens 8192, "
                                   "else 256 and 2048"),
    graphs=GraphCapture(sizes=(1, 2, 4, (8, 256, 8), (256, 1 << 20, 16)), unit="tokens", pads=True,
                        largest_cap=512, largest_per_sequence=2,
                        source="vllm-project/vllm@09f030ea vllm/config/vllm.py VllmConfig._set_cudagraph_sizes: "
                               "max min(max_num_seqs x (1 + num_speculative_tokens) x 2, 512), capped by "
                               "max_num_batched_tokens; 'If batch size > largest cudagraph_capture_sizes, cudagraph "
                               "will not be used'"),
    kernels=Kernels(attention=Sourced("FlashAttention / FlashInfer paged attention", "vLLM docs, attention backends"),
                    moe=Sourced("fused_moe Triton grouped GEMM", "vllm model_executor/layers/fused_moe"),
                    moe_call_s=FUSED_MOE_CALL,
                    norm=Sourced("fused RMSNorm (custom op)", "vllm model_executor/layers/layernorm.py"),
                    int4_fused_from=Sourced(8.0, MARLIN),
                    expert_padding=Sourced(("mxfp4", 9.0, 128, 256), MXFP4_MARLIN)),
    needs=Requirement("vllm", "vLLM does not run on {stack} for {gpu}; choose another --engine"),
    mixes_prefill=Sourced(True, VLLM_SCHEDULE),
    schedules_ahead=Sourced(1, VLLM_ASYNC),
    disaggregates=Sourced(True, "vLLM docs, Disaggregated Prefilling: separate prefill and decode instances joined "
                                "by a KV connector (NixlConnector)"),
    request_overhead_s=FittedConstant("vllm_request_overhead_s", "s per request"),  # fitted: its server's share
)

SGLANG = EngineProfile(
    id="sglang", name="SGLang",
    prefix_caching=Sourced("SGLang's radix cache keeps prompt prefixes unless started with --disable-radix-cache",
                           "sgl-project/sglang python/sglang/srt/server_args.py ServerArgs.disable_radix_cache: "
                           "False by default (RadixAttention)"),
    kv_reuse=SGLANG_REUSE,
    weight_formats=Sourced(ALL_FORMATS, "SGLang docs, quantization: fp8, awq, gptq, mxfp4, modelopt fp4, gguf"),
    formats_instead="",
    kv_formats=Sourced(frozenset({"fp16", "bf16", "fp8"}),
                       "sgl-project/sglang@6074b7d5 python/sglang/srt/arg_groups/fields/model.py --kv-cache-dtype: "
                       "auto, fp8_e5m2, fp8_e4m3, bf16 ..."),
    kv_pool=Sourced("static_with_weights", "SGLang server args: mem_fraction_static = (weights + KV pool) / GPU "
                                           "memory; activations and CUDA graphs live in the rest"),
    memory_fraction=Sourced(0.88, "SGLang server_args.py _handle_gpu_memory_settings: 0.88 when the GPU memory is "
                                  "unknown; SGLang derives it per card from chunked_prefill_size and "
                                  "cuda_graph_max_bs (" + SGLANG_MEMORY + "), which gpuwise does not yet follow"),
    memory_profiles=SGLANG_MEMORY_PROFILES,
    activations=Sourced("token_budget_forward", SGLANG_MEMORY + ": activations sized by chunked_prefill_size"),
    overhead="measured_python_engine", allocator_reserve=False,
    card_rules=Sourced((CardRule(below_gib=20, max_batched_tokens=2048, graph_max_batch=(8, 8)),
                        CardRule(below_gib=35, max_batched_tokens=4096, graph_max_batch=(48, 160)),
                        CardRule(below_gib=60, max_batched_tokens=4096, graph_max_batch=(32, 160)),
                        CardRule(below_gib=160, max_batched_tokens=8192, graph_max_batch=(256, 512)),
                        CardRule(max_batched_tokens=16384, graph_max_batch=(512, 512))),
                       SGLANG_MEMORY + ": chunked_prefill_size and cuda_graph_max_bs (TP < 4, TP >= 4) by GPU "
                                       "memory below 20, 35, 60, 90, 160 GiB and above; max_running_requests None "
                                       "(the KV pool bounds it)"),
    graphs=GraphCapture(sizes=(1, 2, 4, 8, 12, (16, 257, 8), (272, 512, 16), (512, 1 << 20, 32)), unit="sequences",
                        pads=True, largest_from_card=True,
                        source="sgl-project/sglang@399499ca python/sglang/srt/arg_groups/cuda_graph_hook.py "
                               "generate_decode_cuda_graph_batch_sizes; disable_cuda_graph_padding False "
                               "(@f489bf94 fields/exec_.py)"),
    kernels=Kernels(attention=Sourced("FlashInfer / FA3 radix attention", "SGLang docs, attention backends"),
                    moe=Sourced("fused_moe Triton grouped GEMM", "sglang srt/layers/moe/fused_moe_triton"),
                    moe_call_s=FUSED_MOE_CALL,
                    int4_fused_from=Sourced(8.0, "sgl-project/sglang srt/layers/quantization/awq.py and "
                                                 "marlin_utils.py: AWQ and GPTQ checkpoints run Marlin's kernels "
                                                 "(apply_awq_marlin_linear), as vLLM's do; " + MARLIN)),
    mixes_prefill=Sourced(False, SGLANG_SCHEDULE),
    schedules_ahead=Sourced(1, SGLANG_OVERLAP),
    disaggregates=Sourced(True, "SGLang docs, PD Disaggregation: --disaggregation-mode prefill / decode with a KV "
                                "transfer backend (Mooncake, NIXL)"),
    request_overhead_s=FittedConstant("sglang_request_overhead_s", "s per request"),  # fitted: its server's share
)

TRTLLM = EngineProfile(
    id="trtllm", name="TensorRT-LLM", kv_reuse=TRTLLM_REUSE,
    weight_formats=Sourced(ALL_FORMATS, "TensorRT-LLM docs, quantization: FP8, NVFP4, INT4 AWQ, W4A8, INT8"),
    formats_instead="",
    kv_formats=Sourced(frozenset({"fp16", "bf16", "fp8"}), "TensorRT-LLM docs, KV cache quantization: FP8, INT8"),
    kv_pool=Sourced("of_free", TRTLLM_ARGS + " KvCacheConfig: free_gpu_memory_fraction of what the loaded engine "
                                            "leaves free"),
    memory_fraction=Sourced(0.90, TRTLLM_ARGS + " KvCacheConfig: free_gpu_memory_fraction default 0.9"),
    activations=Sourced("token_budget_forward", TRTLLM_ARGS + ": activation buffers for max_num_tokens"),
    card_rules=Sourced((CardRule(max_num_seqs=2048, max_batched_tokens=8192),),
                       TRTLLM_ARGS + " BaseLlmArgs: max_batch_size 2048, max_num_tokens 8192"),
    graphs=GraphCapture(sizes=((1, 32, 1), 32, 64, 128), unit="sequences", pads=False, largest_cap=128,
                        source=TRTLLM_ARGS + " BaseCudaGraphConfig: max_batch_size 0 -> 128, batch_sizes "
                                             "range(1, 32) + [32, 64, 128], enable_padding False"),
    kernels=Kernels(attention=Sourced("TensorRT-LLM XQA / FMHA kernels", "TensorRT-LLM docs, attention")),
    needs=Requirement("cuda", "TensorRT-LLM runs on NVIDIA GPUs (CUDA) only, not on {gpu}"),
    mixes_prefill=Sourced(True, "TensorRT-LLM docs, Paged Attention, IFB, and Request Scheduling: 'sequences in the "
                                "context phase can be processed together with sequences in the generation phase'; "
                                "the tuning guide's scheduler counts both against max_num_tokens"),
    schedules_ahead=Sourced(1, "TensorRT-LLM docs, Overlap Scheduler: 'At step n, the system launches GPU "
                               "computation for step n+1 without waiting for CPU tasks ... from step n'; enabled by "
                               "default (NVIDIA/TensorRT-LLM@fcd3f316 tensorrt_llm/llmapi/llm_args.py "
                               "disable_overlap_scheduler False)"),
    disaggregates=Sourced(True, "TensorRT-LLM docs, Disaggregated Serving: context and generation servers "
                                "(trtllm-serve disaggregated)"),
    request_overhead_s=FittedConstant("trtllm_request_overhead_s", "s per request"),  # fitted: its server's share
)

LMDEPLOY = EngineProfile(
    id="lmdeploy", name="LMDeploy",
    weight_formats=Sourced(ALL_FORMATS, "LMDeploy docs, quantization: AWQ W4A16, SmoothQuant W8A8, FP8"),
    formats_instead="",
    kv_formats=Sourced(frozenset({"fp16", "bf16"}),
                       LMDEPLOY_CONFIG + ": quant_policy 0 (16-bit), 4 or 8 (int4/int8 KV)"),
    kv_pool=Sourced("of_free", LMDEPLOY_CONFIG + ": cache_max_entry_count, a share of the free memory"),
    memory_fraction=Sourced(0.80, LMDEPLOY_CONFIG + ": cache_max_entry_count default 0.8"),
    activations=Sourced("whole_prefill", "gpuwise: LMDeploy's prefill buffers are not modelled apart; the prefill of "
                                         "the batch stands for them"),
    card_rules=Sourced((CardRule(unless_named=("a100", "a800", "h100", "h800", "h200", "l20y"), max_num_seqs=128),
                        CardRule(unless_named=("h100", "h800", "h200", "l20y"), max_num_seqs=384),
                        CardRule(max_num_seqs=1024)),
                       "InternLM/lmdeploy@726c5fe9 lmdeploy/utils.py get_max_batch_size: a100/a800 384, "
                       "h100/h800/l20y/h200 1024, other CUDA cards 128 (max_batch_size None)"),
    kernels=Kernels(attention=Sourced("TurboMind paged attention", "LMDeploy docs, TurboMind")),
)

HF = EngineProfile(
    id="hf", name="transformers generate",
    validate_runs="transformers' generate",  # gpuwise workload/trace/run.py run_inference
    weight_formats=Sourced(frozenset({"fp32", "bf16", "fp16", "fp8", "fp8-block", "int8", "mxfp4", "nvfp4", "int4",
                                      "awq-int4", "gptq-int4"}),
                           "transformers docs, GGUF: a GGUF checkpoint is dequantized when loaded"),
    formats_instead=("transformers dequantizes a GGUF checkpoint when it loads it on a GPU (transformers docs, GGUF): "
                     "with --engine hf give the dtype it runs in (--quant bf16), or use --engine llamacpp"),
    kv_formats=Sourced(frozenset({"fp16", "bf16"}), "transformers docs, KV cache strategies: DynamicCache in the "
                                                    "model's dtype (QuantizedCache: int2/int4 via quanto/HQQ, no fp8)"),
    kv_pool=Sourced("grows", "transformers DynamicCache grows with each generated token"),
    activations=Sourced("whole_prefill", "transformers generate: the prompt of the whole batch in one forward"),
    card_rules=Sourced((CardRule(max_num_seqs=256),), NO_SCHEDULER_CAP),
    eager=Sourced(True, "huggingface/transformers@c12eb355 docs/source/en/llm_optims.md: dynamic cache by default; "
                        "CUDA graphs only with a static cache and torch.compile"),
    absorbs_mla=Sourced(False, "transformers modeling_deepseek_v3.py: kv_b_proj decompresses the latent into per-head "
                               "keys and values"),
    own_attention=Sourced(False, "transformers attn_implementation: sdpa by default, flash_attention_2 from the "
                                 "flash-attn package"),
    kernels=Kernels(attention=Sourced("PyTorch SDPA", "transformers 5 modeling_utils: sdpa is the default")),
    host_ops=HostOps(
        norm=6, norm_casts=2, linear=4, rotary=16, attention=12, residual=2, gated_activation=2, moe=29, per_step=66,
        per_forward=28,
        source="transformers 5.25.0 modeling_llama.py, modeling_qwen3.py, modeling_qwen3_moe.py, "
               "modeling_mixtral.py, modeling_bert.py: aten operators of one bf16 decode step of generate, and of "
               "one forward of Llama and BERT, traced (gpuwise.workload.trace.host_ops): Llama 76 per layer, "
               "Qwen3 92 (QK-norm), Qwen3-MoE 111, Mixtral 97, 66 per decode step and 28 per plain forward; BERT 39 "
               "per layer, 14 per forward"),
    # host seconds per operator transformers dispatches: a global parameter fitted by benchmarks/fit.py (prior 30 us,
    # one H200 run; its bounds, prior source and the sources that informed it in gpuwise/fitted/parameters.yaml)
    launch_cost_s=FittedConstant("transformers_dispatch_s", "s per dispatched operator"),
)

LLAMACPP = EngineProfile(
    id="llamacpp", name="llama.cpp", kv_reuse=LLAMACPP_REUSE,
    weight_formats=Sourced(frozenset({"gguf-q4_k_m", "gguf-q8_0", "bf16", "fp16", "fp32", "mxfp4"}),
                           "llama.cpp docs/models.md: 'llama.cpp requires the model to be stored in the GGUF file "
                           "format'"),
    formats_instead=("llama.cpp runs GGUF files only (llama.cpp docs/models.md: 'llama.cpp requires the model to be "
                     "stored in the GGUF file format'; bf16/fp16/fp32 are unquantized GGUF, MXFP4 is ggml's type for "
                     "gpt-oss): use --quant gguf-q4_k_m or gguf-q8_0"),
    kv_formats=Sourced(frozenset({"fp16", "bf16", "q8_0", "q4_0"}),
                       LLAMACPP_ARGS + " kv_cache_types: f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1 (no "
                                       "fp8)"),
    kv_pool=Sourced("whole_context", "llama.cpp llama-context.cpp: the KV cache is allocated for the whole context"),
    activations=Sourced("compute_buffer", "llama.cpp llama-context.cpp graph_reserve: the worst-case graph of one "
                                          "micro-batch, with ggml's allocator reusing memory"),
    micro_batch_tokens=Sourced(512, LLAMACPP_COMMON + ": n_ubatch = 512"),
    card_rules=Sourced((CardRule(max_num_seqs=256),), NO_SCHEDULER_CAP),
    decode_scaled_off_cuda=Sourced(True, "gpuwise constants.LLAMACPP_DECODE_REFERENCE: one published llama-bench run "
                                         "per backend (ROCm, SYCL, Metal)"),
    splits_layers=Sourced("llama.cpp --split-mode layer", LLAMACPP_COMMON + ": split_mode LLAMA_SPLIT_MODE_LAYER"),
    expert_offload=Sourced("--n-cpu-moe", LLAMACPP_ARGS + ": --n-cpu-moe N, 'keep the Mixture of Experts (MoE) "
                                          "weights of the first N layers in the CPU' (a buffer override of "
                                          "blk.N.ffn_(up|down|gate)_exps)"),
    kernels=Kernels(attention=Sourced("ggml flash attention (-fa auto)", LLAMACPP_COMMON + ": flash_attn_type "
                                                                                          "AUTO"),
                    moe=Sourced("ggml mul_mat_id per expert", "ggml-cuda ggml_cuda_mul_mat_id")),
)

EXLLAMAV2 = EngineProfile(
    id="exllamav2", name="ExLlamaV2",
    weight_formats=Sourced(ALL_FORMATS, "turboderp/exllamav2@1cefef95 README.md: EXL2 at any average of 2-8 bits per "
                                        "weight (gpuwise sizes it by the --quant given)"),
    formats_instead="",
    kv_formats=Sourced(frozenset({"fp16", "fp8"}), "turboderp/exllamav2@e7053198 exllamav2/cache.py: FP16, 8-bit "
                                                   "(FP8 e5m2), Q4, Q6, Q8"),
    kv_pool=Sourced("grows", "exllamav2 ExLlamaV2Cache: sized for max_seq_len by the caller, in what is left"),
    activations=Sourced("whole_prefill", "gpuwise: exllamav2's prefill buffers are not modelled apart"),
    card_rules=Sourced((CardRule(max_num_seqs=256),), NO_SCHEDULER_CAP),
    splits_layers=Sourced("exllamav2 gpu_split", "turboderp/exllamav2@db14154f exllamav2/model.py load(gpu_split)"),
    kernels=Kernels(attention=Sourced("flash-attn or xformers", "exllamav2 README")),
)

IMAGE_FORMATS_INSTEAD = ("an image pipeline's denoiser runs bf16, fp16, fp8, gguf-q8_0 or gguf-q4_k_m (and nf4 on "
                         "diffusers)")
IMAGE_PIPELINE: dict[str, Any] = {
    "formats_instead": IMAGE_FORMATS_INSTEAD,
    "kv_formats": Sourced(frozenset(), "an image pipeline keeps no KV cache"),
    "kv_pool": Sourced("grows", "an image pipeline keeps no cache: nothing to pool"),
    "activations": Sourced("whole_prefill", "the denoiser's forward over the whole batch")}
"""What every image runtime shares: no KV cache, and the denoiser's forward over the whole batch."""
# eager PyTorch's host cost per dispatched operator (diffusers' modules): the fitted global parameter the estimators'
# EAGER_OVERHEAD reads too (prior 10 us: Horace He, 'Making Deep Learning Go Brrrr From First Principles')
EAGER_DISPATCH = FittedConstant("eager_dispatch_s", "s per dispatched operator")
DIFFUSERS = EngineProfile(
    id="diffusers", name="diffusers",
    validate_runs="diffusers' modules",  # gpuwise workload/trace/run_images.py run_pipeline
    weight_formats=Sourced(frozenset({"bf16", "fp16", "fp8", "nf4", "gguf-q8_0", "gguf-q4_k_m"}),
                           "diffusers docs: layerwise casting (fp8), bitsandbytes (nf4), GGUF checkpoints through "
                           "GGUFQuantizationConfig (dequantized per layer as it runs)"),
    **IMAGE_PIPELINE,
    card_rules=Sourced((CardRule(max_num_seqs=1),), "diffusers pipelines serve one call at a time"),
    eager=Sourced(True, "diffusers runs eager PyTorch modules unless the user compiles them (diffusers docs, "
                        "'Accelerate inference': torch.compile is opt-in)"),
    launch_cost_s=EAGER_DISPATCH,
    own_attention=Sourced(False, "diffusers AttnProcessor2_0: PyTorch SDPA"),
    kernels=Kernels(attention=Sourced("PyTorch SDPA (AttnProcessor2_0)", "diffusers models/attention_processor.py")),
    image=ImageRuntime(
        offload_modes=Sourced({"none": "pipe.to('cuda')", "model-cpu": "pipe.enable_model_cpu_offload()",
                               "sequential": "pipe.enable_sequential_cpu_offload()"},
                              "diffusers 0.42.1 pipelines/pipeline_utils.py DiffusionPipeline"),
        streams_by_free_memory=Sourced(False, "diffusers places what the offload mode says, whatever memory is free"),
        kept_free_bytes=Sourced(0.0, "diffusers keeps nothing free of its own"),
        working_floor_bytes=Sourced(0.0, "diffusers keeps nothing free of its own"),
        copies_pinned_overlapped=Sourced(False, "accelerate's offload hooks copy from pageable memory on the compute "
                                                "stream (gpuwise constants.HOST_COPY_PAGEABLE)"),
        fp8_every_linear=Sourced(False, "diffusers hooks/layerwise_casting.py skips norm* and the modulation "
                                        "linears (FluxTransformer2DModel._skip_layerwise_casting_patterns)")),
)

COMFY_MM = "comfyanonymous/ComfyUI@00184d15 comfy/model_management.py"
COMFYUI = EngineProfile(
    id="comfyui", name="ComfyUI",
    weight_formats=Sourced(frozenset({"bf16", "fp16", "fp8", "gguf-q8_0", "gguf-q4_k_m"}),
                           COMFY_MM + " unet_dtype (weight_dtype fp8_e4m3fn/e5m2, upcast per layer by comfy/ops.py "
                           "manual_cast); GGUF through the ComfyUI-GGUF custom node (city96/ComfyUI-GGUF, dequantized "
                           "per layer)"),
    **IMAGE_PIPELINE,
    card_rules=Sourced((CardRule(max_num_seqs=1),), "ComfyUI runs one queued prompt at a time"),
    eager=Sourced(True, "ComfyUI runs its own eager PyTorch modules (torch.compile only through an opt-in node)"),
    launch_cost_s=EAGER_DISPATCH,
    own_attention=Sourced(False, "ComfyUI comfy/ldm/modules/attention.py: PyTorch SDPA by default on CUDA"),
    kernels=Kernels(attention=Sourced("PyTorch SDPA (optimized_attention)", "ComfyUI comfy/ldm/modules/attention.py")),
    image=ImageRuntime(
        offload_modes=Sourced({"auto": "(default NORMAL_VRAM)", "none": "--highvram", "sequential": "--novram"},
                              COMFY_MM + " VRAMState; comfy/cli_args.py --highvram, --novram"),
        streams_by_free_memory=Sourced(True, COMFY_MM + " load_models_gpu: lowvram_model_memory = free memory less "
                                             "minimum_memory_required; the rest of the weights stay in RAM and "
                                             "comfy/ops.py cast_bias_weight copies them in per layer; models not "
                                             "in use are unloaded (free_memory) only when memory is needed"),
        kept_free_bytes=Sourced(400 * 2**20, COMFY_MM + " EXTRA_RESERVED_VRAM = 400 MiB on Linux (600 MiB on "
                                                         "Windows, 700 above 15 GB; --reserve-vram sets it)"),
        working_floor_bytes=Sourced(0.8 * 2**30, COMFY_MM + " minimum_inference_memory = 0.8 GiB + the reserve"),
        copies_pinned_overlapped=Sourced(True, "ComfyUI comfy/ops.py cast_bias_weight copies on "
                                               "model_management.get_offload_stream (async offload; "
                                               "--disable-async-offload turns it off) from pinned host memory "
                                               "(--disable-pinned-memory turns it off)"),
        fp8_every_linear=Sourced(True, "ComfyUI comfy/ops.py manual_cast: every Linear's weight stored in the "
                                       "fp8 weight_dtype (Comfy-Org's flux1-dev-fp8 checkpoint: about 11.9 GB for "
                                       "11.9 B transformer parameters)"),
        tiled_decode=Sourced(TiledDecode(tile_latent=64, overlap_latent=16, passes=3),
                             "ComfyUI comfy/sd.py VAE.decode: on an out-of-memory error it retries with "
                             "decode_tiled_(tile_x=64, tile_y=64, overlap=16), the mean of three tilings")),
)

ENGINES: dict[str, EngineProfile] = {p.id: p for p in (VLLM, SGLANG, TRTLLM, LMDEPLOY, HF, LLAMACPP, EXLLAMAV2)}
"""The engines a language-model inference job runs on (--engine)."""
IMAGE_ENGINES: dict[str, EngineProfile] = {p.id: p for p in (DIFFUSERS, COMFYUI)}
"""The runtimes an image pipeline runs on (--engine; diffusers unless told)."""
IMAGE_ENGINE = DIFFUSERS
