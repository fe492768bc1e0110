"""--framework's recipe is filled once, by the plan, for the GPU count the job runs on (issue 38). These tests hold
every answer that starts from a parsed job -- recommend's card check, its SkyPilot task, fit's plan, --trace of a
bare job, a reproduce command, scale's rows -- to the job as the plan resolves it."""

from __future__ import annotations

import json
import shlex

import pytest
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.cli.main import app
from gpuwise.workload.jobs.job import TrainJob
from gpuwise.workload.jobs.parse import make_job

RUN = CliRunner()


def _json(args: str) -> dict:  # type: ignore[type-arg]
    done = RUN.invoke(app, [*shlex.split(args), "--json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.output)  # type: ignore[no-any-return]


def test_recommend_refuses_a_card_the_recipe_needs_a_package_for() -> None:
    """torchtune's single-device full recipe steps with bitsandbytes' PagedAdamW8bit; bitsandbytes has no ROCm build
    for Strix Halo, so that card cannot run the recipe gpuwise would estimate -- as `estimate` itself warns."""
    found = _json("recommend qwen3-8b --task train --framework torchtune --tokens 1e8")
    one_card = [o for o in found["options"] if o["gpu"] == "ryzen-ai-max-395-128gb"]
    assert not one_card
    reasons = [r["reason"] for r in found["rejected"] if r["gpu"] == "ryzen-ai-max-395-128gb" and r["count"] == 1]
    assert any("bitsandbytes" in r for r in reasons), reasons


def test_the_skypilot_task_runs_the_recipe_the_estimate_used() -> None:
    """A one-GPU option's task starts torchtune's single-device recipe with the optimizer it was estimated with."""
    done = RUN.invoke(app, shlex.split("recommend qwen3-8b --task train --framework torchtune --tokens 1e8 --rent "
                                       "--emit skypilot"))
    assert done.exit_code == 0, done.output
    runs = [line for line in done.output.splitlines() if "tune run" in line]
    assert runs and all("full_finetune_single_device" in r for r in runs)
    assert all("optimizer_in_bwd=True" in r and "PagedAdamW8bit" in r for r in runs)


def test_the_flags_fit_suggests_make_the_emit_succeed() -> None:
    """--emit refuses a job that does not fit and names the flags `gpuwise fit` would add; with them added, the same
    command emits (no loop through a flag the framework refuses, such as a fused loss torchtune lacks)."""
    asked = "estimate qwen3-8b --gpu rtx-4090 --framework torchtune --seq 16384 --batch 8 --emit torchtune"
    refused = RUN.invoke(app, shlex.split(asked))
    assert refused.exit_code != 0 and "makes it fit with " in refused.output
    flags = refused.output.split("makes it fit with ", 1)[1].split(":", 1)[0]
    assert "--loss fused" not in flags
    fixed = RUN.invoke(app, shlex.split(asked) + shlex.split(flags))
    assert fixed.exit_code == 0, fixed.output


def test_a_reproduce_command_spells_a_default_the_recipe_would_override() -> None:
    """The user's --ckpt none and --no-optim-in-bwd are defaults that torchtune's recipe would change; the printed
    command keeps them, so running it gives the option's own figures."""
    found = _json("recommend qwen3-8b --task train --framework torchtune --ckpt none --no-optim-in-bwd --tokens 1e8")
    option = found["options"][0]
    command = option["commands"][0]
    assert "--ckpt none" in command and "--no-optim-in-bwd" in command
    rerun = _json(command.removeprefix("gpuwise "))
    assert rerun["memory"]["per_gpu_gb"] == pytest.approx(option["per_gpu_gb"], rel=1e-3)


def test_scale_lets_the_framework_choose_its_stage() -> None:
    """Megatron-LM runs its distributed optimizer (its own stages 0 and 1), never ZeRO-3: scale's rows take the
    framework's stage for each count rather than forcing one (this raised a --zero 3 refusal before)."""
    rows = _json("scale qwen3-8b --gpu h100-sxm-80gb --framework megatron")
    assert len(rows) >= 4 and all("Megatron-LM" in r["runtime"] for r in rows)


def test_a_bare_job_is_traced_with_its_framework_recipe() -> None:
    """api.trace of a parsed job traces what its plan would run (torchtune's recipe filled), the same as tracing the
    estimate's plan."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    # --trace runs AdamW or SGD: the recipe's paged 8-bit AdamW is replaced, its other fills (pure bf16, checkpointing,
    # chunked loss, stepping in backward) stay the recipe's
    job = make_job("train", framework="torchtune", seq=256, optimizer="adamw")
    assert isinstance(job, TrainJob) and not job.framework_filled and job.ckpt == "none"
    result = api.estimate("qwen3-0.6b", gpu="h100-sxm-80gb", job=job)
    assert result.job.ckpt == "full" and result.job.optimizer_in_backward  # type: ignore[union-attr]
    bare, planned = api.trace("qwen3-0.6b", job), api.trace("qwen3-0.6b", result.plan)
    assert bare.peak_allocated_bytes == planned.peak_allocated_bytes
    assert bare.flops_per_step == planned.flops_per_step
