"""--ep: expert parallelism with data-parallel attention (the DeepSeek-V3 report's decoding deployment, sec. 3.4;
SGLang --enable-dp-attention, vLLM --enable-expert-parallel), against hand-worked shapes."""

from __future__ import annotations

import pytest

from gpuwise.catalog import Catalog
from gpuwise.errors import ConfigError
from gpuwise.estimate import constants as C
from gpuwise.estimate.estimate import estimate
from gpuwise.estimate.speed.inference import _tp_comm_s
from gpuwise.estimate.speed.parallel import intra_node_link
from gpuwise.estimate.weights import weights
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.resolve import resolve_model
from plans import infer_plan

# DeepSeek-V3: 58 MoE layers of 256 routed experts, each 3 x 7168 x 2048 weights (config.json)
ROUTED = 58 * 256 * 3 * 7168 * 2048


def test_every_gpu_keeps_the_dense_weights_and_its_share_of_the_experts(shipped: Catalog) -> None:
    arch, card = resolve_model("deepseek-v3"), shipped.gpus["h200-sxm-141gb"]
    stored = weights(arch, "fp8-block")
    assert stored.expert_params == ROUTED
    ep = estimate(arch, InferJob(count=8, ep=8, batch=64), card).memory
    tp = estimate(arch, InferJob(count=8, tp=8, batch=64), card).memory
    per_weight = stored.expert_bytes_per_weight
    assert ep.breakdown_bytes["weights"] == pytest.approx(stored.bytes - ROUTED * per_weight * 7 / 8)
    assert tp.breakdown_bytes["weights"] == pytest.approx(stored.bytes / 8)
    # each GPU caches only its own 8 of the 64 sequences
    # each GPU caches its own 8 of the 64 sequences; under TP every GPU holds all 64 (the MLA latent is not split)
    assert ep.breakdown_bytes["kv_cache"] == pytest.approx(tp.breakdown_bytes["kv_cache"] / 8)


def test_the_all_to_all_carries_each_tokens_top_k_copies(shipped: Catalog) -> None:
    """Dispatch and combine per MoE layer: each GPU sends (ep - 1)/ep of its tokens x top-k x hidden x 2 bytes."""
    arch, card = resolve_model("deepseek-v3"), shipped.gpus["h200-sxm-141gb"]
    job = InferJob(count=8, ep=8, batch=64, quant="fp8-block")
    link = intra_node_link(card, shipped)
    local = 64 / 8 * 8 * 7168 * 2  # 8 tokens on this GPU, 8 experts each, bf16 activations
    one = 7 / 8 * local / link.achieved_bytes_per_s + C.COLLECTIVE_LATENCY.value
    plan = infer_plan(arch, job, card.id)
    assert _tp_comm_s(plan, plan.job, 64, shipped) == pytest.approx(2 * 58 * one)


def test_ep_is_refused_where_it_means_nothing(shipped: Catalog) -> None:
    with pytest.raises(ConfigError, match="has none"):
        estimate(resolve_model("qwen3-8b"), InferJob(count=2, ep=2), shipped.gpus["h100-sxm-80gb"])
    with pytest.raises(ValueError, match="does not divide the replica's 2 GPUs"):
        InferJob(count=8, ep=4, tp=2)  # TP 2 without attention DP: a replica of 2 GPUs cannot hold EP 4


def test_tp_with_ep_and_attention_dp_shape_the_replica() -> None:
    """vLLM TP 4 + --enable-expert-parallel: one replica of 4 GPUs, every GPU sees the whole batch; SGLang TP 4 x
    DP-attention 4 with EP 16: a replica of 16 GPUs, each group attending to a quarter of the batch."""
    tp_ep = InferJob(count=4, tp=4, ep=4, batch=32)
    assert tp_ep.replica_gpus == 4 and tp_ep.local_batch == 32
    dp = InferJob(count=16, tp=4, ep=16, dp_attention=4, batch=32)
    assert dp.replica_gpus == 16 and dp.local_batch == 8
    legacy = InferJob(count=8, ep=8, batch=64)  # --ep alone: DP attention on every GPU, as before
    assert legacy.replica_gpus == 8 and legacy.local_batch == 8


def test_training_expert_parallelism_keeps_one_ep_th_of_the_experts_on_each_gpu() -> None:
    """--ep 8 over 8 data-parallel ranks (torchtitan expert_parallel_degree): each GPU holds its eighth of Mixtral's
    routed experts and every other parameter whole; without ZeRO-3 the 16-bit weights shrink by exactly that."""
    from gpuwise.estimate.memory.model_states import model_states
    from gpuwise.workload.jobs.job import TrainJob
    from gpuwise.workload.model.resolve import resolve_model
    from plans import train_plan

    arch = resolve_model("mixtral-8x7b")
    experts = sum(x.count * x.d_in * x.d_out * x.layers for x in arch.params.linears if x.count > 1)
    whole = model_states(train_plan(arch, TrainJob(count=8, zero=1))).weights
    split = model_states(train_plan(arch, TrainJob(count=8, zero=1, ep=8))).weights
    assert whole - split == pytest.approx(experts * 7 / 8 * 2, rel=1e-6)


def test_training_expert_parallelism_pays_a_dispatch_and_a_combine_per_moe_layer_and_pass() -> None:
    """Two all-to-alls per MoE layer in forward and two in backward, each of batch x seq x top-k x hidden 16-bit
    values over the 8 GPUs' NVLink (parallel.py: (n - 1) / n of it at the link's achieved rate plus a latency)."""
    from gpuwise.catalog import load_catalog
    from gpuwise.estimate.speed.parallel import all_to_all_s, links
    from gpuwise.estimate.speed.training import _expert_all_to_all_s
    from gpuwise.workload.jobs.job import TrainJob
    from gpuwise.workload.model.resolve import resolve_model
    from plans import train_plan

    catalog = load_catalog(use_user_dir=False)
    gpu = catalog.gpu("h100-sxm-80gb")
    plan = train_plan(resolve_model("mixtral-8x7b"), TrainJob(count=8, ep=8, batch=2, seq=4096, ckpt="none"),
                      "h100-sxm-80gb")
    path = links(gpu, catalog, network=None, nodes=1)
    one = all_to_all_s(2 * 4096 * 2 * 4096 * 2, 8, path.for_group(8, spans_nodes=False))
    assert _expert_all_to_all_s(plan, path) == pytest.approx(2 * 2 * 32 * one)
