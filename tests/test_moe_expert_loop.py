"""The expert loop of transformers' MoE: a sparse MoE block that loops in Python over the experts that received tokens
dispatches its loop body once per such expert, so its host time grows with the experts a forward touches -- top-k at
a batch-1 decode step, nearly all of them in a prefill. The body's operators are counted here from the transformers
source line by line, checked against a trace of the installed transformers, and the estimator's charge (speed/eager.py
``host_ops_per_step``) against that count.

transformers 5 defaults to one grouped GEMM instead (modeling_utils.py get_correct_experts_implementation:
``"grouped_mm" if requested_experts is None``): the loop runs with experts_implementation="eager", and it is the only
path of transformers 4 (Qwen3MoeSparseMoeBlock at huggingface/transformers@16b6c53c loops over an nn.ModuleList, 20
operators per expert: self.experts[idx] (_local_scalar_dense), torch.where(expert_mask[idx].squeeze(0)) (index, squeeze,
nonzero, unbind), hidden_states[None, top_x].reshape (unsqueeze, index, view), the expert MLP (three t + mm, silu,
mul), routing_weights[top_x, idx, None] (index, unsqueeze), the product (mul), index_add_).
"""

from __future__ import annotations

import collections
from dataclasses import replace
from typing import Any

import pytest

from gpuwise.estimate.speed.eager import host_ops_per_step
from gpuwise.estimate.speed.operators import experts_touched
from gpuwise.runtimes import engine
from gpuwise.runtimes.schema import HostOps
from gpuwise.workload.model.resolve import resolve_model

EAGER_LOOP_BODY = {  # transformers 5.25.0 modeling_qwen3_moe.py Qwen3MoeExperts.forward, one iteration
    "expert_idx = expert_idx[0]": {"select": 1},
    "if expert_idx == self.num_experts": {"eq": 1, "_local_scalar_dense": 1},  # bool() of a tensor syncs
    "torch.where(expert_mask[expert_idx])": {"_local_scalar_dense": 1, "select": 1, "nonzero": 1, "unbind": 1},
    "hidden_states[token_idx]": {"index": 1},
    "nn.functional.linear(current_state, self.gate_up_proj[expert_idx])": {"_local_scalar_dense": 1, "select": 1,
                                                                          "t": 1, "mm": 1},
    ".chunk(2, dim=-1)": {"split": 1},
    "self.act_fn(gate) * up": {"silu": 1, "mul": 1},
    "nn.functional.linear(current_hidden_states, self.down_proj[expert_idx])": {"_local_scalar_dense": 1,
                                                                               "select": 1, "t": 1, "mm": 1},
    "current_hidden_states * top_k_weights[token_idx, top_k_pos, None]": {"index": 1, "unsqueeze": 1, "mul": 1},
    "final_hidden_states.index_add_(0, token_idx, ...)": {"index_add_": 1},  # .to(the same dtype) dispatches nothing
}
PER_EXPERT = sum(sum(ops.values()) for ops in EAGER_LOOP_BODY.values())
MOE_AROUND_THE_LOOP = 17  # the block besides its router linear: softmax, topk, the top-k sum and division, zeros_like,
# one_hot (zeros, aminmax, scatter_), permute, sum, gt, nonzero, the loop's unbind -- the trace's 21 less the router
# linear's 4 that HostOps.linear counts

def test_one_iteration_of_the_eager_loop_dispatches_23_operators() -> None:
    assert PER_EXPERT == 23


def _block_ops(implementation: str, hit: int) -> int:
    import torch
    import transformers
    from torch.utils._python_dispatch import TorchDispatchMode
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    class Counter(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: collections.Counter[str] = collections.Counter()

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            self.ops[str(func.overloadpacket).removeprefix("aten.")] += 1
            return func(*args, **(kwargs or {}))

    config = transformers.AutoConfig.for_model("qwen3_moe", hidden_size=64, moe_intermediate_size=32, num_experts=16,
                                               num_experts_per_tok=hit, experts_implementation=implementation)
    config._experts_implementation_internal = implementation
    block = Qwen3MoeSparseMoeBlock(config).to(torch.bfloat16).eval()  # a zero router: one token hits k experts
    x = torch.randn(1, 1, 64, dtype=torch.bfloat16)
    counter = Counter()
    with torch.no_grad():
        block(x)
        with counter:
            block(x)
    return sum(counter.ops.values())


def test_the_installed_transformers_dispatches_what_the_source_count_says() -> None:
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    if not transformers.__version__.startswith("5."):
        pytest.skip("the count is of transformers 5's Qwen3MoeExperts")
    linear = engine("hf").host_ops.linear  # type: ignore[union-attr]
    for hit in (2, 8):
        assert _block_ops("eager", hit) == linear + MOE_AROUND_THE_LOOP + PER_EXPERT * hit
        # the grouped path the engine profile traced: the same for any number of experts hit
        assert _block_ops("grouped_mm", hit) == linear + engine("hf").host_ops.moe  # type: ignore[union-attr]


def _looped() -> HostOps:
    grouped = engine("hf").host_ops
    assert grouped is not None and grouped.per_expert == 0
    return replace(grouped, moe=MOE_AROUND_THE_LOOP, per_expert=PER_EXPERT)


def test_a_decode_step_runs_the_loop_for_top_k_experts_per_layer() -> None:
    """Qwen3-30B-A3B, 48 MoE layers of 128 experts, top-8: at batch 1 each layer's loop runs 8 times."""
    arch, looped, grouped = resolve_model("qwen3-30b-a3b"), _looped(), engine("hf").host_ops
    assert grouped is not None
    extra = host_ops_per_step(arch, looped, tokens=1) - host_ops_per_step(arch, grouped, tokens=1)
    assert extra == pytest.approx(48 * (MOE_AROUND_THE_LOOP - grouped.moe + PER_EXPERT * 8), rel=1e-9)
    # the step: 66 + 48 x 111 operators grouped, 66 + 48 x 283 looped -- 2.5 times the host time
    assert host_ops_per_step(arch, looped, tokens=1) / host_ops_per_step(arch, grouped, tokens=1) == pytest.approx(
        (66 + 48 * 283) / (66 + 48 * 111), rel=1e-9)


def test_a_prefill_runs_the_loop_for_nearly_every_expert() -> None:
    arch, looped = resolve_model("qwen3-30b-a3b"), _looped()
    ffn = arch.blocks[0].ffn
    assert experts_touched(ffn, 512) == pytest.approx(128, rel=1e-3)
    one, prompt = (host_ops_per_step(arch, looped, tokens=t) for t in (1, 512))
    assert prompt - one == pytest.approx(48 * PER_EXPERT * (experts_touched(ffn, 512) - 8), rel=1e-9)


def test_a_grouped_block_does_not_depend_on_the_tokens() -> None:
    arch, grouped = resolve_model("qwen3-30b-a3b"), engine("hf").host_ops
    assert grouped is not None
    assert host_ops_per_step(arch, grouped, tokens=1) == host_ops_per_step(arch, grouped, tokens=4096)


def test_the_looped_inventory_sets_a_transformers_decode_of_qwen3_30b_a3b() -> None:
    """End to end: the transformers engine with the looped inventory decodes Qwen3-30B-A3B at batch 1 on an H200 at
    the host's pace, (66 + 48 x 283) operators x its launch_cost_s per token."""
    from gpuwise.catalog import load_catalog
    from gpuwise.estimate.speed.inference import infer_perf
    from gpuwise.workload.jobs.job import InferJob
    from plans import infer_plan

    job = InferJob(engine="hf", quant="bf16", batch=1, input_len=512, output_len=128)
    plan = infer_plan(resolve_model("qwen3-30b-a3b"), job, "h200-sxm-141gb")
    looped = replace(plan, engine=replace(plan.engine, host_ops=_looped()))
    cost = plan.engine.launch_cost_s
    assert cost is not None
    perf = infer_perf(looped, load_catalog(use_user_dir=False))
    assert perf.tpot_ms == pytest.approx((66 + 48 * 283) * cost.value * 1e3, rel=0.01)
    assert perf.bound == "host"
