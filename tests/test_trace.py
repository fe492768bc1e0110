"""--trace: one training step of the model's own transformers code on fake tensors, against hand-worked byte counts
and a measured run (benchmarks/results/h200-2026-11-29/training.jsonl: torch.cuda.max_memory_allocated())."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwise.errors import ConfigError
from gpuwise.workload.job import TrainJob

pytest.importorskip("torch")
pytest.importorskip("transformers")

from gpuwise.workload.trace import trace_training

TINY = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000,
        "tie_word_embeddings": False}
# 2 x 1000 x 256 embedding and head + 2 layers x (q, o 256^2, k, v 256 x 128, gate/up/down 3 x 256 x 512, 2 norms)
# + the final norm
PARAMS = 2 * 1000 * 256 + 2 * (2 * 256 * 256 + 2 * 256 * 128 + 3 * 256 * 512 + 2 * 256) + 256
RESULTS = Path(__file__).parents[1] / "benchmarks" / "results" / "h200-2026-11-29" / "training.jsonl"


def test_fp32_adamw_holds_4_bytes_of_weights_and_8_of_states_per_parameter() -> None:
    traced = trace_training(TINY, TrainJob(batch=2, seq=64))
    assert traced.breakdown_bytes["parameters"] == 4 * PARAMS
    # fused AdamW (the HF Trainer's adamw_torch_fused): exp_avg and exp_avg_sq, plus a 4-byte step per tensor
    assert 8 * PARAMS <= traced.breakdown_bytes["optimizer"] <= 8 * PARAMS + 4 * 64
    # forward + backward: at least 6 FLOPs per weight per token through the linears (the attention adds some)
    assert traced.flops_per_step >= 6 * (PARAMS - 1000 * 256 - 2 * 2 * 256 - 256) * 2 * 64
    assert traced.kernels_per_step > 0


def test_pure_bf16_halves_weights_and_states() -> None:
    traced = trace_training(TINY, TrainJob(batch=2, seq=64, precision="pure-bf16"))
    assert traced.breakdown_bytes["parameters"] == 2 * PARAMS
    assert 4 * PARAMS <= traced.breakdown_bytes["optimizer"] <= 4 * PARAMS + 4 * 64


@pytest.mark.parametrize("batch", [4, 8])  # 4 x 2048 without checkpointing, 8 x 2048 with full checkpointing
def test_the_trace_lands_within_5_percent_of_a_measured_h200_run(batch: int) -> None:
    from gpuwise.workload.presets import presets

    row = next(json.loads(line) for line in RESULTS.read_text().splitlines()
               if '"llama-3.2-1b"' in line and f'"batch": {batch},' in line)
    job = TrainJob(batch=row["batch"], seq=row["seq"], ckpt=row["ckpt"])
    traced = trace_training(presets()["llama-3.2-1b"].config, job)
    assert traced.peak_allocated_bytes / 1e9 == pytest.approx(row["max_allocated_gb"], rel=0.05)


def test_checkpointing_keeps_less_than_the_full_activations() -> None:
    full = trace_training(TINY, TrainJob(batch=4, seq=256)).breakdown_bytes["activations"]
    checkpointed = trace_training(TINY, TrainJob(batch=4, seq=256, ckpt="full")).breakdown_bytes
    assert checkpointed.get("activations", 0.0) < full


def test_what_the_trace_does_not_run_is_refused() -> None:
    with pytest.raises(ConfigError, match="no CPU path"):
        trace_training(TINY, TrainJob(loss="fused"))
    with pytest.raises(ConfigError, match="not traced"):
        trace_training(TINY, TrainJob(ckpt="selective"))
    with pytest.raises(ConfigError, match="at most 200 layers"):
        trace_training({**TINY, "num_hidden_layers": 500}, TrainJob())
