"""Sharded training memory held to three independent truths: the ZeRO paper's model-state formula (Rajbhandari et al.
2020, arXiv 1910.02054, sec. 5 and Figure 1), the runtimes' own accounting (DeepSpeed v0.19.8's
estimate_zero2/3_model_states_mem_needs applied to the model transformers builds on the meta device, Megatron-LM's
distributed-optimizer table), and a traced step of the model's own code under FSDP2 over torch's fake process group
of the same world size (no GPU)."""

from __future__ import annotations

import pytest

from gpuwise import api
from gpuwise.catalog import Catalog
from gpuwise.errors import ConfigError
from gpuwise.estimate.estimate import estimate
from gpuwise.estimate.memory.model_states import ModelStates, model_states
from gpuwise.workload.jobs.job import TrainJob
from gpuwise.workload.model.presets import presets
from gpuwise.workload.model.resolve import resolve_model
from plans import train_plan

GIB = 2**30
K_ADAMW = 12  # the paper's K for mixed-precision Adam: fp32 parameters, momentum and variance (sec. 3.1)


def _paper(psi: float, n: int, stage: int) -> float:
    """The ZeRO paper's model states per GPU: (2 + 2 + K) Psi, with P_os, P_os+g and P_os+g+p dividing by N_d."""
    return {0: (2 + 2 + K_ADAMW) * psi, 1: (2 + 2) * psi + K_ADAMW * psi / n,
            2: 2 * psi + (2 + K_ADAMW) * psi / n, 3: (2 + 2 + K_ADAMW) * psi / n}[stage]


def test_the_papers_figure_1_in_bytes_per_parameter() -> None:
    """Figure 1: 7.5B parameters over 64 GPUs hold 120, 31.4, 16.6 and 1.9 GB per GPU. gpuwise's DeepSpeed states per
    parameter at N = 64, times 7.5e9, give the same figures."""
    arch = resolve_model("llama-3.1-8b")
    printed = {0: 120.0, 1: 31.4, 2: 16.6, 3: 1.9}
    for stage, gb in printed.items():
        states = model_states(train_plan(arch, TrainJob(count=64, nodes=8, zero=stage, sharding="deepspeed")))
        assert states.persistent / arch.total_params * 7.5e9 / 1e9 == pytest.approx(gb, abs=0.05), stage


@pytest.mark.parametrize("model", ["llama-3.1-8b", "qwen2.5-14b", "llama-3.1-70b"])
@pytest.mark.parametrize(("tp", "count"), [(1, 8), (2, 64), (8, 1024)])
@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_deepspeed_holds_the_zero_papers_model_states(model: str, tp: int, count: int, stage: int) -> None:
    arch = resolve_model(model)
    job = TrainJob(count=count, nodes=max(1, count // 8), tp=tp, zero=stage, sharding="deepspeed")
    psi, n = arch.total_params / tp, count // tp
    assert model_states(train_plan(arch, job)).persistent == pytest.approx(_paper(psi, n, stage), rel=1e-9)


def _deepspeed_model_to_params(model_id: str) -> tuple[int, int]:
    """deepspeed/runtime/zero/stage3.py model_to_params (v0.19.8), applied to the model transformers builds on the meta
    device: parameters counted once, and the most parameters one module holds directly."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from gpuwise.workload.exact import meta_model

    model = meta_model(presets()[model_id].config)
    total = sum({p.data_ptr() if p.device.type != "meta" else id(p): p.numel() for p in model.parameters()}.values())
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    return total, largest


def _at_step(states: ModelStates) -> float:
    """What the step holds of the model: the 16-bit weights, fp32 master, gradients, optimizer and the fp32 gradient
    copy the optimizer steps on."""
    return states.weights_at_step + states.master + states.gradients + states.optimizer + states.step


@pytest.mark.parametrize(("model", "count"), [("llama-3.1-8b", 16), ("qwen2.5-14b", 32), ("llama-3.1-70b", 128)])
def test_deepspeed_matches_its_own_estimators(model: str, count: int) -> None:
    """DeepSpeed's own estimates (cpu_offload=False): ZeRO-2 2 Psi + 18 Psi / N ('2 = params_16bit, 18 = 2_grads_16bit
    + 4_grads_32bit + 4_params_32bit + 8_optimizer_states_32bit'); ZeRO-3 4 x largest_layer_params + 18 Psi / N,
    which leaves out the bf16 parameter partition its stage3.py holds (fp16_partitioned_groups_flat, 2 Psi / N): the
    ZeRO-2 formula's params_16bit, sharded."""
    total, largest = _deepspeed_model_to_params(model)
    arch = resolve_model(model)
    assert arch.total_params == total  # the same model
    nodes = count // 8
    zero2 = model_states(train_plan(arch, TrainJob(count=count, nodes=nodes, zero=2, sharding="deepspeed")))
    assert _at_step(zero2) == pytest.approx(2 * total + 18 * total / count, rel=1e-6)
    zero3 = model_states(train_plan(arch, TrainJob(count=count, nodes=nodes, zero=3, sharding="deepspeed")))
    bf16_partition = 2 * total / count
    assert _at_step(zero3) + zero3.gathered == pytest.approx(4 * largest + 18 * total / count + bf16_partition,
                                                             rel=1e-6)


def test_megatron_holds_what_its_distributed_optimizer_docs_say() -> None:
    """Megatron-LM docs/source/api-guide/dist_optimizer.md: bf16 parameters with fp32 gradients take 18 bytes per
    parameter without the distributed optimizer and 6 + 12/d with it."""
    arch = resolve_model("llama-3.1-70b")
    for zero, per_param in ((0, 18.0), (1, 6 + 12 / 8)):
        job = TrainJob(framework="megatron", count=64, nodes=8, tp=8, zero=zero)
        states = model_states(train_plan(arch, job))
        assert states.persistent / (arch.total_params / 8) == pytest.approx(per_param, rel=1e-9)


def test_zero_2_keeps_the_16_bit_weights_whole_whatever_checkpointing_does(shipped: Catalog) -> None:
    """The issue's case: Llama 3.1 70B on 768 H100s at TP 2 and ZeRO-2 holds 70.55e9 x 2 B / 2 = 65.7 GiB of bf16
    weights on every GPU; with checkpointing and a micro-batch of 16 it cannot fit 80 GB."""
    arch, gpu = resolve_model("llama-3.1-70b"), shipped.gpu("h100-sxm-80gb")
    job = TrainJob(count=768, nodes=96, tp=2, batch=16, ckpt="full", zero=2)
    result = estimate(arch, job, gpu)
    assert result.memory.breakdown_bytes["weights"] >= arch.total_params * 2 / 2
    assert result.memory.breakdown_bytes["weights"] / GIB == pytest.approx(65.71, abs=0.01)
    assert not result.memory.fits
    small = resolve_model("llama-3.1-8b")
    for zero in (1, 2):
        for ckpt in ("none", "full"):
            weights = estimate(small, TrainJob(count=8, zero=zero, ckpt=ckpt), gpu).memory.breakdown_bytes["weights"]
            assert weights == pytest.approx(small.total_params * 2), (zero, ckpt)  # 14.96 GiB


def test_autocast_casts_are_what_checkpointing_frees_under_plain_data_parallel(shipped: Catalog) -> None:
    """DDP under torch.amp keeps fp32 parameters and casts them per layer: checkpointing leaves only the head's cast
    between layers. The same job under DeepSpeed holds its bf16 model whole."""
    arch, gpu = resolve_model("llama-3.1-8b"), shipped.gpu("h100-sxm-80gb")
    ddp = estimate(arch, TrainJob(count=8, zero=0, ckpt="full"), gpu).plan
    deepspeed = estimate(arch, TrainJob(count=8, zero=0, ckpt="full", sharding="deepspeed"), gpu).plan
    assert ddp is not None and deepspeed is not None
    assert ddp.sharding.profile.id == "ddp" and ddp.autocast
    assert not deepspeed.autocast
    ddp_weights = estimate(arch, TrainJob(count=8, zero=0, ckpt="full"), gpu).memory.breakdown_bytes["weights"]
    assert ddp_weights < arch.total_params * 2 / 4
    # DDP's buckets copy every fp32 gradient (gradient_as_bucket_view=False)
    assert model_states(ddp).buffers == pytest.approx(arch.total_params * 4)


def test_deepspeed_allocates_its_reduce_bucket_whatever_the_model() -> None:
    """reduce_bucket_size 5e8 elements of bf16 gradients: 1 GB beside any model at stages 1-3, none at stage 0."""
    arch = resolve_model("llama-3.2-1b")
    for stage in (1, 2, 3):
        assert model_states(train_plan(arch, TrainJob(count=8, zero=stage, sharding="deepspeed"))).buffers == 1e9
    assert model_states(train_plan(arch, TrainJob(count=8, zero=0, sharding="deepspeed"))).buffers == 0


def test_hybrid_shard_divides_by_one_machines_ranks() -> None:
    """FSDP HYBRID_SHARD over 4 machines of 8: the fp32 shards and states divide by 8, not 32."""
    arch = resolve_model("llama-3.1-8b")
    plan = train_plan(arch, TrainJob(count=32, nodes=4, zero=3, sharding="fsdp", hybrid_shard=True))
    assert plan.sharding.ranks == 8
    assert model_states(plan).master == pytest.approx(arch.total_params * 4 / 8)
    flat = train_plan(arch, TrainJob(count=32, nodes=4, zero=3, sharding="fsdp"))
    assert model_states(flat).master == pytest.approx(arch.total_params * 4 / 32)


@pytest.mark.parametrize(("options", "said"), [
    ({"sharding": "megatron", "zero": 2, "count": 8}, "--sharding megatron runs --zero 0"),
    ({"sharding": "fsdp2", "zero": 1, "count": 8}, "not --zero 1"),
    ({"sharding": "deepspeed", "zero": 2, "pp": 2, "count": 8}, "incompatible with pipeline parallelism"),
    ({"sharding": "deepspeed", "zero": 3, "hybrid_shard": True, "count": 16, "nodes": 2}, "HYBRID_SHARD"),
    ({"sharding": "fsdp2", "zero": 3, "offload": "optimizer", "count": 8}, "ZeRO-Offload"),
    ({"zero": 3, "hybrid_shard": True, "count": 8}, "--nodes 2 or more"),
])
def test_what_a_runtime_does_not_run_is_refused_in_one_line(options: dict[str, object], said: str) -> None:
    with pytest.raises(ConfigError, match=said) as caught:
        api.estimate("llama-3.1-8b", gpu="h100-sxm-80gb", **options)
    assert "\n" not in str(caught.value)


def test_the_runtime_is_the_frameworks_else_what_the_stage_asks_for() -> None:
    arch = resolve_model("llama-3.1-8b")
    for job, runtime in ((TrainJob(count=8), "fsdp2"), (TrainJob(count=8, zero=1), "deepspeed"),
                         (TrainJob(count=8, zero=2), "fsdp2"), (TrainJob(count=8, zero=0), "ddp"),
                         (TrainJob(count=8, zero=2, offload="optimizer"), "deepspeed"),
                         (TrainJob(framework="deepspeed", count=8, zero=2), "deepspeed"),
                         (TrainJob(framework="torchtune", count=8), "fsdp2"),
                         (TrainJob(framework="megatron", count=16, tp=8), "megatron")):
        assert train_plan(arch, job).sharding.profile.id == runtime, job


# --- the model's own code under FSDP2 over a fake process group -------------------------------------------------

def _traced(model: str, job: TrainJob) -> object:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    return api.trace(model, job)


@pytest.mark.parametrize("stage", [2, 3])
@pytest.mark.parametrize("ranks", [2, 8])
def test_fsdp2_shards_what_a_traced_step_shards(shipped: Catalog, stage: int, ranks: int) -> None:
    """FSDPMemTracker's own categories over one steady-state step of Llama 3.2 1B's code: the fp32 sharded parameters
    are the master copy (4 Psi / N), the sharded gradients 4 Psi / N, AdamW's states 8 Psi / N; the unsharded bf16
    parameters are whole at stage 2; at stage 3 what gpuwise counts gathered (two layers and the root) lies between
    the most unsharded parameters the step holds (the root and the running layer) and that plus the largest
    all-gather output they are copied out of."""
    job = TrainJob(count=ranks, zero=stage, batch=1, seq=512, sharding="fsdp2")
    traced = _traced("llama-3.2-1b", job)
    states = model_states(train_plan(resolve_model("llama-3.2-1b"), job))
    highest = traced.max_by_kind  # type: ignore[attr-defined]
    assert highest["sharded_params"] == pytest.approx(states.master, rel=0.01)
    assert highest["sharded_gradients"] == pytest.approx(states.gradients, rel=0.01)
    assert highest["optimizer"] == pytest.approx(states.optimizer, rel=0.01)
    if stage == 2:
        assert highest["unsharded_params"] == pytest.approx(states.weights, rel=0.01)
    else:
        unsharded, buffer = highest["unsharded_params"], highest["all_gather"]
        assert unsharded <= states.gathered <= unsharded + buffer


@pytest.mark.parametrize("stage", [2, 3])
@pytest.mark.parametrize("ckpt", ["none", "full"])
def test_the_estimated_peak_lands_within_8_percent_of_the_traced_one(shipped: Catalog, stage: int, ckpt: str) -> None:
    """The whole allocated peak (model states, what is gathered, activations, logits and loss) of an FSDP2 step on 8
    ranks against the traced step's (torch.cuda.max_memory_allocated's counterpart)."""
    job = TrainJob(count=8, zero=stage, batch=2, seq=1024, ckpt=ckpt, sharding="fsdp2")  # type: ignore[arg-type]
    traced = _traced("llama-3.2-1b", job)
    allocated = api.estimate("llama-3.2-1b", gpu="h100-sxm-80gb", job=job).memory.allocated_bytes
    assert allocated == pytest.approx(traced.peak_allocated_bytes, rel=0.08)  # type: ignore[attr-defined]


def test_a_trace_of_another_runtime_is_refused() -> None:
    pytest.importorskip("torch")
    with pytest.raises(ConfigError, match="runs FSDP2"):
        api.trace("llama-3.2-1b", TrainJob(count=8, zero=2, sharding="deepspeed"))


def test_every_runtime_the_flag_names_has_a_profile() -> None:
    from typing import get_args

    from gpuwise.runtimes.sharding import SHARDERS
    from gpuwise.workload.jobs.job import Sharding

    assert set(get_args(Sharding)) == set(SHARDERS)
    for profile in SHARDERS.values():  # every fact carries its source
        assert profile.stages.source and profile.compute_params.source and profile.gradient_bytes.source


def test_an_emitted_config_shards_as_the_estimate_did() -> None:
    """--emit axolotl writes the runtime the plan resolved: DeepSpeed's stage when asked for, FSDP2's resharding by
    default; a runtime axolotl's config cannot name (FSDP1) is refused in one line."""
    import yaml
    from typer.testing import CliRunner

    from gpuwise.cli.main import app

    base = ["estimate", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--count", "4", "--ckpt", "full", "--emit",
            "axolotl"]
    runner = CliRunner()
    deepspeed = runner.invoke(app, [*base, "--zero", "2", "--sharding", "deepspeed"])
    assert deepspeed.exit_code == 0, deepspeed.output
    config = yaml.safe_load(deepspeed.output)
    assert config["deepspeed"]["zero_optimization"]["stage"] == 2 and "fsdp_version" not in config
    fsdp2 = yaml.safe_load(runner.invoke(app, [*base, "--zero", "2"]).output)
    assert fsdp2["fsdp_version"] == 2 and fsdp2["fsdp_config"]["reshard_after_forward"] is False
    refused = runner.invoke(app, [*base, "--zero", "3", "--sharding", "fsdp"])
    assert refused.exit_code == 2 and "FSDP FULL_SHARD" in refused.output


def test_estimate_traces_a_sharded_step_and_leaves_the_process_as_it_was() -> None:
    """`estimate --count 8 --trace` prints the sharded step beside the closed form; its FLOPs are the model's own
    6 N tokens (Llama 3.2 1B: 6 x 1.236e9 x 2 x 1024 = 15.2 TFLOP); the fake process group is gone afterwards and the
    interpreter's exception hook is the one it had (init_process_group prefixes tracebacks with "[rank0]:")."""
    import json
    import sys

    pytest.importorskip("torch")
    import torch.distributed as dist
    from typer.testing import CliRunner

    from gpuwise.cli.main import app

    hook = sys.excepthook
    done = CliRunner().invoke(app, ["estimate", "llama-3.2-1b", "--gpu", "h100-sxm-80gb", "--count", "8", "--zero",
                                    "2", "--batch", "2", "--seq", "1024", "--trace", "--json"])
    assert done.exit_code == 0, done.output
    trace = json.loads(done.output)["trace"]
    params = resolve_model("llama-3.2-1b").total_params
    assert trace["flops_per_step"] >= 6 * params * 2 * 1024 * 0.99
    assert trace["closed_form_over_trace"] == pytest.approx(1.0, abs=0.08)
    assert not dist.is_initialized() and sys.excepthook is hook
