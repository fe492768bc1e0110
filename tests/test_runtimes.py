"""Each runtime profile field against the value its own source documents (the literal here is read from the cited
file or page, not from gpuwise's record), and the rules that read the records against the engines' own code paths
worked by hand."""

from __future__ import annotations

import pytest

from gpuwise import runtimes
from gpuwise.errors import ConfigError
from gpuwise.runtimes import rules
from gpuwise.runtimes.schema import Sourced

GIB = 2**30


def test_every_runtime_fact_names_its_source() -> None:
    profiles = [runtimes.engine(e) for e in (*runtimes.ENGINE_IDS, "diffusers")]
    profiles += [runtimes.framework(f) for f in runtimes.FRAMEWORK_IDS]
    for profile in profiles:
        for name, value in vars(profile).items():
            if isinstance(value, Sourced):
                assert len(value.source) > 15, (profile.id, name, value.source)
    assert set(runtimes.ENGINE_IDS) == {"vllm", "sglang", "trtllm", "lmdeploy", "hf", "llamacpp", "exllamav2"}
    assert set(runtimes.FRAMEWORK_IDS) == {"hf", "torchtune", "unsloth", "axolotl", "llama-factory", "deepspeed",
                                           "torchtitan", "megatron"}


@pytest.mark.parametrize(("engine", "fraction"), [
    ("vllm", 0.9),  # vllm/config/cache.py: gpu_memory_utilization: float = Field(default=0.9, ...)
    ("trtllm", 0.9),  # tensorrt_llm/llmapi/llm_args.py KvCacheConfig: free_gpu_memory_fraction default=0.9
    ("lmdeploy", 0.8),  # lmdeploy/messages.py TurbomindEngineConfig: cache_max_entry_count: float = 0.8
    ("hf", None), ("llamacpp", None), ("exllamav2", None),  # no pool sized from a share of memory
])
def test_memory_fractions_are_the_engines_defaults(engine: str, fraction: float | None) -> None:
    profile = runtimes.engine(engine)
    assert (profile.memory_fraction.value if profile.memory_fraction else None) == fraction
    assert profile.pooled == (fraction is not None)


@pytest.mark.parametrize(("memory_gib", "names", "seqs", "tokens"), [
    (80, ("h100-sxm-80gb", "NVIDIA H100 SXM5 80GB"), 1024, 8192),  # >= 70 GiB, not an A100
    (141, ("h200-sxm-141gb", "NVIDIA H200"), 1024, 8192),
    (80, ("a100-sxm-80gb", "NVIDIA A100 SXM4 80GB"), 256, 2048),  # "a100" in the device name
    (48, ("l40s", "NVIDIA L40S"), 256, 2048),
    (24, ("rtx-4090", "GeForce RTX 4090"), 256, 2048),
])
def test_vllm_batch_defaults_follow_get_batch_defaults(memory_gib: int, names: tuple[str, str], seqs: int,
                                                       tokens: int) -> None:
    """vllm/engine/arg_utils.py: 'if device_memory >= 70 * GiB_bytes and "a100" not in device_name': the OpenAI
    server's max_num_seqs 1024 and max_num_batched_tokens 8192, else 256 and 2048."""
    rule = rules.card_rule(runtimes.engine("vllm"), memory_gib * GIB, names)
    assert (rule.max_num_seqs, rule.max_batched_tokens) == (seqs, tokens)


@pytest.mark.parametrize(("memory_gib", "chunk", "graphs_small_tp", "graphs_large_tp"), [
    (16, 2048, 8, 8),  # gpu_mem < 20 * 1024 MiB: T4, 4080
    (24, 4096, 48, 160),  # < 35 * 1024: A10, 4090, 5090
    (40, 4096, 32, 160),  # < 60 * 1024: A100 40GB, L40
    (80, 8192, 256, 512),  # < 90 * 1024: H100
    (141, 8192, 256, 512),  # < 160 * 1024: H200
    (192, 16384, 512, 512),  # B200, MI300X
])
def test_sglang_memory_tiers(memory_gib: int, chunk: int, graphs_small_tp: int, graphs_large_tp: int) -> None:
    """sglang arg_groups/memory_hook.py handle_gpu_memory_settings: chunked_prefill_size and cuda_graph_max_bs."""
    rule = rules.card_rule(runtimes.engine("sglang"), memory_gib * GIB, ("card",))
    assert rule.max_batched_tokens == chunk
    assert rule.graph_max_batch == (graphs_small_tp, graphs_large_tp)
    assert rule.max_num_seqs is None  # max_running_requests: None, the KV pool bounds it


def test_sglang_captures_its_documented_batch_list() -> None:
    """[1, 2, 4, 8, 12] + range(16, 257, 8) + range(272, 512, 16) + range(512, max_bs + 1, 32), padded."""
    profile = runtimes.engine("sglang")
    rule = rules.card_rule(profile, 80 * GIB, ("h100",))
    sizes = rules.captured_sizes(profile.graphs, rule, tp=1, max_num_seqs=None)
    assert sizes == (1, 2, 4, 8, 12, *range(16, 257, 8))
    assert rules.graph_batch(profile.graphs, 13, sizes) == 16  # padded up
    large = rules.captured_sizes(profile.graphs, rules.card_rule(profile, 192 * GIB, ("b200",)), tp=8,
                                 max_num_seqs=None)
    assert large is not None and large[-1] == 512 and 496 in large and 500 not in large


def test_vllm_captures_up_to_twice_max_num_seqs_tokens() -> None:
    """vllm/config/vllm.py _set_cudagraph_sizes: [1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16) with max
    min(max_num_seqs x (1 + K) x 2, 512); a speculative step of K = 3 holds 4 tokens per sequence."""
    profile = runtimes.engine("vllm")
    rule = rules.card_rule(profile, 80 * GIB, ("h100",))
    plain = rules.captured_sizes(profile.graphs, rule, tp=1, max_num_seqs=1024)
    assert plain == (1, 2, 4, *range(8, 256, 8), *range(256, 513, 16))
    small = rules.captured_sizes(profile.graphs, rule, tp=1, max_num_seqs=16)
    assert small == (1, 2, 4, 8, 16, 24, 32)  # max 16 x 2 = 32 tokens
    spec = rules.captured_sizes(profile.graphs, rule, tp=1, max_num_seqs=1024, query=4)
    assert spec is not None and spec[-1] == 128 and 2 in spec  # 512 tokens / 4; 8 tokens -> 2 sequences
    assert rules.graph_batch(profile.graphs, 600, plain) is None  # above the largest: no graph


def test_trtllm_captures_without_padding() -> None:
    """tensorrt_llm llm_args.py CudaGraphConfig: batch sizes range(1, 32) + [32, 64, 128], enable_padding False."""
    profile = runtimes.engine("trtllm")
    sizes = rules.captured_sizes(profile.graphs, rules.card_rule(profile, 80 * GIB, ("h100",)), tp=1,
                                 max_num_seqs=2048)
    assert sizes == (*range(1, 32), 32, 64, 128)
    assert rules.graph_batch(profile.graphs, 40, sizes) is None
    assert rules.graph_batch(profile.graphs, 64, sizes) == 64
    assert rules.captured_sizes(runtimes.engine("hf").graphs, rules.card_rule(runtimes.engine("hf"), GIB, ()),
                                tp=1, max_num_seqs=1) is None


@pytest.mark.parametrize(("names", "batch"), [
    (("a100-sxm-80gb",), 384), (("h100-sxm-80gb",), 1024), (("h200-sxm-141gb",), 1024), (("l40s",), 128)])
def test_lmdeploy_batch_by_device_name(names: tuple[str], batch: int) -> None:
    """lmdeploy/utils.py get_max_batch_size: a100/a800 384, h100/h800/l20y/h200 1024, other CUDA cards 128."""
    assert rules.card_rule(runtimes.engine("lmdeploy"), 80 * GIB, names).max_num_seqs == batch


def test_llamacpp_runs_gguf_with_its_own_caches_and_splits_by_layers() -> None:
    profile = runtimes.engine("llamacpp")
    assert profile.weight_formats.value is not None and "awq-int4" not in profile.weight_formats.value
    assert profile.kv_formats.value == {"fp16", "bf16", "q8_0", "q4_0"}  # common/arg.cpp kv_cache_types: no fp8
    assert profile.micro_batch_tokens is not None and profile.micro_batch_tokens.value == 512  # n_ubatch
    assert profile.splits_layers is not None and "layer" in profile.splits_layers.value  # split_mode LAYER
    assert profile.decode_scaled_off_cuda.value


def test_transformers_generate_is_eager_and_keeps_mla_decompressed() -> None:
    hf = runtimes.engine("hf")
    assert hf.eager.value and not hf.absorbs_mla.value and not hf.own_attention.value
    assert hf.weight_formats.value is not None and "gguf-q4_k_m" not in hf.weight_formats.value
    assert not runtimes.engine("vllm").eager.value


@pytest.mark.parametrize(("framework", "values", "filled"), [
    # 8B_full_single_device.yaml: dtype bf16, activation checkpointing, CEWithChunkedOutputLoss, optimizer_in_bwd,
    # PagedAdamW8bit
    ("torchtune", {"method": "full"}, {"precision": "pure-bf16", "ckpt": "full", "loss": "chunked",
                                       "optimizer_in_backward": True, "optimizer": "paged-adamw-8bit"}),
    ("torchtune", {"method": "lora"}, {"precision": "pure-bf16", "ckpt": "full", "loss": "chunked"}),
    # full_finetune_distributed.py: FSDP2, reshard after forward (ZeRO-3)
    ("torchtune", {"method": "full", "count": 8}, {"precision": "pure-bf16", "ckpt": "full", "loss": "chunked",
                                                   "zero": 3}),
    # get_peft_model(use_gradient_checkpointing="unsloth"): offloaded checkpoints; fused cross-entropy
    ("unsloth", {}, {"loss": "fused", "ckpt": "full", "activation_offload": True}),
    ("unsloth", {"ckpt": "none"}, {"loss": "fused"}),
    ("torchtitan", {"count": 8}, {"ckpt": "selective", "precision": "bf16", "zero": 3}),
    ("axolotl", {}, {"ckpt": "full", "packed": True}),  # examples/llama-3: gradient_checkpointing, sample_packing
    ("llama-factory", {}, {"ckpt": "full"}),  # disable_gradient_checkpointing False
    ("megatron", {"count": 16, "tp": 8}, {"zero": 0}),  # use_distributed_optimizer False
    ("hf", {}, {}), ("deepspeed", {}, {}),
])
def test_framework_fills_are_its_recipes_defaults(framework: str, values: dict[str, object],
                                                   filled: dict[str, object]) -> None:
    assert rules.framework_fills(runtimes.framework(framework), values) == filled


def test_megatron_keeps_gradients_and_torchtune_runs_bf16_modules() -> None:
    assert runtimes.framework("megatron").persistent_gradients.value
    assert not runtimes.framework("torchtune").fp32_residual_under_autocast.value
    assert runtimes.framework(None).id == "hf"
    assert {f for f in runtimes.FRAMEWORK_IDS if runtimes.framework(f).fused_kernels.value} == {
        "unsloth", "torchtitan", "megatron"}


def test_an_unknown_runtime_is_refused_with_the_choices() -> None:
    with pytest.raises(ConfigError, match="use one of: vllm"):
        runtimes.engine("tgi")
    with pytest.raises(ConfigError, match="torchtune"):
        runtimes.framework("nemo")


def test_the_job_flags_accept_exactly_the_profiled_runtimes() -> None:
    """--engine and --framework are typed Literals for the CLI's help; each value has one profile and back."""
    from typing import get_args

    from gpuwise.workload.jobs.job import Engine, Framework

    assert set(get_args(Engine)) == set(runtimes.ENGINE_IDS)
    assert set(get_args(Framework)) == set(runtimes.FRAMEWORK_IDS)


def test_the_names_module_types_exactly_the_registries() -> None:
    """runtimes/names.py holds the Literal types the job schema imports; each is its registry's ids."""
    from typing import get_args

    from gpuwise.runtimes import names
    from gpuwise.runtimes.sharding import SHARDERS

    assert get_args(names.Engine) == runtimes.ENGINE_IDS
    assert get_args(names.ImageEngine) == runtimes.IMAGE_ENGINE_IDS
    assert set(get_args(names.Framework)) == set(runtimes.FRAMEWORK_IDS)
    assert set(get_args(names.Sharding)) == set(SHARDERS)
    assert set(get_args(names.ServingEngine)) < set(runtimes.ENGINE_IDS)


def test_bench_tools_name_their_engine_and_sources() -> None:
    """Each benchmark tool measures a profiled engine; llama-bench alone runs single-stream tests over the devices
    its gpu_info lists, and names no model id (its model_type describes the GGUF)."""
    from gpuwise.runtimes.bench_tools import BENCH_TOOLS, serving_tool

    for tool in BENCH_TOOLS.values():
        assert tool.engine.value in runtimes.ENGINE_IDS, tool.id
        for name, value in vars(tool).items():
            if isinstance(value, Sourced):
                assert len(value.source) > 15, (tool.id, name)
    single = {t.id for t in BENCH_TOOLS.values() if t.single_stream.value}
    assert single == {t.id for t in BENCH_TOOLS.values() if t.lists_devices.value} == {"llama-bench"}
    assert {t.id for t in BENCH_TOOLS.values() if not t.names_model.value} == {"llama-bench"}
    assert BENCH_TOOLS["llama-bench"].engine.value == "llamacpp"
    assert (serving_tool("sglang").id, serving_tool("openai").id, serving_tool(["x"]).id) == (
        "sglang bench_serving", "vllm bench serve", "vllm bench serve")


def test_validate_runs_transformers_generate_and_diffusers() -> None:
    """gpuwise validate runs transformers' generate (workload/trace/run.py) and diffusers' modules
    (workload/trace/run_images.py): the profiles that say so are those two."""
    assert [e for e in runtimes.ENGINE_IDS if runtimes.engine(e).validate_runs] == ["hf"]
    assert [e for e in runtimes.IMAGE_ENGINE_IDS if runtimes.engine(e).validate_runs] == ["diffusers"]
    assert (runtimes.VALIDATE_ENGINE.id, runtimes.VALIDATE_IMAGE_ENGINE.id) == ("hf", "diffusers")
