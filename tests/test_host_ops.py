"""An eager runtime's host floor: transformers' decode is bound by the operators Python dispatches, and the
inventory in the HF engine profile adds up to what transformers' own code dispatches (traced)."""

from __future__ import annotations

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.estimate.speed.eager import host_ops_per_step
from gpuwise.estimate.speed.inference import infer_perf
from gpuwise.runtimes import engine
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.resolve import resolve_model
from plans import infer_plan

TRACED = [  # (a config.json's model fields, the gpuwise model of that family)
    ({"model_type": "llama"}, "llama-3.1-8b"),
    ({"model_type": "qwen3"}, "qwen3-8b"),
    ({"model_type": "qwen3_moe", "num_experts": 128, "num_experts_per_tok": 8}, "qwen3-30b-a3b"),
    ({"model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2}, "mixtral-8x7b"),
]


@pytest.mark.parametrize(("config", "model"), TRACED, ids=[c["model_type"] for c, _ in TRACED])
def test_the_inventory_counts_what_transformers_dispatches_per_layer(config: dict[str, object], model: str) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from gpuwise.workload.trace.host_ops import decode_ops

    traced = decode_ops(config)
    arch = resolve_model(model)
    ops = engine("hf").host_ops
    assert ops is not None
    per_layer = (host_ops_per_step(arch, ops) - ops.per_step) / arch.layers
    assert per_layer == pytest.approx(traced.per_layer, rel=0.05)
    assert ops.per_step == pytest.approx(traced.per_step, rel=0.4)  # the generate loop (under 3 % of a step)


def _hf(batch: int, model: str = "llama-3.1-8b") -> InferJob:
    return InferJob(engine="hf", quant="bf16", batch=batch, input_len=512, output_len=128)


def test_generate_at_batch_one_is_bound_by_the_host_not_the_memory() -> None:
    """74.9 ms per step measured on an H200 (../shared/data/h200-runs.yaml), where reading 16 GB takes ~4 ms."""
    catalog = load_catalog(use_user_dir=False)
    perf = infer_perf(infer_plan(resolve_model("llama-3.1-8b"), _hf(1), "h200-sxm-141gb"), catalog)
    assert perf.tpot_ms == pytest.approx(74.9, rel=0.1)
    assert perf.ttft_ms is not None and perf.ttft_ms >= perf.tpot_ms  # a prefill dispatches as many operators


def test_a_host_bound_step_does_not_shorten_or_lengthen_with_the_batch() -> None:
    catalog = load_catalog(use_user_dir=False)
    one, many = (infer_perf(infer_plan(resolve_model("llama-3.1-8b"), _hf(b), "h200-sxm-141gb"), catalog)
                 for b in (1, 32))
    assert many.tpot_ms == pytest.approx(one.tpot_ms, rel=0.05)
    assert many.decode_tokens_per_s == pytest.approx(32 * one.decode_tokens_per_s, rel=0.05)


def test_a_compiled_engine_keeps_no_host_floor() -> None:
    """vLLM replays CUDA graphs: its decode of the same model at batch 1 is bound by memory (16 GB at ~4.2 TB/s)."""
    catalog = load_catalog(use_user_dir=False)
    job = InferJob(engine="vllm", quant="bf16", batch=1, input_len=512, output_len=128)
    perf = infer_perf(infer_plan(resolve_model("llama-3.1-8b"), job, "h200-sxm-141gb"), catalog)
    assert perf.tpot_ms is not None and 3.5 < perf.tpot_ms < 6.0


def _training_forward_ops(lora: bool, layers: int) -> int:
    import collections

    import torch
    import transformers
    from torch.utils._python_dispatch import TorchDispatchMode

    class Counter(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: collections.Counter[str] = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if not str(func).startswith("prim."):
                self.ops[str(func.overloadpacket)] += 1
            return func(*args, **(kwargs or {}))

    config = transformers.AutoConfig.for_model("llama", hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                                               num_attention_heads=4, num_key_value_heads=2, vocab_size=256)
    config._attn_implementation = "sdpa"
    model = transformers.AutoModelForCausalLM.from_config(config).to(torch.bfloat16)
    if lora:
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=8, target_modules="all-linear"))
    model.train()
    ids = torch.randint(0, 256, (2, 32))
    model(input_ids=ids)  # the first call takes one-time paths
    counter = Counter()
    with counter:
        model(input_ids=ids)
    return sum(counter.ops.values())


def test_peft_dispatches_what_the_framework_profile_says_per_adapted_linear() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    import warnings

    from gpuwise.runtimes import framework

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        extra = [_training_forward_ops(True, n) - _training_forward_ops(False, n) for n in (2, 4)]
    per_linear = (extra[1] - extra[0]) / 2 / 7  # seven adapted linears per Llama layer
    assert framework("hf").adapter_dispatches == pytest.approx(per_linear, rel=0.1)


def test_a_small_lora_step_waits_for_the_host_to_dispatch_transformers_and_peft() -> None:
    """At batch 1 an 8B LoRA forward on an H200 is the host's: 28 + 32 x 76 + 224 adapted linears x 12 operators at
    30 us each, about 0.15 s, where the GPU needs a few tens of milliseconds."""
    from gpuwise.estimate.speed.eager import training_forward_host_s
    from gpuwise.workload.jobs.job import TrainJob
    from plans import train_plan

    plan = train_plan(resolve_model("llama-3.1-8b"), TrainJob(method="lora", batch=1, seq=2048), "h200-sxm-141gb")
    assert training_forward_host_s(plan) == pytest.approx((28 + 32 * 76 + 224 * 12) * 30e-6, rel=0.01)


def test_a_small_lora_step_says_it_is_host_bound_and_a_large_one_does_not() -> None:
    from gpuwise import api
    from gpuwise.workload.jobs.job import TrainJob

    small, large = (api.estimate("llama-3.1-8b", gpu="h200-sxm-141gb", job=TrainJob(method="lora", batch=b, seq=2048))
                    for b in (1, 8))
    assert small.perf is not None and small.perf.bound == "host"
    assert large.perf is not None and large.perf.bound == "compute"


def test_a_traced_training_step_pays_the_framework_s_own_host_cost_per_operator() -> None:
    """The traced step (speed/traced.py) and the closed form charge one dispatched operator the same: the runtime
    profile's launch_cost_s where it has one (transformers' modules under the HF stacks), so a fitted or calibrated
    value reaches both."""
    from dataclasses import replace

    from gpuwise.estimate.speed.eager import host_s_per_dispatch, training_forward_host_s
    from gpuwise.runtimes.schema import Sourced
    from gpuwise.workload.jobs.job import TrainJob
    from plans import train_plan

    plan = train_plan(resolve_model("llama-3.1-8b"), TrainJob(batch=1, seq=2048), "h200-sxm-141gb")
    slower = replace(plan, framework=replace(plan.framework, launch_cost_s=Sourced(45e-6, "a test's host")))
    assert host_s_per_dispatch(slower) == 45e-6
    assert training_forward_host_s(slower) == pytest.approx(1.5 * training_forward_host_s(plan), rel=1e-9)
