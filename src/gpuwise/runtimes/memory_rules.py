"""The engines' memory profiles by version, each with the source it is read from (runtimes/memory_profiles.py
says what each field means)."""

from __future__ import annotations

from gpuwise.runtimes.memory_profiles import FractionReserve, MemoryProfile

SGLANG_MEMORY = "sgl-project/sglang@a82da8da python/sglang/srt/arg_groups/memory_hook.py handle_gpu_memory_settings"

SORTED_SAMPLER_BYTES = 39.0  # per logit, as _SORTED_SAMPLER counts them
_SORTED_SAMPLER = ("the profiling sampler runs top_p and top_k = vocab - 1 (vllm-project/vllm#13594, "
                               "v1/worker/gpu_model_runner.py _dummy_sampler_run; V0 worker/model_runner.py "
                               "profile_run: top_p 0.99, top_k vocab - 1), so v1/sample/ops/topk_topp_sampler.py "
                               "apply_top_k_top_p sorts the whole vocabulary: bf16 logits 2, their fp32 copy 4, "
                               "sorted values 4 and int64 indices 8, softmax of the sorted 4, its cumsum 4, the mask "
                               "1, the scattered logits 4, then the probabilities 4 and exponential noise 4 = 39 B "
                               "per logit")
_V0 = ("vllm-project/vllm@v0.6.4 vllm/worker/worker.py Worker.determine_num_available_blocks: total x "
       "gpu_memory_utilization - peak torch memory of profile_run (weights included) - non-torch memory, then // "
       "cache block size; CUDA graphs captured afterwards from the rest; the driver rank alone samples, and the "
       "engine takes the smallest pool; vllm/engine/arg_utils.py: chunked prefill on by default when max_model_len "
       "> 32K (CUDA), vllm/config.py SchedulerConfig: max_num_batched_tokens 512 when chunked, else "
       "max(max_model_len, 2048), max_num_seqs 256")
_V1 = ("vllm-project/vllm@v0.8.0 vllm/v1/worker/gpu_worker.py Worker.determine_available_memory: requested = total x "
       "gpu_memory_utilization, less weights, the torch peak of profile_run (max_num_batched_tokens, then the "
       "sampler on every rank) and the non-torch increase; CUDA graphs captured after the KV cache, from the rest "
       "(V1 the default engine from 0.8)")
_TRITON_SAMPLER = ("vllm-project/vllm#33538 (merged 2026-02-02, first in v0.17): Triton top-k/top-p kernels replace "
                   "the full-vocabulary sort (about 80 MiB of buffers)")
_GRAPHS = ("vllm-project/vllm#30515 (gpu_worker.py determine_available_memory: cudagraph_memory_estimate = "
           "model_runner.profile_cudagraph_memory(), subtracted when VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS); on by "
           "default since v0.21.0 ('CUDA graph memory profiling is enabled (default since v0.21.0)', gpu_worker.py, "
           "as gpustack/runner#251 logs it)")
_NO_MLA = ("; before v0.7.1 vLLM ran DeepSeek-V2/V3 attention decompressed and cached each head's K and V "
           "(vllm/model_executor/models/deepseek_v2.py DeepseekV2Attention at v0.6.6: v padded to qk_head_dim "
           "for the attention kernel); the latent cache arrived with the MLA backend of v0.7.1 (January 2025; V1 "
           "followed in vllm-project/vllm#13789)")
_HYBRID = ("the hybrid KV cache allocator (v0.10): layers grouped by type, the printed tokens num_blocks // "
           "len(kv_cache_groups) x block size (v1/core/kv_cache_utils.py _report_kv_cache_config; the linear-state "
           "groups' share stays in the count while vllm-project/vllm#40384 is open)")
VLLM_MEMORY_PROFILES = (
    MemoryProfile(since=(0,), profile_tokens="model_len_unless_chunked", graphs_before_pool=False, max_num_seqs=256,
                  chunked_above_len=32768, chunk_tokens=512, source=_V0 + _NO_MLA + "; " + _SORTED_SAMPLER,
                  sampler_bytes_per_logit=SORTED_SAMPLER_BYTES, caches_latent=False),
    MemoryProfile(since=(0, 7, 1), profile_tokens="model_len_unless_chunked", graphs_before_pool=False,
                  max_num_seqs=256, chunked_above_len=32768, chunk_tokens=512, source=_V0 + "; " + _SORTED_SAMPLER,
                  sampler_bytes_per_logit=SORTED_SAMPLER_BYTES),
    MemoryProfile(since=(0, 8), profile_tokens="budget", graphs_before_pool=False, max_num_seqs=None,
                  chunked_above_len=None, chunk_tokens=None, source=_V1 + "; " + _SORTED_SAMPLER,
                  sampler_bytes_per_logit=SORTED_SAMPLER_BYTES),
    MemoryProfile(since=(0, 10), profile_tokens="budget", graphs_before_pool=False, max_num_seqs=None,
                  chunked_above_len=None, chunk_tokens=None, source=_V1 + "; " + _HYBRID + "; " + _SORTED_SAMPLER,
                  sampler_bytes_per_logit=SORTED_SAMPLER_BYTES, groups_layers=True),
    MemoryProfile(since=(0, 17), profile_tokens="budget", graphs_before_pool=False, max_num_seqs=None,
                  chunked_above_len=None, chunk_tokens=None, source=_V1 + "; " + _TRITON_SAMPLER,
                  groups_layers=True),
    MemoryProfile(since=(0, 21), profile_tokens="budget", graphs_before_pool=True, max_num_seqs=None,
                  chunked_above_len=None, chunk_tokens=None, source=_GRAPHS, groups_layers=True),
)

SGLANG_MEMORY_PROFILES = (
    MemoryProfile(since=(0,), profile_tokens="budget", graphs_before_pool=False, max_num_seqs=None,
                  chunked_above_len=None, chunk_tokens=None,
                  fraction_by_tp=((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88)),
                  source="sgl-project/sglang@v0.3.0 python/sglang/srt/server_args.py ServerArgs.__post_init__: "
                         "mem_fraction_static 0.79 at TP >= 16, 0.81 at >= 8, 0.85 at >= 4, 0.87 at >= 2, else "
                         "0.88; model_runner.py profile_max_num_token: pool = free memory after loading - free "
                         "memory at start x (1 - mem_fraction_static)"),
    MemoryProfile(since=(0, 5, 3), profile_tokens="budget", graphs_before_pool=False, max_num_seqs=None,
                  chunked_above_len=None, chunk_tokens=None,
                  fraction_reserve=FractionReserve(base_mib=512, per_token_mib=1.5, per_rank_mib=1024 / 8,
                                                   per_graph_seq_mib=2, floor_mib=10 * 1024, floor_above_gib=60),
                  source=SGLANG_MEMORY + " (sglang@031ed82d): reserved_mem = 512 + max(chunked_prefill_size, "
                         "2048) x 1.5 + tp x pp / 8 x 1024 + decode max_bs x 2 MiB, at least 10 GiB above 60 GiB; "
                         "mem_fraction_static = round((gpu_mem - reserved_mem) / gpu_mem, 3) (sgl-project/sglang"
                         "#10975, merged 2025-09-27; gpuwise takes v0.5.3 as its first release and leaves out the "
                         "prefill graphs' few MiB per captured size)"),
)

