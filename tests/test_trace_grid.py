"""The CI slice of benchmarks/trace_grid.py: the closed form against the trace of the model's own code on shrunk
copies (2 layers) of dense, biased, encoder and MoE architectures, for full fine-tuning, LoRA and QLoRA."""

from __future__ import annotations

from types import ModuleType

import pytest

from conftest import load_benchmark
from gpuwise.workload.jobs.job import TrainJob

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")



def _grid() -> ModuleType:
    return load_benchmark("trace_grid")


@pytest.mark.parametrize("preset", ["llama-3.2-1b", "qwen2.5-0.5b", "bert-large-uncased"])
@pytest.mark.parametrize("method", ["full", "lora", "qlora"])
def test_the_closed_form_lands_within_10_percent_of_the_trace(preset: str, method: str) -> None:
    grid = _grid()
    job = TrainJob(method=method, precision=grid.METHODS[method], batch=1, seq=256, ckpt="full")
    closed, traced = grid.case(preset, 2, job)
    assert closed / traced == pytest.approx(1.0, abs=0.10)


def test_moe_lora_counts_peft_s_merged_expert_weights() -> None:
    """PEFT's ParamWrapper holds W + B A for every expert: without that copy the closed form was at half the trace."""
    grid = _grid()
    closed, traced = grid.case("mixtral-8x7b", 2, TrainJob(method="lora", precision="bf16", batch=1, seq=256))
    assert 0.85 <= closed / traced <= 1.1
