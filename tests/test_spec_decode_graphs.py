"""Speculative decoding (--spec-tokens/--spec-accept) and the engines' CUDA-graph capture sizes in a decode step."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpuwise.catalog.catalog import load_catalog
from gpuwise.cli.main import app
from gpuwise.estimate.speed.cuda_graphs import captured_sizes, graph_batch
from gpuwise.estimate.speed.inference import decode_step_s
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.resolve import resolve_model

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
    vllm = captured_sizes("vllm", 80, 1, 1024)
    assert vllm == (1, 2, 4, *range(8, 256, 8), *range(256, 513, 16))
    assert captured_sizes("vllm", 80, 1, 8) == (1, 2, 4, 8, 16)  # min(2 x max_num_seqs, 512)
    assert captured_sizes("sglang", 80, 1, 1024)[-1] == 256 and captured_sizes("sglang", 80, 4, 1024)[-1] == 512
    assert captured_sizes("sglang", 24, 1, 1024)[-1] == 24
    assert graph_batch("vllm", 17, vllm) == 24 and graph_batch("vllm", 600, vllm) is None
    trt = captured_sizes("trtllm", 80, 8, 2048)
    assert graph_batch("trtllm", 32, trt) == 32 and graph_batch("trtllm", 40, trt) is None
    assert captured_sizes("hf", 80, 1, 1) is None


def test_a_batch_the_engine_did_not_capture_pays_a_python_launch_per_kernel() -> None:
    """Llama-3.1-8B at TP 8 on H100s: a decode step is ~1,000 kernels of a few microseconds each. TensorRT-LLM
    replays a graph at batch 32 but launches 33 kernel by kernel, at least 10 us apiece: the step grows by more
    than half, while one more sequence adds almost nothing to the traffic."""
    arch, catalog = resolve_model("llama-3.1-8b"), load_catalog()
    gpu = catalog.gpu("h100-sxm-80gb")
    job = InferJob(engine="trtllm", tp=8, count=8, quant="bf16")
    graphed = decode_step_s(arch, job, gpu, catalog, batch=32, context=1024)
    eager = decode_step_s(arch, job, gpu, catalog, batch=33, context=1024)
    assert eager > 1.5 * graphed
    vllm = job.model_copy(update={"engine": "vllm"})
    assert decode_step_s(arch, vllm, gpu, catalog, batch=33, context=1024) == pytest.approx(
        decode_step_s(arch, vllm, gpu, catalog, batch=40, context=1024))  # padded to the captured 40
