"""Speculative decoding (--spec-tokens/--spec-accept) and the engines' CUDA-graph capture sizes in a decode step."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpuwise.catalog.catalog import load_catalog
from gpuwise.cli.main import app
from gpuwise.estimate.plan import InferPlan
from gpuwise.estimate.speed.inference import decode_step_s
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.resolve import resolve_model
from plans import infer_plan

runner = CliRunner()


@pytest.mark.parametrize(("k", "accept", "tokens"), [
    (0, None, 1.0),
    (3, 0.7, (1 - 0.7 ** 4) / 0.3),  # Leviathan et al. 2023 eq. 1: 2.5333
    (1, 1.0, 2.0),  # every draft accepted: K + 1 tokens
    (4, 0.5, 1.9375),  # 1 + 0.5 + 0.25 + 0.125 + 0.0625
])
def test_a_speculative_step_yields_the_expected_accepted_run(k: int, accept: float | None, tokens: float) -> None:
    assert InferJob(spec_tokens=k, spec_accept=accept).tokens_per_step == pytest.approx(tokens)


def _tpot_ms(*extra: str) -> float:
    args = ["serve-sim", "llama-3.1-70b", "--gpu", "h200-sxm-141gb", "--count", "8", "--tp", "8", "--quant", "fp8",
            "--kv-dtype", "fp8", "--input-len", "1024", "--output-len", "256", "--concurrency", "1", "--json", *extra]
    done = runner.invoke(app, args)
    assert done.exit_code == 0, done.output
    return float(json.loads(done.stdout)["at_concurrency"]["tpot_ms"]["mean"])


def test_speculation_pays_for_itself_only_when_drafts_are_accepted() -> None:
    """At batch 1 a step reads the weights once however many tokens it verifies, so a step of K = 3 drafts costs
    about one plain step plus three one-layer draft passes (80 layers): TPOT falls to (1 + 3/80) / 2.533 = 0.41 of
    the plain one at acceptance 0.7; at acceptance 0.05 the extra work is wasted and TPOT rises."""
    plain = _tpot_ms()
    good = _tpot_ms("--spec-tokens", "3", "--spec-accept", "0.7")
    bad = _tpot_ms("--spec-tokens", "3", "--spec-accept", "0.05")
    assert good / plain == pytest.approx((1 + 3 / 80) / ((1 - 0.7 ** 4) / 0.3), rel=0.12)
    assert bad > plain


def test_spec_tokens_without_an_acceptance_rate_is_a_one_line_error() -> None:
    done = runner.invoke(app, ["serve-sim", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--concurrency", "4",
                               "--spec-tokens", "3"])
    assert done.exit_code == 2
    assert "--spec-accept" in done.output and len(done.output.strip().splitlines()) == 1


def test_captured_sizes_are_each_engines_defaults() -> None:
    """vLLM: [1, 2, 4] + range(8, 256, 8) + range(256, 513, 16); SGLang: cuda_graph_max_bs 256 on an 80 GB card below
    TP 4, 512 from TP 4, 24 on a 24 GB card; TensorRT-LLM: 1..31, 32, 64, 128 and no padding."""
    arch = resolve_model("llama-3.1-8b")

    def plan(engine: str, gpu: str = "h100-sxm-80gb", **job: object) -> InferPlan:
        return infer_plan(arch, InferJob(engine=engine, **job), gpu)  # type: ignore[arg-type]

    vllm = plan("vllm")
    assert vllm.captured_sizes() == (1, 2, 4, *range(8, 256, 8), *range(256, 513, 16))
    assert plan("vllm", max_num_seqs=8).captured_sizes() == (1, 2, 4, 8, 16)  # min(2 x max_num_seqs, 512)
    sglang = plan("sglang").captured_sizes()
    sglang_tp4 = plan("sglang", tp=4, count=4).captured_sizes()
    assert sglang and sglang[-1] == 256 and sglang_tp4 and sglang_tp4[-1] == 512
    small = plan("sglang", "rtx-4090").captured_sizes()
    assert small and small[-1] == 48  # cuda_graph_max_bs 48 below 35 GiB at TP < 4 (sglang@a82da8da)
    assert vllm.graph_batch(17) == 24 and vllm.graph_batch(600) is None
    trt = plan("trtllm", tp=8, count=8)
    assert trt.graph_batch(32) == 32 and trt.graph_batch(40) is None
    assert plan("hf").captured_sizes() is None


def test_a_batch_the_engine_did_not_capture_pays_a_python_launch_per_kernel() -> None:
    """Llama-3.1-8B at TP 8 on H100s: a decode step is ~1,000 kernels of a few microseconds each. TensorRT-LLM
    replays a graph at batch 32 but launches 33 kernel by kernel, at least 10 us apiece (the fitted eager dispatch
    cost) against the graph's few microseconds per kernel: the step grows by more than a third, while one more
    sequence adds almost nothing to the traffic."""
    arch, catalog = resolve_model("llama-3.1-8b"), load_catalog()
    gpu = catalog.gpu("h100-sxm-80gb")
    job = InferJob(engine="trtllm", tp=8, count=8, quant="bf16")
    trt = infer_plan(arch, job, gpu.id)
    graphed = decode_step_s(trt, catalog, batch=32, context=1024)
    eager = decode_step_s(trt, catalog, batch=33, context=1024)
    assert eager > 1.3 * graphed
    vllm = infer_plan(arch, job.model_copy(update={"engine": "vllm"}), gpu.id)
    assert decode_step_s(vllm, catalog, batch=33, context=1024) == pytest.approx(
        decode_step_s(vllm, catalog, batch=40, context=1024))  # padded to the captured 40
