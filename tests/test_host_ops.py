"""An eager runtime's host floor: transformers' decode is bound by the operators Python dispatches, and the
inventory in the HF engine profile adds up to what transformers' own code dispatches (traced)."""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.estimate.speed.eager import host_ops_per_step
from gpuwise.estimate.speed.inference import infer_perf
from gpuwise.runtimes import engine
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.resolve import resolve_model
from plans import infer_plan

TRACED = [  # (a config.json's model fields, the gpuwise model of that family)
    ({"model_type": "llama"}, "llama-3.1-8b"),
    ({"model_type": "qwen3"}, "qwen3-8b"),
    ({"model_type": "qwen3_moe", "num_experts": 128, "num_experts_per_tok": 8}, "qwen3-30b-a3b"),
    ({"model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2}, "mixtral-8x7b"),
]


@pytest.mark.parametrize(("config", "model"), TRACED, ids=[c["model_type"] for c, _ in TRACED])
def test_the_inventory_counts_what_transformers_dispatches_per_layer(config: dict[str, object], model: str) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from gpuwise.workload.trace.host_ops import decode_ops

    traced = decode_ops(config)
    arch = resolve_model(model)
    ops = engine("hf").host_ops
    assert ops is not None
    per_layer = (host_ops_per_step(arch, ops) - ops.per_step) / arch.layers
    assert per_layer == pytest.approx(traced.per_layer, rel=0.05)
    assert ops.per_step == pytest.approx(traced.per_step, rel=0.4)  # the generate loop (under 3 % of a step)


def _hf(batch: int, model: str = "llama-3.1-8b") -> InferJob:
    return InferJob(engine="hf", quant="bf16", batch=batch, input_len=512, output_len=128)


def test_generate_at_batch_one_is_bound_by_the_host_not_the_memory() -> None:
    """74.9 ms per step measured on an H200 (../shared/data/h200-runs.yaml), where reading 16 GB takes ~4 ms."""
    catalog = load_catalog(use_user_dir=False)
    perf = infer_perf(infer_plan(resolve_model("llama-3.1-8b"), _hf(1), "h200-sxm-141gb"), catalog)
    assert perf.tpot_ms == pytest.approx(74.9, rel=0.1)
    assert perf.ttft_ms is not None and perf.ttft_ms >= perf.tpot_ms  # a prefill dispatches as many operators


def test_a_host_bound_step_does_not_shorten_or_lengthen_with_the_batch() -> None:
    catalog = load_catalog(use_user_dir=False)
    one, many = (infer_perf(infer_plan(resolve_model("llama-3.1-8b"), _hf(b), "h200-sxm-141gb"), catalog)
                 for b in (1, 32))
    assert many.tpot_ms == pytest.approx(one.tpot_ms, rel=0.05)
    assert many.decode_tokens_per_s == pytest.approx(32 * one.decode_tokens_per_s, rel=0.05)


def test_a_compiled_engine_keeps_no_host_floor() -> None:
    """vLLM replays CUDA graphs: its decode of the same model at batch 1 is bound by memory (16 GB at ~4.2 TB/s)."""
    catalog = load_catalog(use_user_dir=False)
    job = InferJob(engine="vllm", quant="bf16", batch=1, input_len=512, output_len=128)
    perf = infer_perf(infer_plan(resolve_model("llama-3.1-8b"), job, "h200-sxm-141gb"), catalog)
    assert perf.tpot_ms is not None and 3.5 < perf.tpot_ms < 6.0
