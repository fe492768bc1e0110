"""Inference memory per engine against measured breakdowns: llm-d-planner's vLLM v0.19.0 runs on one H100-80GB at
--gpu-memory-utilization 0.95 (docs/accuracy/vllm-v0.19.0-accuracy-report.md, commit 2d557dca: weights, the
profiling run's activation peak and the KV pool vLLM logged), and llama.cpp's compute buffer worked by hand."""

from __future__ import annotations

import pytest

from gpuwise.catalog import Catalog
from gpuwise.estimate.memory.inference import inference_memory
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.resolve import resolve_model
from plans import infer_plan

GIB = 2**30
# model: (weights GiB, activation peak GiB, KV tokens) as vLLM v0.19.0 reported them (TP 1, max_model_len 8192)
MEASURED = {"llama-3.1-8b": (14.99, 1.89, 476_016), "qwen2.5-7b": (14.25, 2.21, 1_096_000)}


@pytest.mark.parametrize("model", sorted(MEASURED))
def test_vllm_pool_and_profile_peak_match_vllm_logs(model: str, shipped: Catalog) -> None:
    weights_gib, activation_gib, kv_tokens = MEASURED[model]
    gpu = shipped.gpus["h100-sxm-80gb"]
    memory = inference_memory(infer_plan(resolve_model(model), InferJob(engine="vllm", memory_fraction=0.95),
                                         gpu.id))
    assert memory.breakdown_bytes["weights"] / GIB == pytest.approx(weights_gib, rel=0.01)
    # the sampler over 1,024 rows (14 bytes per vocabulary entry) is the larger half of the profiling run
    assert memory.breakdown_bytes["activations"] / GIB == pytest.approx(activation_gib, rel=0.15)
    # the catalog's 80 GiB against the 79.19 GiB the card shows torch accounts for most of the rest
    assert memory.details["kv_tokens_per_gpu"] == pytest.approx(kv_tokens, rel=0.03)


def test_vllm_batch_defaults_follow_the_card() -> None:
    """vllm/engine/arg_utils.py get_batch_defaults (OpenAI server): 8,192 tokens and 1,024 sequences on cards of
    70 GiB or more that are not A100s."""
    arch = resolve_model("llama-3.1-8b")
    for gpu, limits in (("h100-sxm-80gb", (8192, 1024)), ("a100-sxm-80gb", (2048, 256)), ("rtx-4090", (2048, 256))):
        plan = infer_plan(arch, InferJob(engine="vllm"), gpu)
        assert (plan.max_batched_tokens, plan.max_num_seqs) == limits, gpu


def test_llama_cpp_compute_buffer_is_the_logits_of_one_micro_batch(shipped: Catalog) -> None:
    """512 tokens x 128,256 vocabulary x 4 bytes = 262.7 MB: llama.cpp logs 'CUDA0 compute buffer size' of about
    250-260 MiB for Llama-3-8B with flash attention."""
    gpu = shipped.gpus["rtx-4090"]
    job = InferJob(engine="llamacpp", quant="gguf-q4_k_m")
    memory = inference_memory(infer_plan(resolve_model("llama-3.1-8b"), job, gpu.id))
    assert memory.breakdown_bytes["activations"] == 512 * 128_256 * 4


def test_sglang_keeps_weights_and_pool_inside_its_static_fraction(shipped: Catalog) -> None:
    gpu = shipped.gpus["h100-sxm-80gb"]
    arch = resolve_model("llama-3.1-8b")
    memory = inference_memory(infer_plan(arch, InferJob(engine="sglang", memory_fraction=0.8), gpu.id))
    assert memory.kv_budget_bytes == pytest.approx(0.8 * gpu.usable_memory_bytes - memory.breakdown_bytes["weights"])


def test_mem_fraction_is_refused_for_an_engine_without_a_pool() -> None:
    with pytest.raises(ValueError, match="has none"):
        InferJob(engine="hf", memory_fraction=0.9)
