"""Software maturity (issue 14): cards of other stacks are ranked by what was measured on them in the framework that
runs them, and where nothing was measured the output says so and applies the stated discount."""

from __future__ import annotations

import pytest

from gpuwise.catalog import Catalog
from gpuwise.estimate.estimate import estimate
from gpuwise.estimate.roofline import machine
from gpuwise.estimate.speed.inference import InferPerf
from gpuwise.estimate.speed.training import TrainPerf
from gpuwise.workload.jobs.job import InferJob, TrainJob
from gpuwise.workload.model.resolve import resolve_model

LLAMA_BENCH = InferJob(engine="llamacpp", quant="gguf-q4_k_m", batch=1, input_len=1, output_len=128)


def _decode(card: str, catalog: Catalog) -> float:
    perf = estimate(resolve_model("llama-2-7b"), LLAMA_BENCH, catalog.gpus[card], catalog).perf
    assert isinstance(perf, InferPerf) and perf.decode_tokens_per_s
    return perf.decode_tokens_per_s


@pytest.mark.parametrize(("card", "measured", "within"), [
    ("radeon-pro-w7900", 121.18, 0.10),  # llama.cpp discussion #15021, ROCm, llama 7B Q4_0 tg128
    ("ryzen-ai-max-395-128gb", 49.18, 0.15),  # lhl/strix-halo-testing raw_runs.jsonl, ROCm, tg128
])
def test_rocm_decode_holds_out_of_sample(card: str, measured: float, within: float, shipped: Catalog) -> None:
    """The ROCm scale comes from one RX 7900 XTX run; other ROCm cards, never used to set it, are the check."""
    assert _decode(card, shipped) == pytest.approx(measured, rel=within)


def test_a_data_center_card_is_not_scaled_by_a_consumer_reference(shipped: Catalog) -> None:
    perf = estimate(resolve_model("llama-2-7b"), LLAMA_BENCH, shipped.gpus["mi300x"], shipped).perf
    assert perf is not None and not any("scaled by" in a for a in perf.assumptions)


@pytest.mark.parametrize(("card", "dtype", "tflops"), [
    ("mi300x", "bf16", 668.4), ("gaudi2", "bf16", 418.7), ("gaudi3", "fp8", 1289.5),  # ml-engineering MAMF table
    ("rx-7900-xtx", "bf16", 99.37),  # torch-performance-test-data #58, ROCm 6.3
])
def test_matmuls_run_at_the_rate_measured_in_their_framework(card: str, dtype: str, tflops: float,
                                                              shipped: Catalog) -> None:
    m = machine(shipped.gpus[card], dtype)  # type: ignore[arg-type]
    assert m.peak_flops * m.gemm_efficiency == pytest.approx(tflops * 1e12, rel=1e-6)


def _train(card: str, catalog: Catalog) -> TrainPerf:
    perf = estimate(resolve_model("qwen2.5-1.5b"), TrainJob(method="lora", seq=1024), catalog.gpus[card], catalog).perf
    assert isinstance(perf, TrainPerf)
    return perf


def test_training_on_an_unmeasured_stack_is_discounted_and_says_so(shipped: Catalog) -> None:
    """RDNA cards have matmul measurements but no published end-to-end training run: the stated 30% cut applies and
    the assumptions name it; CUDA and data-center ROCm keep the model's speed."""
    from gpuwise.estimate.calibration import Calibration

    rdna = _train("rx-7900-xtx", shipped)
    assert any("no published end-to-end training measurement for rocm" in a for a in rdna.assumptions)
    for card in ("rtx-4090", "mi300x"):
        assert not any("no published end-to-end" in a for a in _train(card, shipped).assumptions)
    calibrated = estimate(resolve_model("qwen2.5-1.5b"), TrainJob(method="lora", seq=1024),
                          shipped.gpus["rx-7900-xtx"], shipped,
                          calibration=Calibration(gemm_flops={"bf16": 99.37e12})).perf
    assert isinstance(calibrated, TrainPerf)
    assert calibrated.tokens_per_s > rdna.tokens_per_s / 0.72  # the user's measurement replaces the policy cut
