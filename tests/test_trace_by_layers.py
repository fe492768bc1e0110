"""A deep model's trace from two shallow ones (workload/trace/by_layers.py) gives the figures of the whole trace."""

from __future__ import annotations

import pytest

from gpuwise.workload.jobs.job import InferJob, TrainJob
from gpuwise.workload.trace.by_layers import layer_plan

pytest.importorskip("torch")
pytest.importorskip("transformers")

from gpuwise.workload.trace.by_layers import trace_by_layers
from gpuwise.workload.trace.steps import trace_inference, trace_training

DENSE = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 128, "num_hidden_layers": 9,
         "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 256, "vocab_size": 500,
         "tie_word_embeddings": False}
SLIDING = {"model_type": "qwen3", "hidden_size": 128, "num_hidden_layers": 10, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 256, "vocab_size": 500,
           "use_sliding_window": True, "sliding_window": 16, "max_window_layers": 0,
           "layer_types": ["sliding_attention", "full_attention"] * 5}


def _close(whole: object, extended: object) -> None:
    assert extended.peak_allocated_bytes == pytest.approx(whole.peak_allocated_bytes, rel=0.01)  # type: ignore[attr-defined]
    assert extended.flops_per_step == pytest.approx(whole.flops_per_step, rel=0.01)  # type: ignore[attr-defined]
    assert extended.kernels_per_step == pytest.approx(whole.kernels_per_step, rel=0.01)  # type: ignore[attr-defined]
    assert "extended to" in extended.method  # type: ignore[attr-defined]


@pytest.mark.parametrize("config", [DENSE, SLIDING], ids=["dense", "alternating"])
def test_a_training_step_traced_at_two_depths_matches_the_whole_trace(config: dict[str, object]) -> None:
    job = TrainJob(batch=2, seq=64, ckpt="full")
    _close(trace_training(config, job), trace_by_layers(config, lambda c: trace_training(c, job)))


def test_an_inference_step_traced_at_two_depths_matches_the_whole_trace() -> None:
    job = InferJob(engine="hf", quant="bf16", batch=2, input_len=64, output_len=8)
    _close(trace_inference(DENSE, job), trace_by_layers(DENSE, lambda c: trace_inference(c, job)))


def test_the_layer_pattern_is_read_from_the_config() -> None:
    assert layer_plan(DENSE) == (0, 1)
    assert layer_plan(SLIDING) == (0, 2)
    assert layer_plan({"num_hidden_layers": 61, "first_k_dense_replace": 3}) == (3, 1)
    assert layer_plan({"num_hidden_layers": 48, "mlp_only_layers": [0, 5]}) is None  # no pattern: traced whole
