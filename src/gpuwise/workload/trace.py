"""A traced ground truth for training memory: the model's own transformers code run for one steady-state step on
fake tensors (no GPU, no weights), every tensor's lifetime recorded by PyTorch's MemTracker.

The model is built from its config.json under ``FakeTensorMode`` (shapes and dtypes only), trained as
``benchmarks/measure_training.py`` trains it on a real card: fp32 parameters under bf16 autocast (``--precision
bf16``) or bf16 parameters (``pure-bf16``), SDPA attention, fused AdamW, activation checkpointing when asked. Two steps
run; the second (steady state: optimizer states exist) is the one reported. The CPU build of torch cannot fake CUDA
tensors through autograd, so the trace runs on fake CPU tensors; on the four H200 runs of
benchmarks/results/h200-2026-11-29 it lands within 5 % of ``torch.cuda.max_memory_allocated()``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuwise.errors import ConfigError, ProbeUnavailable

TRACE_LAYERS_MAX = 200  # a trace runs every layer's kernels on fake tensors: seconds per dozens of layers
_KINDS = {"PARAM": "parameters", "GRAD": "gradients", "OPT": "optimizer", "ACT": "activations", "TEMP": "temporaries",
          "BUFFER": "buffers", "OTH": "other"}


@dataclass(frozen=True)
class Trace:
    peak_allocated_bytes: float  # what torch.cuda.max_memory_allocated() would show
    breakdown_bytes: Mapping[str, float]  # at the peak, by what the tensors are
    flops_per_step: float  # torch.utils.flop_counter.FlopCounterMode over one step
    kernels_per_step: int  # aten operators dispatched in one step (each a kernel launch on a GPU, roughly)


def _torch() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError:
        raise ProbeUnavailable("--trace needs torch and transformers: pip install 'gpuwise[hf]' and a torch "
                               "build") from None
    return torch, transformers


def _check(job: Any, config: Mapping[str, Any]) -> None:
    if job.method != "full":
        raise ConfigError("--trace runs --method full (LoRA and QLoRA adapters are not traced yet)")
    if job.precision not in ("bf16", "pure-bf16", "fp32"):
        raise ConfigError(f"--trace runs --precision bf16, pure-bf16 or fp32, not {job.precision}")
    if job.optimizer not in ("adamw", "sgd"):
        raise ConfigError(f"--trace runs --optimizer adamw or sgd, not {job.optimizer}")
    if job.count != 1:
        raise ConfigError("--trace runs one GPU's step (--count 1)")
    if job.loss != "standard" or job.optimizer_in_backward or job.activation_offload:
        raise ConfigError("--trace runs transformers' own loss, optimizer step and activations: leave out --loss, "
                          "--optim-in-bwd and --cpu-activations (not traced yet)")
    layers = config.get("num_hidden_layers")
    if isinstance(layers, int) and layers > TRACE_LAYERS_MAX:
        raise ConfigError(f"--trace builds at most {TRACE_LAYERS_MAX} layers; this config has {layers}")


def _build(torch: Any, transformers: Any, config: Mapping[str, Any], job: Any) -> tuple[Any, Any]:
    clean = {k: v for k, v in config.items() if not k.startswith("_") and k != "auto_map"}
    hf_config = transformers.AutoConfig.for_model(**clean)
    hf_config._attn_implementation = "sdpa"
    dtype = torch.bfloat16 if job.precision == "pure-bf16" else torch.float32
    model = transformers.AutoModelForCausalLM.from_config(hf_config, dtype=dtype)
    if job.ckpt == "full":
        with warnings.catch_warnings():  # transformers 5 renames it activation_checkpointing_enable (FutureWarning)
            warnings.simplefilter("ignore", FutureWarning)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    model.train()
    if job.optimizer == "sgd":
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-5, momentum=0.9)
    else:
        # fused, as the HF Trainer's default adamw_torch_fused: no parameter-sized intermediates at the step
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    return model, optimizer


def _step(torch: Any, model: Any, optimizer: Any, tokens: Any, autocast: bool) -> None:
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = model(input_ids=tokens, labels=tokens).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def trace_training(config: Mapping[str, Any], job: Any) -> Trace:
    """One steady-state training step of ``config`` as ``job`` (a TrainJob) asks, on fake tensors."""
    torch, transformers = _torch()
    _check(job, config)
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch.utils.flop_counter import FlopCounterMode

    with FakeTensorMode():
        try:
            model, optimizer = _build(torch, transformers, config, job)
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"transformers cannot build this config for a trace: {str(exc)[:120]}") from None
        vocab = int(getattr(model.config, "vocab_size", 0) or 2)
        tokens = torch.randint(0, vocab, (job.batch, job.seq))
        autocast = job.precision == "bf16"
        tracker = MemTracker()
        tracker.track_external(model, optimizer)
        with tracker:
            _step(torch, model, optimizer, tokens, autocast)  # creates the optimizer states
            tracker.reset_mod_stats()
            counter, flops = _Counter(), FlopCounterMode(display=False)
            with counter, flops:
                _step(torch, model, optimizer, tokens, autocast)
        peak = tracker.get_tracker_snapshot("peak")
    by_kind: dict[str, float] = {}
    total = 0.0
    for device in peak.values():
        for kind, value in device.items():
            name = str(kind).rsplit(".", 1)[-1]
            if name == "Total":
                total += value
            elif value:
                by_kind[_KINDS.get(name, name.lower())] = by_kind.get(_KINDS.get(name, name.lower()), 0.0) + value
    return Trace(total, by_kind, float(flops.get_total_flops()), counter.calls)


def _counter_class() -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode

    class Counter(TorchDispatchMode):  # type: ignore[no-untyped-call]
        """Counts the aten operators dispatched (views and metadata queries included)."""

        def __init__(self) -> None:
            super().__init__()  # type: ignore[no-untyped-call]
            self.calls = 0

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            self.calls += 1
            return func(*args, **(kwargs or {}))

    return Counter


def _Counter() -> Any:
    return _counter_class()()
