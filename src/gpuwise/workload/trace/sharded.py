"""A traced ground truth for sharded training memory: one steady-state step of the model's own transformers code under
FSDP2 (``fully_shard`` on every decoder layer and on the root, as torchtune and torchtitan shard), on fake tensors,
over torch's fake process group of the job's data-parallel size -- no GPU and no peer, every collective answered
locally (torch/testing/_internal/distributed/fake_pg.py) -- with PyTorch's FSDPMemTracker recording each tensor's
lifetime by what FSDP holds it for (sharded and unsharded parameters and gradients, all-gather and reduce-scatter
buffers, optimizer states, activations).

Mixed precision runs as torchtitan's: ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`` over fp32 sharded
parameters; ``--precision pure-bf16`` shards bf16 parameters without a policy. ``--zero 2`` keeps each layer's
parameters unsharded after forward (``reshard_after_forward=False``), ``--zero 3`` reshards them (True).
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

from gpuwise.errors import ConfigError
from gpuwise.runtimes.sharding import FSDP2
from gpuwise.workload.trace.kernels import recorder_class
from gpuwise.workload.trace.steps import TRACE_LAYERS_MAX, Trace, _from_config, _quiet_tracker, _torch

# FSDPMemTracker's categories (torch/distributed/_tools/fsdp2_mem_tracker.py _FSDPRefType) by gpuwise's names
KINDS = {"Sharded Param": "sharded_params", "Unsharded Param": "unsharded_params", "Buffer": "buffers",
         "Sharded Grad": "sharded_gradients", "Unsharded Grad": "unsharded_gradients", "Activation": "activations",
         "Temp": "temporaries", "All Gather": "all_gather", "Reduce Scatter": "reduce_scatter", "OptState": "optimizer",
         "Inputs": "inputs"}
RUNTIME = FSDP2  # the data-parallel runtime this trace runs: a job sharded by any other is not traced
METHOD = ("one steady-state training step of the model's transformers code under FSDP2 over torch's fake process "
          "group, on fake CPU tensors (FSDPMemTracker)")


def _check(job: Any, config: Mapping[str, Any], ranks: int, stage: int) -> None:
    if job.method != "full":
        raise ConfigError("--trace of a sharded step runs full fine-tuning (FSDP2 with PEFT adapters is not traced)")
    if job.precision not in ("bf16", "pure-bf16", "fp32"):
        raise ConfigError(f"--trace runs --precision bf16, pure-bf16 or fp32, not {job.precision}")
    if job.optimizer not in ("adamw", "sgd") or job.loss != "standard" or job.optimizer_in_backward:
        raise ConfigError("--trace of a sharded step runs --optimizer adamw or sgd with the standard loss")
    if job.tp > 1 or job.pp > 1 or job.ep > 1 or job.hybrid_shard or job.offload != "none":
        raise ConfigError("--trace of a sharded step runs data parallelism alone: leave out --tp, --pp, --ep, "
                          "--hybrid-shard and --offload")
    if job.activation_offload or job.ckpt == "selective":
        raise ConfigError("--trace runs on one fake device: leave out --cpu-activations and --ckpt selective (not "
                          "traced)")
    if stage not in (2, 3) or ranks < 2:
        raise ConfigError("--trace of a sharded step runs FSDP2 at --zero 2 or 3 over 2 or more data-parallel GPUs")
    layers = config.get("num_hidden_layers")
    if isinstance(layers, int) and layers > TRACE_LAYERS_MAX:
        raise ConfigError(f"--trace builds at most {TRACE_LAYERS_MAX} layers; this config has {layers}")


@contextlib.contextmanager
def _fake_group(torch: Any, ranks: int) -> Iterator[Any]:
    """A fake process group of ``ranks`` ranks (this process is rank 0) and its 1-D CPU mesh, torn down after, with
    the interpreter's exception hook as it was."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():
        raise ConfigError("--trace of a sharded step needs its own fake process group; one is already initialised")
    hook = sys.excepthook  # init_process_group prefixes every later traceback with "[rank0]:" through it
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=ranks)
    try:
        yield init_device_mesh("cpu", (ranks,))
    finally:
        dist.destroy_process_group()
        sys.excepthook = hook


def _shard(torch: Any, model: Any, mesh: Any, job: Any, reshard: bool) -> None:
    """fully_shard on each decoder layer (the classes transformers names in ``_no_split_modules``), then the root."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
              if job.precision == "bf16" else MixedPrecisionPolicy())
    layer_classes = set(getattr(model, "_no_split_modules", None) or ())
    layers = [m for m in model.modules() if type(m).__name__ in layer_classes]
    if not layers:
        raise ConfigError("--trace of a sharded step needs the model's decoder layer class (_no_split_modules)")
    for layer in layers:
        fully_shard(layer, mesh=mesh, mp_policy=policy, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, mp_policy=policy)


def trace_sharded_training(config: Mapping[str, Any], job: Any, *, ranks: int, stage: int) -> Trace:
    """One steady-state FSDP2 step of ``config`` as ``job`` (a TrainJob) asks, rank 0 of ``ranks``."""
    torch, transformers = _torch()
    _check(job, config, ranks, stage)
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.utils.flop_counter import FlopCounterMode

    dtype = torch.bfloat16 if job.precision == "pure-bf16" else torch.float32
    with _fake_group(torch, ranks) as mesh, _quiet_tracker(), warnings.catch_warnings(), \
            FakeTensorMode(allow_non_fake_inputs=True):
        warnings.simplefilter("ignore", FutureWarning)
        warnings.filterwarnings("ignore", message="The module hierarchy tracking", category=UserWarning)
        try:
            model, attention = _from_config(transformers.AutoModelForCausalLM, transformers, config, dtype)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"transformers cannot build this config for a trace: {str(exc)[:120]}") from None
        if job.ckpt == "full":
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
        model.train()
        _shard(torch, model, mesh, job, reshard=stage == 3)
        optimizer = (torch.optim.AdamW(model.parameters(), foreach=False) if job.optimizer == "adamw"
                     else torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, foreach=False))
        tokens = torch.randint(0, int(model.config.vocab_size), (job.batch, job.seq))
        tracker = FSDPMemTracker(model, optimizer)
        tracker.track_inputs((tokens,))
        with tracker:
            _step(model, optimizer, tokens)  # creates the optimizer states
        counter, flops = recorder_class()(), FlopCounterMode(display=False)
        with counter, flops:  # counted on a step of its own: FlopCounterMode's module hooks keep tensors alive
            _step(model, optimizer, tokens)
        with tracker:
            tracker.reset_mod_stats()
            _step(model, optimizer, tokens)
        peak = tracker.get_tracker_snapshot("peak")
        highest = _highest_by_kind(tracker)
    total, by_kind = _by_kind(peak)
    return Trace(total, by_kind, float(flops.get_total_flops()), counter.calls, method=METHOD, attention=attention,
                 ops=counter.traced_ops(), max_by_kind=highest)


def _step(model: Any, optimizer: Any, tokens: Any) -> None:
    loss = model(input_ids=tokens, labels=tokens).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _name(kind: Any) -> str:
    label = getattr(kind, "value", str(kind))
    return KINDS.get(label, str(label).lower().replace(" ", "_"))


def _by_kind(snapshot: Mapping[Any, Mapping[Any, float]]) -> tuple[float, dict[str, float]]:
    total, found = 0.0, dict[str, float]()
    for device in snapshot.values():
        for kind, value in device.items():
            if str(kind) == "Total":
                total += value
            elif value:
                found[_name(kind)] = found.get(_name(kind), 0.0) + value
    return total, found


def _highest_by_kind(tracker: Any) -> dict[str, float]:
    """Each kind's own highest value over the measured step, across every module's recorded moments (FSDP's
    gathered parameters peak in forward, its sharded gradients at the end of backward), and ``gathered``: the most
    unsharded parameters and all-gather output alive at one moment."""
    highest: dict[str, float] = {}
    for stats in tracker.memory_tracking.values():
        for moments in stats.snapshots.values():
            for snapshot in moments:
                kinds = _by_kind(snapshot)[1]
                kinds["gathered"] = kinds.get("unsharded_params", 0.0) + kinds.get("all_gather", 0.0)
                for kind, value in kinds.items():
                    highest[kind] = max(highest.get(kind, 0.0), value)
    return highest
