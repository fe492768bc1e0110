"""One knob policy serves `fit` and `recommend`: the same table, the same capability check, the same words."""

from __future__ import annotations

import pytest

from gpuwise.catalog import Catalog
from gpuwise.estimate.fit import changes
from gpuwise.estimate.memory.knobs import EIGHT_BIT_ADAM, free_knobs
from gpuwise.workload.jobs.job import TrainJob
from gpuwise.workload.model.resolve import resolve_model

FULL = TrainJob(method="full", precision="bf16", optimizer="adamw", batch=4, seq=2048, ckpt="none")


@pytest.mark.parametrize(("gpu", "bitsandbytes"), [("rtx-4090", True), ("apple-m4-max-128gb", False)])
def test_8_bit_adam_is_offered_only_where_bitsandbytes_runs(gpu: str, bitsandbytes: bool, shipped: Catalog) -> None:
    """bitsandbytes has CUDA builds (and ROCm for some cards) but none for Apple's Metal (catalog software stack)."""
    arch, card = resolve_model("llama-3.2-1b"), shipped.gpu(gpu)
    fit_flags = {c.flags for c in changes(arch, FULL, card)}
    free = {k.flag for k in free_knobs(arch, TrainJob(), FULL, card)}
    assert (EIGHT_BIT_ADAM.flag in fit_flags) is bitsandbytes
    assert (EIGHT_BIT_ADAM.flag in free) is bitsandbytes


def test_fit_and_recommend_describe_a_knob_in_the_same_words(shipped: Catalog) -> None:
    arch, card = resolve_model("llama-3.2-1b"), shipped.gpu("rtx-4090")
    fit_rows = {c.flags: (c.description, c.tradeoff) for c in changes(arch, FULL, card)}
    for knob in free_knobs(arch, TrainJob(), FULL, card):
        if knob.flag in fit_rows:
            assert fit_rows[knob.flag] == (knob.what, knob.cost)


def test_recommend_keeps_what_the_user_set(shipped: Catalog) -> None:
    arch, card = resolve_model("llama-3.2-1b"), shipped.gpu("rtx-4090")
    mine = TrainJob(method="full", precision="bf16", optimizer="adamw", batch=4, seq=2048, ckpt="none")
    assert {k.free for k in free_knobs(arch, mine, mine, card)}.isdisjoint({"ckpt", "optimizer", "batch"})
    left_free = TrainJob(method="full")
    assert {"ckpt", "optimizer"} <= {k.free for k in free_knobs(arch, left_free, FULL, card)}


def test_a_fit_plan_names_each_flag_once_and_says_the_job_it_reaches(shipped: Catalog) -> None:
    """Halving a 131,072-token prompt twice is --input-len 32768, printed once: the flags, applied to the user's
    command, give exactly the job the plan estimated."""
    from gpuwise.estimate.fit import plan
    from gpuwise.workload.jobs.job import InferJob

    job = InferJob(engine="vllm", quant="awq-int4", input_len=131072, output_len=512, batch=8)
    flags, planned = plan(resolve_model("qwen2.5-32b"), job, shipped.gpu("rtx-3090"))
    assert planned is not None
    options = [token for flag in flags for token in flag.split() if token.startswith("--")]
    assert len(options) == len(set(options))
    assert f"--input-len {planned.input_len}" in flags and planned.input_len < job.input_len


def test_fit_suggests_only_what_llama_cpp_runs(shipped: Catalog) -> None:
    """llama.cpp splits a model by layers (no tensor parallelism), keeps its KV cache in f16/q8_0/q4_0 (no fp8:
    common/arg.cpp kv_cache_types), and gpt-oss ships MXFP4 (4.25 bits): Q4_K_M (4.89) would add bytes."""
    from gpuwise.estimate.fit import changes
    from gpuwise.workload.jobs.job import InferJob

    arch = resolve_model("gpt-oss-120b")
    job = InferJob(engine="llamacpp").for_checkpoint(arch.checkpoint)
    flags = " ".join(c.flags for c in changes(arch, job, shipped.gpu("rtx-5090")))
    assert "--tp" not in flags and "--kv-dtype fp8" not in flags and "--quant gguf-q4_k_m" not in flags
    assert "--kv-dtype q8_0" in flags  # llama.cpp's own 8-bit cache
    served = InferJob(engine="vllm").for_checkpoint(arch.checkpoint)
    assert "--kv-dtype fp8" in " ".join(c.flags for c in changes(arch, served, shipped.gpu("rtx-5090")))
