"""A few real steps of exactly the job on a device (``gpuwise validate``): the model built from its config.json with
random weights on the device (no download), warm-up and timed steps, and torch's own peak memory.

- Training runs as workload/trace/setup.py sets a traced step up (the same model class, PEFT adapters, loss and
  optimizer), for real: fp32 parameters under bf16 autocast (``--precision bf16``; a 16-bit base for LoRA), SDPA
  attention, fused AdamW, activation checkpointing as the job asks. QLoRA needs bitsandbytes on a CUDA device.
- Inference runs transformers' ``generate``: greedy, exactly ``output_len`` new tokens; the prefill is timed as a
  ``generate`` of one token, the decode as the rest per token.
- Memory: on CUDA ``torch.cuda.max_memory_allocated`` and ``max_memory_reserved`` over every step; on the CPU (no
  allocator statistics) PyTorch's MemTracker over one extra step, run after the timed ones so its dispatch hooks do
  not slow them.
- Time: each step synchronised (``torch.cuda.synchronize``), the median of the timed steps; the run stops at its time
  limit with the steps it has, and frees the device when it ends or is interrupted.
"""

from __future__ import annotations

import contextlib
import gc
import statistics
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuwise.errors import ConfigError, ProbeUnavailable
from gpuwise.workload.trace import setup as trace_setup


@dataclass(frozen=True)
class RunSettings:
    device: str = "cpu"
    steps: int = 3  # timed steps
    warmup: int = 1
    time_limit_s: float = 300.0


@dataclass(frozen=True)
class Measured:
    """What the device did: torch's peak memory and synchronised seconds."""

    peak_allocated_bytes: float
    peak_reserved_bytes: float | None  # None on the CPU: no caching allocator
    step_s: float  # training: one optimizer step; inference: one whole generate call
    steps_timed: int
    stopped_early: bool = False  # the time limit ended the run before every step ran
    prefill_s: float | None = None  # inference: a generate of one token
    decode_s_per_token: float | None = None
    decode_s: float | None = None  # an image pipeline: one VAE decode of the batch
    parts_bytes: Mapping[str, float] = field(default_factory=dict)  # training: the peak by kind (MemTracker)
    versions: Mapping[str, str] = field(default_factory=dict)
    method: str = ""


def _imports(job: Any) -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError:
        raise ProbeUnavailable("validate needs torch and transformers: pip install 'gpuwise[hf]' and a torch "
                               "build") from None
    if getattr(job, "method", "full") in ("lora", "qlora"):
        try:
            import peft  # noqa: F401
        except ImportError:
            raise ProbeUnavailable("validate of --method lora/qlora needs PEFT: pip install 'peft>=0.13'") from None
    return torch, transformers


def versions(torch: Any, transformers: Any) -> dict[str, str]:
    found = {"torch": str(torch.__version__), "transformers": str(transformers.__version__)}
    with contextlib.suppress(ImportError):
        import peft

        found["peft"] = str(peft.__version__)
    return found


def _check_device(torch: Any, device: str) -> None:
    if device == "cpu":
        return
    if not device.startswith("cuda"):
        raise ConfigError(f"--device {device[:40]!r}: validate runs on cpu or cuda[:N]")
    if not torch.cuda.is_available():
        raise ProbeUnavailable("torch sees no CUDA device (CPU-only build, no driver, or no GPU): use --device cpu "
                               "for a small model, or run `gpuwise doctor`")
    if int(device.partition(":")[2] or 0) >= torch.cuda.device_count():
        raise ConfigError(f"--device {device}: torch sees {torch.cuda.device_count()} CUDA device(s)")


def _sync(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def _timed(torch: Any, device: str, step: Callable[[], object], settings: RunSettings) -> tuple[list[float], bool]:
    """Warm-up steps, then timed ones until ``settings.steps`` ran or the time limit passed."""
    started = time.perf_counter()
    times: list[float] = []
    for i in range(settings.warmup + settings.steps):
        if time.perf_counter() - started > settings.time_limit_s:
            return times, True
        _sync(torch, device)
        begin = time.perf_counter()
        step()
        _sync(torch, device)
        if i >= settings.warmup:
            times.append(time.perf_counter() - begin)
    return times, False


@contextlib.contextmanager
def _device_freed(torch: Any, device: str) -> Iterator[None]:
    """The run's tensors released and the caching allocator emptied when it ends, fails or is interrupted."""
    try:
        yield
    finally:
        gc.collect()
        if device.startswith("cuda"):
            torch.cuda.empty_cache()


def _live_bytes_class(torch: Any) -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves
    from torch.utils.weak import WeakIdKeyDictionary

    class LiveBytes(TorchDispatchMode):  # type: ignore[no-untyped-call]
        """Bytes of live tensor storages: those it is given, and every op's outputs until they are freed."""

        def __init__(self, *held: Any) -> None:
            super().__init__()  # type: ignore[no-untyped-call]
            self.live: Any = WeakIdKeyDictionary()
            self.current = self.peak = 0
            for t in held:
                self.track(t)

        def track(self, t: Any) -> None:
            if not isinstance(t, torch.Tensor) or t.device.type == "meta":
                return
            storage = t.untyped_storage()
            if storage in self.live:
                return
            size = storage.nbytes()
            self.live[storage] = size
            self.current += size
            self.peak = max(self.peak, self.current)
            weakref.finalize(storage, self.freed, size)

        def freed(self, size: int) -> None:
            self.current -= size

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            out = func(*args, **(kwargs or {}))
            for t in tree_leaves(out):
                self.track(t)
            return out

    return LiveBytes


def _cpu_peak(torch: Any, step: Callable[[], object], *held: Any) -> float:
    """Peak bytes of live CPU tensors over one step: what is held at its start (the model, optimizer states) and
    every tensor an operator makes, until it is freed (the CPU has no allocator statistics)."""
    tensors = [t for obj in held for t in _tensors_of(torch, obj)]
    with _live_bytes_class(torch)(*tensors) as live:
        step()
    return float(live.peak)


def _tensors_of(torch: Any, obj: Any) -> list[Any]:
    """A module's parameters, gradients and buffers, or an optimizer's states."""
    if isinstance(obj, torch.nn.Module):
        found = [*obj.parameters(), *obj.buffers()]
        return found + [p.grad for p in obj.parameters() if p.grad is not None]
    states = getattr(obj, "state", {}) or {}
    return [v for state in states.values() for v in state.values() if isinstance(v, torch.Tensor)]


def memory_parts(step: Callable[[], object], model: Any, *tracked: Any) -> dict[str, float]:
    """The peak of one more step by what its tensors are (parameters, gradients, optimizer states, activations,
    temporaries), from PyTorch's MemTracker, on any device: the parts the estimate has."""
    from torch.distributed._tools.mem_tracker import MemTracker

    from gpuwise.workload.trace.steps import _by_kind, _name_kernel_wrappers, _quiet_tracker, _skip_frozen

    tracker = MemTracker()
    tracker.track_external(model, *tracked)
    _name_kernel_wrappers(tracker._mod_tracker, model)
    with _quiet_tracker(), tracker:
        _skip_frozen(tracker, model)
        step()
    return _by_kind(tracker.get_tracker_snapshot("peak"))[1]


def _peaks(torch: Any, device: str, step: Callable[[], object], model: Any,
           *tracked: Any) -> tuple[float, float | None]:
    if device.startswith("cuda"):
        return float(torch.cuda.max_memory_allocated(device)), float(torch.cuda.max_memory_reserved(device))
    return _cpu_peak(torch, step, model, *tracked), None


def _reset(torch: Any, device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def _build_training(torch: Any, transformers: Any, config: Mapping[str, Any], job: Any, device: str) -> tuple[
        Any, Any, Any, str]:
    auto, labels = trace_setup.model_class(transformers, config)
    sixteen = job.precision == "pure-bf16" or (job.method != "full" and job.precision != "fp32")
    dtype = torch.bfloat16 if sixteen else torch.float32
    from gpuwise.workload.trace.steps import _from_config

    with warnings.catch_warnings():  # transformers 5 renames gradient_* activation_* (FutureWarning)
        warnings.simplefilter("ignore", FutureWarning)
        with torch.device(device):
            model, attention = _from_config(auto, transformers, config, dtype)
        if job.ckpt == "full":
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
        if job.method == "qlora":
            model = _qlora(torch, transformers, model, job, device)
        elif job.method == "lora":
            model = trace_setup.add_adapters(torch, model, job)
    model.train()
    optimizer = trace_setup.make_optimizer(torch, model, job)
    return model, optimizer, trace_setup.loss_function(torch, model, job, labels), attention


def _qlora(torch: Any, transformers: Any, model: Any, job: Any, device: str) -> Any:
    """The base's linears as bitsandbytes NF4 (double quantization, bf16 compute), as from_pretrained with
    BitsAndBytesConfig(load_in_4bit=True) places them, then PEFT's k-bit preparation and adapters."""
    if not device.startswith("cuda"):
        raise ConfigError("validate runs --method qlora on a CUDA device (bitsandbytes' NF4 kernels); use --method "
                          "lora on the CPU")
    try:
        import bitsandbytes  # type: ignore[import-not-found]  # noqa: F401
        import peft
        from transformers.integrations.bitsandbytes import replace_with_bnb_linear
    except ImportError:
        raise ProbeUnavailable("validate of --method qlora needs bitsandbytes: pip install bitsandbytes") from None
    quantization = transformers.BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                   bnb_4bit_use_double_quant=True,
                                                   bnb_4bit_compute_dtype=torch.bfloat16)
    model = replace_with_bnb_linear(model.cpu(), quantization_config=quantization).to(device)
    prepare: Any = peft.prepare_model_for_kbit_training
    model = prepare(model, use_gradient_checkpointing=job.ckpt == "full")
    return trace_setup.add_adapters(torch, model, job.model_copy(update={"method": "lora"}))


def _inputs(torch: Any, model: Any, config: Mapping[str, Any], job: Any, device: str) -> Any:
    """Random token ids of the job's batch and sequence, or for an image classifier random pixels of its image
    side (the job's, else the config's or 224) and random class labels."""
    if str((config.get("architectures") or [""])[0]).endswith("ForImageClassification"):
        side = job.image_size or int(config.get("image_size") or 224)
        channels = int(config.get("num_channels") or 3)
        classes = int(getattr(model.config, "num_labels", 0) or 2)
        return (torch.randn(job.batch, channels, side, side, device=device),
                torch.randint(0, classes, (job.batch,), device=device))
    vocab = int(getattr(model.config, "vocab_size", 0) or 2)
    return torch.randint(0, vocab, (job.batch, job.seq), device=device)


def run_training(config: Mapping[str, Any], job: Any, settings: RunSettings) -> Measured:
    """Warm-up and timed optimizer steps of ``job`` (a TrainJob) on ``settings.device``."""
    torch, transformers = _imports(job)
    _check_device(torch, settings.device)
    torch.manual_seed(0)
    _reset(torch, settings.device)
    with _device_freed(torch, settings.device):
        try:
            model, optimizer, loss_of, attention = _build_training(torch, transformers, config, job, settings.device)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ConfigError(f"transformers cannot build this config: {str(exc)[:120]}") from None
        batch_of = _inputs(torch, model, config, job, settings.device)
        if isinstance(batch_of, tuple):  # an image classifier: pixels and labels
            pixels, classes = batch_of
            loss_of = lambda _: model(pixel_values=pixels, labels=classes).loss  # noqa: E731
        kind = "cuda" if settings.device.startswith("cuda") else "cpu"

        def step() -> None:
            with torch.autocast(kind, dtype=torch.bfloat16, enabled=job.precision == "bf16"):
                loss = loss_of(batch_of)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        times, stopped = _timed(torch, settings.device, step, settings)
        if not times:
            raise ConfigError(f"validate: no step finished within --time-limit-s {settings.time_limit_s:g}")
        optimizers = getattr(optimizer, "optimizers", None) or [optimizer]
        allocated, reserved = _peaks(torch, settings.device, step, model, *optimizers)
        parts = memory_parts(step, model, *optimizers)
        return Measured(allocated, reserved, statistics.median(times), len(times), stopped, parts_bytes=parts,
                        versions=versions(torch, transformers),
                        method=f"{job.method} training steps, {attention} attention, on {settings.device}")


def run_inference(config: Mapping[str, Any], job: Any, settings: RunSettings) -> Measured:
    """transformers' ``generate`` of ``job.output_len`` tokens after ``job.input_len`` prompt tokens, greedy."""
    torch, transformers = _imports(job)
    _check_device(torch, settings.device)
    if job.weights not in ("bf16", "fp16", "fp32"):
        raise ConfigError("validate runs inference with 16-bit or fp32 weights (use --quant bf16): quantized "
                          "formats are other engines' kernels")
    torch.manual_seed(0)
    _reset(torch, settings.device)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[job.weights]
    from gpuwise.workload.trace.steps import _from_config

    with _device_freed(torch, settings.device):
        with warnings.catch_warnings(), torch.device(settings.device):
            warnings.simplefilter("ignore", FutureWarning)
            model, attention = _from_config(transformers.AutoModelForCausalLM, transformers, config, dtype)
        model.eval()
        vocab = int(getattr(model.config, "vocab_size", 0) or 2)
        prompt = torch.randint(0, vocab, (job.batch, job.input_len), device=settings.device)

        def generate(new: int) -> Callable[[], object]:
            def call() -> object:
                with torch.no_grad():
                    return model.generate(prompt, max_new_tokens=new, min_new_tokens=new, do_sample=False,
                                          pad_token_id=0)
            return call

        prefill, _ = _timed(torch, settings.device, generate(1), settings)
        whole, stopped = _timed(torch, settings.device, generate(max(job.output_len, 1)), settings)
        if not prefill or not whole:
            raise ConfigError(f"validate: no generate call finished within --time-limit-s {settings.time_limit_s:g}")
        allocated, reserved = _peaks(torch, settings.device, generate(max(job.output_len, 1)), model)
        first, total = statistics.median(prefill), statistics.median(whole)
        # a loaded machine can time the whole generate no slower than its first token: no decode time then, never a
        # negative one (which a calibration would turn into a negative rate)
        per_token = (total - first) / (job.output_len - 1) if job.output_len > 1 and total > first else None
        return Measured(allocated, reserved, total, len(whole), stopped, prefill_s=first,
                        decode_s_per_token=per_token, versions=versions(torch, transformers),
                        method=f"transformers generate, {attention} attention, on {settings.device}")
