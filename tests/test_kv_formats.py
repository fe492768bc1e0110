"""KV-cache formats as each engine keeps them (issue 28): llama.cpp's q8_0 and q4_0, and no format an engine lacks."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from gpuwise.cli.main import app
from gpuwise.errors import ConfigError
from gpuwise.estimate.memory.kv_cache import kv_bytes_per_token
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.resolve import resolve_model
from plans import infer_plan


@pytest.mark.parametrize(("kv", "bytes_per_value"), [("fp16", 2.0), ("q8_0", 34 / 32), ("q4_0", 18 / 32)])
def test_llama_cpp_quantized_kv_blocks(kv: str, bytes_per_value: float) -> None:
    """ggml-common.h: block_q8_0 is 32 int8 values and an fp16 scale (34 bytes), block_q4_0 32 4-bit values and
    an fp16 scale (18 bytes). Llama-3.1-8B keeps 2 x 32 layers x 8 KV heads x 128 values per token."""
    job = InferJob(engine="llamacpp", quant="gguf-q4_k_m", kv_dtype=kv)
    plan = infer_plan(resolve_model("llama-3.1-8b"), job)
    assert kv_bytes_per_token(plan) == pytest.approx(2 * 32 * 8 * 128 * bytes_per_value)


@pytest.mark.parametrize(("engine", "kv"), [("llamacpp", "fp8"), ("vllm", "q8_0"), ("hf", "fp8")])
def test_a_kv_format_the_engine_lacks_is_refused(engine: str, kv: str) -> None:
    """llama.cpp has no fp8 cache (common/arg.cpp kv_cache_types), vLLM no q8_0, transformers' DynamicCache no fp8."""
    with pytest.raises(ConfigError, match="keeps its KV cache as"):
        _build(engine, kv)
    done = CliRunner().invoke(app, ["estimate", "llama-3.1-8b", "--task", "infer", "--gpu", "rtx-4090", "--engine",
                                    engine, "--kv-dtype", kv])
    assert done.exit_code == 2 and "--kv-dtype" in done.output


def _build(engine: str, kv: str) -> InferJob:
    from gpuwise.flags import build

    return build(InferJob, {"engine": engine, "kv_dtype": kv})
