"""llama.cpp's --n-cpu-moe against hand-worked figures: which layers' experts leave the GPU, the host RAM they
take, the CPU's share of a decode step at the host's bandwidth, and the copy each prompt micro-batch makes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.catalog import load_catalog
from gpuwise.cli.main import app
from gpuwise.errors import ConfigError
from gpuwise.estimate import constants as C
from gpuwise.estimate.plan import InferPlan, resolve
from gpuwise.estimate.speed.expert_offload import (
    decode_host_s,
    host_expert_bytes,
    moe_layers,
    offloaded_layers,
    prefill_copy_s,
)
from gpuwise.workload.jobs.parse import make_job
from gpuwise.workload.model.resolve import resolve_model

runner = CliRunner()


def _plan(model: str, gpu: str = "rtx-5090", **job: object) -> InferPlan:
    catalog = load_catalog()
    found = resolve(resolve_model(model), make_job("infer", engine="llamacpp", batch=1, **job), catalog.gpus[gpu])
    assert isinstance(found, InferPlan)
    return found


def test_the_first_n_layers_are_counted_as_llama_cpp_counts_them() -> None:
    # gpt-oss-120b: 36 layers, all MoE (config.json num_hidden_layers 36); DeepSeek-V3: 61 layers, the first 3 dense
    # (first_k_dense_replace 3), so --n-cpu-moe 10 reaches the experts of layers 3..9
    assert moe_layers(_plan("openai/gpt-oss-120b")) == 36
    assert offloaded_layers(_plan("deepseek-ai/DeepSeek-V3", gpu="h200-sxm-141gb", cpu_moe=10)) == 7
    assert offloaded_layers(_plan("openai/gpt-oss-120b", cpu_moe=99)) == 36


def test_the_offloaded_experts_leave_the_gpu_for_host_ram() -> None:
    whole, held = _plan("openai/gpt-oss-120b"), _plan("openai/gpt-oss-120b", cpu_moe=36)
    assert host_expert_bytes(held) == pytest.approx(held.stored.expert_bytes)
    catalog = load_catalog()
    on_gpu = api.estimate("openai/gpt-oss-120b", gpu="rtx-5090", task="infer", engine="llamacpp", batch=1)
    moved = api.estimate("openai/gpt-oss-120b", gpu="rtx-5090", task="infer", engine="llamacpp", batch=1, cpu_moe=36)
    gap = on_gpu.memory.breakdown_bytes["weights"] - moved.memory.breakdown_bytes["weights"]
    assert gap == pytest.approx(whole.stored.expert_bytes)
    assert moved.memory.details["host_ram_bytes"] == pytest.approx(whole.stored.expert_bytes)
    assert catalog.gpus["rtx-5090"].memory_gb == 32 and moved.memory.fits and not on_gpu.memory.fits


def test_a_decode_step_reads_the_routed_experts_from_host_ram() -> None:
    plan = _plan("openai/gpt-oss-120b", cpu_moe=18)
    # one token: top-4 of 128 experts in each of the 18 layers, each expert 1/128 of its layer's expert bytes
    per_expert = plan.stored.expert_bytes / 36 / 128
    assert decode_host_s(plan, 1) == pytest.approx(18 * 4 * per_expert / (89.6e9 * 0.80))
    faster = _plan("openai/gpt-oss-120b", cpu_moe=18, host_bandwidth_gb_s=179.2)
    assert decode_host_s(faster, 1) == pytest.approx(decode_host_s(plan, 1) / 2)


def test_a_prompt_micro_batch_copies_the_held_experts_over_the_host_link() -> None:
    plan, catalog = _plan("openai/gpt-oss-120b", cpu_moe=18), load_catalog()
    link = catalog.interconnects[catalog.gpus["rtx-5090"].native_link]
    assert prefill_copy_s(plan, catalog, 512) == pytest.approx(host_expert_bytes(plan) / link.achieved_bytes_per_s)
    assert prefill_copy_s(plan, catalog, 8) == pytest.approx(decode_host_s(plan, 8))  # below ggml's 32: CPU runs it


def test_the_cpu_share_is_the_published_runs_arithmetic() -> None:
    # llama.cpp issue #4716: Mixtral Q8_0 (about 12.9 B active weights, 8.5 bits) at 3.37 tokens/s, 57.6 GB/s peak
    share = 12.9e9 * 8.5 / 8 * 3.37 / 57.6e9
    assert C.CPU_MATVEC_BANDWIDTH_SHARE.value == pytest.approx(share, abs=0.02)


def test_offload_is_refused_where_it_does_not_exist() -> None:
    with pytest.raises(ConfigError, match=r"llama\.cpp does"):
        make_job("infer", engine="vllm", cpu_moe=4)
    with pytest.raises(ConfigError, match="has none"):
        api.estimate("llama-3.1-8b", gpu="rtx-5090", task="infer", engine="llamacpp", cpu_moe=4)


def test_fit_suggests_the_fewest_layers_and_the_command_runs_as_printed() -> None:
    result = runner.invoke(app, ["fit", "openai/gpt-oss-120b", "--task", "infer", "--gpu", "rtx-5090", "--engine",
                                 "llamacpp", "--json"])
    assert result.exit_code == 0, result.output
    text = " ".join(json.loads(result.output)["plan"])
    assert "--n-cpu-moe" in text and "--tp" not in text
    layers = int(text.split("--n-cpu-moe")[1].split()[0])
    fits = api.estimate("openai/gpt-oss-120b", gpu="rtx-5090", task="infer", engine="llamacpp", cpu_moe=layers)
    fewer = api.estimate("openai/gpt-oss-120b", gpu="rtx-5090", task="infer", engine="llamacpp", cpu_moe=layers - 1)
    assert fits.memory.fits and not fewer.memory.fits
