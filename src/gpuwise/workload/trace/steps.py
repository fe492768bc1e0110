"""A traced ground truth for memory: the model's own transformers code run on fake tensors (no GPU, no weights),
every tensor's lifetime recorded by PyTorch's MemTracker.

The model is built from its config.json under ``FakeTensorMode`` (shapes and dtypes only).
- Training (``trace_training``) runs as ``benchmarks/measure_training.py`` trains on a real card: fp32 parameters
  under bf16 autocast (``--precision bf16``; a 16-bit base for LoRA) or bf16 parameters (``pure-bf16``), SDPA
  attention, fused AdamW, activation checkpointing, PEFT adapters, an NF4 base, the chunked loss and the optimizer
  in backward as the job asks (workload/trace/setup.py). Three steps run: the first makes the optimizer states, the
  second is counted (FLOPs, kernels: FlopCounterMode's module hooks keep tensors alive, so it is not the measured
  one), the third (steady state) is measured.
- Inference (``trace_inference``) runs a prefill into transformers' DynamicCache and one decode step, as generate.

The CPU build of torch cannot fake CUDA tensors through autograd, so the trace runs on fake CPU tensors; on the four
H200 runs of benchmarks/results/h200-2026-11-29 it lands within 5 % of ``torch.cuda.max_memory_allocated()``.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuwise.errors import ConfigError, ProbeUnavailable
from gpuwise.workload.trace.kernels import TracedOp, recorder_class

TRACE_LAYERS_MAX = 200  # a trace runs every layer's kernels on fake tensors: seconds per dozens of layers
_KINDS = {"PARAM": "parameters", "GRAD": "gradients", "OPT": "optimizer", "ACT": "activations", "TEMP": "temporaries",
          "BUFFER": "buffers", "OTH": "other"}


@dataclass(frozen=True)
class Trace:
    peak_allocated_bytes: float  # what torch.cuda.max_memory_allocated() would show
    breakdown_bytes: Mapping[str, float]  # at the peak, by what the tensors are
    flops_per_step: float  # torch.utils.flop_counter.FlopCounterMode over one step
    kernels_per_step: int  # aten operators dispatched in one step (each a kernel launch on a GPU, roughly)
    method: str = "one steady-state training step of the model's transformers code on fake CPU tensors (MemTracker)"
    attention: str = "sdpa"  # the attention implementation the trace ran: sdpa, or eager where the model has no SDPA
    ops: Mapping[str, TracedOp] = field(default_factory=dict)  # per aten operator: launches, FLOPs, bytes
    max_by_kind: Mapping[str, float] = field(default_factory=dict)  # each kind's own highest value in the step


def _torch() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError:
        raise ProbeUnavailable("--trace needs torch and transformers: pip install 'gpuwise[hf]' and a torch "
                               "build") from None
    return torch, transformers


def _check(job: Any, config: Mapping[str, Any]) -> None:
    if job.precision not in ("bf16", "pure-bf16", "fp32"):
        raise ConfigError(f"--trace runs --precision bf16, pure-bf16 or fp32, not {job.precision}")
    if job.optimizer not in ("adamw", "sgd"):
        raise ConfigError(f"--trace runs --optimizer adamw or sgd, not {job.optimizer}")
    if job.count != 1:
        raise ConfigError("--trace runs one GPU's step (--count 1)")
    if job.activation_offload or job.ckpt == "selective":
        raise ConfigError("--trace runs on one fake device: leave out --cpu-activations and --ckpt selective (not "
                          "traced)")
    layers = config.get("num_hidden_layers")
    if isinstance(layers, int) and layers > TRACE_LAYERS_MAX:
        raise ConfigError(f"--trace builds at most {TRACE_LAYERS_MAX} layers; this config has {layers}")


def _hf_config(transformers: Any, config: Mapping[str, Any], attention: str = "sdpa") -> Any:
    clean = {k: v for k, v in config.items() if not k.startswith("_") and k != "auto_map"}
    hf_config = transformers.AutoConfig.for_model(**clean)
    hf_config._attn_implementation = attention
    return hf_config


def _from_config(auto: Any, transformers: Any, config: Mapping[str, Any], dtype: Any) -> tuple[Any, str]:
    """The model with SDPA attention, or eager attention when its code has no SDPA path (gpt-oss's sinks)."""
    try:
        return auto.from_config(_hf_config(transformers, config), dtype=dtype), "sdpa"
    except ValueError as exc:
        if "attention implementation" not in str(exc) and "sdpa" not in str(exc).lower():
            raise
        return auto.from_config(_hf_config(transformers, config, "eager"), dtype=dtype), "eager"


def _build(torch: Any, transformers: Any, config: Mapping[str, Any], job: Any) -> tuple[Any, Any, Any, str]:
    """The model as the job trains it, its optimizer, its loss (tokens -> loss) and the attention it runs. Adapters are
    placed on the meta device and the model then made fake (fake parameters cannot be converted in place, as PEFT
    does)."""
    from gpuwise.workload.trace import setup as trace_setup

    auto, labels = trace_setup.model_class(transformers, config)
    sixteen = job.precision == "pure-bf16" or (job.method != "full" and job.precision != "fp32")
    dtype = torch.bfloat16 if sixteen else torch.float32
    meta = _meta_outside_fake(torch) if job.method != "full" else contextlib.nullcontext()
    with meta, warnings.catch_warnings():  # transformers 5 renames gradient_* activation_* (FutureWarning)
        warnings.simplefilter("ignore", FutureWarning)
        model, attention = _from_config(auto, transformers, config, dtype)
        if job.ckpt == "full":
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
        if job.method != "full":
            model = trace_setup.add_adapters(torch, model, job)
    if job.method != "full":
        model = _fake_from_meta(model.get_base_model(), model)
    model.train()
    optimizer = trace_setup.make_optimizer(torch, model, job)
    return model, optimizer, trace_setup.loss_function(torch, model, job, labels), attention


@contextlib.contextmanager
def _meta_outside_fake(torch: Any) -> Iterator[None]:
    """Real meta tensors, for once, inside the trace's fake mode."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily(), torch.device("meta"):
        yield


def _fake_from_meta(base: Any, model: Any) -> Any:
    """``model`` (whose transformers model is ``base``) with fake CPU tensors for its meta ones, a tied embedding and
    head tied again (to_empty would convert the shared parameter once per module)."""
    head, embedding = base.get_output_embeddings(), base.get_input_embeddings()
    tied = head is not None and embedding is not None and head.weight is embedding.weight
    if tied:
        head._parameters["weight"] = None
    model = model.to_empty(device="cpu")
    if tied:
        head.weight = embedding.weight
    return model


def _step(torch: Any, loss_of: Any, optimizer: Any, tokens: Any, autocast: bool) -> None:
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        loss = loss_of(tokens)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


@contextlib.contextmanager
def _quiet_tracker() -> Iterator[None]:
    """MemTracker warns when a module is gone by the time autograd reaches its output (PEFT wrappers, the loss), and
    when the optimizer in backward freed a gradient before its own hook reads it: expected here, not shown."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Module is None", category=UserWarning)
        warnings.filterwarnings("ignore", message="Expected a tensor or a traceable wrapper", category=UserWarning)
        yield


def _fake_modes() -> tuple[Any, Any, Any]:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch.utils.flop_counter import FlopCounterMode

    return FakeTensorMode, MemTracker, FlopCounterMode


def trace_training(config: Mapping[str, Any], job: Any) -> Trace:
    """One steady-state training step of ``config`` as ``job`` (a TrainJob) asks, on fake tensors."""
    torch, transformers = _torch()
    _check(job, config)
    fake_mode, mem_tracker, flop_counter = _fake_modes()
    with _quiet_tracker(), fake_mode(allow_non_fake_inputs=True):
        try:
            model, optimizer, loss_of, attention = _build(torch, transformers, config, job)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"transformers cannot build this config for a trace: {str(exc)[:120]}") from None
        vocab = int(getattr(model.config, "vocab_size", 0) or 2)
        tokens = torch.randint(0, vocab, (job.batch, job.seq))
        autocast = job.precision == "bf16"
        tracker = mem_tracker()
        tracker.track_external(model, *(getattr(optimizer, "optimizers", None) or [optimizer]))
        _name_kernel_wrappers(tracker._mod_tracker, model)
        with tracker:
            _skip_frozen(tracker, model)
            _step(torch, loss_of, optimizer, tokens, autocast)  # creates the optimizer states
        counter, flops = _Counter(), flop_counter(display=False)
        _name_kernel_wrappers(flops.mod_tracker, model)
        with counter, flops:  # counted on a step of its own: FlopCounterMode's module hooks keep tensors alive
            _step(torch, loss_of, optimizer, tokens, autocast)
        tracker.reset_mod_stats()
        with tracker:  # entering again starts the peak from what is alive now: the steady state's own
            _skip_frozen(tracker, model)
            _step(torch, loss_of, optimizer, tokens, autocast)
        peak = tracker.get_tracker_snapshot("peak")
    total, by_kind = _by_kind(peak)
    return Trace(total, by_kind, float(flops.get_total_flops()), counter.calls, attention=attention,
                 ops=counter.traced_ops())


def trace_inference(config: Mapping[str, Any], job: Any) -> Trace:
    """A prefill of ``batch`` x ``input_len`` tokens into transformers' DynamicCache and one decode step after it,
    in eval mode without gradients (what ``generate`` runs; only the last position's logits are made)."""
    torch, transformers = _torch()
    if job.weights not in ("bf16", "fp16", "fp32") or job.kv_dtype not in ("fp16", "bf16"):
        raise ConfigError("--trace runs 16-bit or fp32 weights and a 16-bit cache (quantized formats are kernels "
                          "with no fake-tensor path): use --quant bf16")
    if job.count != 1:
        raise ConfigError("--trace runs one GPU's step (--count 1)")
    fake_mode, mem_tracker, flop_counter = _fake_modes()
    dtype = {"fp32": torch.float32, "fp16": torch.float16}.get(job.weights, torch.bfloat16)
    with _quiet_tracker(), fake_mode(), torch.no_grad():
        try:
            model, attention = _from_config(transformers.AutoModelForCausalLM, transformers, config, dtype)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"transformers cannot build this config for a trace: {str(exc)[:120]}") from None
        model.eval()
        prompt = torch.randint(0, int(model.config.vocab_size), (job.batch, job.input_len))
        tracker = mem_tracker()
        tracker.track_external(model)
        counter, flops = _Counter(), flop_counter(display=False)
        _name_kernel_wrappers(tracker._mod_tracker, model)
        _name_kernel_wrappers(flops.mod_tracker, model)
        with tracker, warnings.catch_warnings():  # transformers 5.x renames past_key_values (FutureWarning)
            warnings.simplefilter("ignore", FutureWarning)
            cache = model(input_ids=prompt, use_cache=True, logits_to_keep=1).past_key_values
            tracker.reset_mod_stats()
            with counter, flops:
                model(input_ids=prompt[:, -1:], past_key_values=cache, use_cache=True)
        peak = tracker.get_tracker_snapshot("peak")
    total, by_kind = _by_kind(peak)
    return Trace(total, by_kind, float(flops.get_total_flops()), counter.calls,
                 "a prefill into transformers' DynamicCache and one decode step on fake CPU tensors (MemTracker); "
                 "FLOPs and kernels are the decode step's", attention, counter.traced_ops())


class _NoHook:
    def remove(self) -> None:
        """Nothing was registered."""


def _skip_frozen(tracker: Any, model: Any) -> None:
    """MemTracker hooks every parameter's gradient, and a frozen one (the base under adapters) cannot take a hook:
    mark those as hooked already (torch/distributed/_tools/mem_tracker.py, _track_module_params_and_buffers)."""
    handles = tracker._param_to_grad_hook_handles
    for param in model.parameters():
        if not param.requires_grad:
            handles[param] = (_NoHook(), _NoHook())


def _name_kernel_wrappers(module_tracker: Any, model: Any) -> None:
    """Give the model's hidden hub-kernel wrappers names of their own in a module tracker.

    transformers 5.2x requires the ``kernels`` package, whose ``use_kernelized_func`` gives each attention module a
    private wrapper module per hub-kernel function (``module._kernel_funcs``, e.g. ``apply_rotary_pos_emb``), called
    from inside the global wrapper of the same class ``Func`` (kernels _internals/layer/layer.py). Neither is a child
    of the model, so torch's ModTracker names both by their class: the inner call enters "Func" while "Func" is open,
    and ModTracker warns that its hierarchy is broken (an error under ``-W error``, where the forward then fails). The
    private wrappers are named under their owner's path, as ModTracker names children; the global one keeps "Func".
    """
    known = module_tracker._known_modules
    root = type(model).__name__
    for path, module in model.named_modules():
        wrappers = module.__dict__.get("_kernel_funcs") or {}
        for name, wrapper in wrappers.items():
            known[wrapper] = f"{root}.{path}._kernel_funcs.{name}" if path else f"{root}._kernel_funcs.{name}"


def _by_kind(peak: Mapping[Any, Mapping[Any, float]]) -> tuple[float, dict[str, float]]:
    by_kind: dict[str, float] = {}
    total = 0.0
    for device in peak.values():
        for kind, value in device.items():
            name = str(kind).rsplit(".", 1)[-1]
            if name == "Total":
                total += value
            elif value:
                key = _KINDS.get(name, name.lower())
                by_kind[key] = by_kind.get(key, 0.0) + value
    return total, by_kind


def _Counter() -> Any:
    return recorder_class()()
