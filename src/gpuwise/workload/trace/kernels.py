"""Every operator a traced step dispatches, with its FLOPs and the bytes it moves: what the roofline times kernel by
kernel (estimate/speed/traced.py), a second derivation of a step's time beside the closed form.

Per aten operator: FLOPs from torch's own formulas (torch.utils.flop_counter.flop_registry; the CPU flash-attention
kernel the fake trace dispatches is counted by the same formula as the CUDA one), bytes as the sizes of its tensor
inputs and outputs (a lower bound: a kernel reads each at least once), and whether it launches a kernel: a view
(``OpOverload.is_view``) only costs dispatch time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

TracedKind = Literal["gemm", "attention", "memory"]
_NO_KERNEL = frozenset({"aten._unsafe_view", "aten.empty", "aten.empty_like", "aten.empty_strided", "aten.new_empty",
                        "aten.new_empty_strided", "aten.detach", "aten.lift_fresh", "aten.alias",
                        "aten._local_scalar_dense", "aten.set_", "aten.resize_"})
"""Operators that move no data and launch no kernel though their schema is not a view: a reshape that returns a new
tensor on the same storage, an allocation, a detach."""
_GATHERED = {"aten.nll_loss_forward": 0, "aten.nll_loss_backward": 1, "aten.nll_loss2d_forward": 0,
             "aten.nll_loss2d_backward": 1, "aten.embedding": 0, "aten.index_select": 0, "aten.gather": 0}
"""Operators that read one argument only where an index points (nll_loss reads one logit per row, an embedding one
row per token): that argument counts as much as the output, not its whole size."""
_GEMMS = ("mm", "addmm", "bmm", "baddbmm", "_grouped_mm", "convolution", "_convolution", "convolution_backward",
          "linear")


@dataclass(frozen=True)
class TracedOp:
    """One aten operator's totals over a step."""

    kind: TracedKind
    dispatches: int
    launches: int
    flops: float
    bytes: float


def _tensors(value: Any, torch: Any) -> list[Any]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v, torch)]
    return []


def _attention_flops(args: Any, causal: bool, backward: bool) -> float:
    """Flash attention: 2 b h q k d for Q K^T and as much for P V (half of it under a causal mask); backward 2.5x."""
    query, key = args[0], args[1]
    if backward:
        query, key = args[1], args[2]  # grad_out, query, key, ...
    b, h, q, d = (int(x) for x in query.shape)
    flops = 4.0 * b * h * q * int(key.shape[-2]) * d * (0.5 if causal else 1.0)
    return flops * 2.5 if backward else flops


def _moved(name: str, args: Any, out: Any, torch: Any) -> float:
    """Bytes a kernel moves: its tensor inputs and outputs, an indexed argument as much as the output."""
    def size(value: Any) -> float:
        return float(sum(t.numel() * t.element_size() for t in _tensors(value, torch)))

    inputs = list(args)
    if name in _GATHERED and len(inputs) > _GATHERED[name]:
        inputs[_GATHERED[name]] = out
    return size(inputs) + size(out)


def _square(mask: Any) -> bool:
    shape: tuple[int, ...] = tuple(getattr(mask, "shape", ()))
    return len(shape) >= 2 and shape[-1] == shape[-2]


def _kind(name: str) -> TracedKind:
    if "attention" in name:
        return "attention"
    return "gemm" if name.split(".")[-1] in _GEMMS else "memory"


def recorder_class() -> Any:
    """A TorchDispatchMode class that totals :class:`TracedOp` per aten operator (imported lazily: torch)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class Recorder(TorchDispatchMode):  # type: ignore[no-untyped-call]
        def __init__(self) -> None:
            super().__init__()  # type: ignore[no-untyped-call]
            self.ops: dict[str, list[float]] = {}

        @property
        def calls(self) -> int:
            return int(sum(v[0] for v in self.ops.values()))

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            name = str(func.overloadpacket)
            if name.startswith("prim."):  # metadata queries (prim.device): dispatched only for fake tensors
                return out
            flops = 0.0
            if func.overloadpacket in flop_registry:
                flops = float(flop_registry[func.overloadpacket](*args, **kwargs, out_val=out))
            elif "flash_attention_for_cpu" in name:
                backward = "backward" in name
                at = 7 if backward else 4  # (grad_out, q, k, v, out, logsumexp, dropout_p, is_causal) or (q, k, v,
                # dropout_p, is_causal)
                causal = bool(kwargs.get("is_causal", args[at] if len(args) > at else False))
                # a square mask is the causal one transformers materializes when it cannot read the padding mask
                # (a fake tensor): on real tensors it passes is_causal instead (masking_utils._ignore_causal_mask_sdpa)
                causal = causal or _square(kwargs.get("attn_mask"))
                flops = _attention_flops(args, causal, backward=backward)
            kernel = not func.is_view and name not in _NO_KERNEL
            moved = _moved(name, args, out, torch) if kernel else 0.0
            totals = self.ops.setdefault(name, [0, 0, 0.0, 0.0])
            totals[0] += 1
            totals[1] += 1 if kernel else 0
            totals[2] += flops
            totals[3] += moved
            return out

        def traced_ops(self) -> dict[str, TracedOp]:
            return {name: TracedOp(_kind(name), int(n), int(launches), flops, moved)
                    for name, (n, launches, flops, moved) in self.ops.items()}

    return Recorder


def scaled(ops: Mapping[str, TracedOp], other: Mapping[str, TracedOp], steps: float) -> dict[str, TracedOp]:
    """``ops + (other - ops) x steps`` per operator: a trace extended along its layers (by_layers.py)."""
    out = {}
    for name in set(ops) | set(other):
        a, b = ops.get(name), other.get(name)
        kind = (a or b).kind  # type: ignore[union-attr]
        zero = TracedOp(kind, 0, 0, 0.0, 0.0)
        a, b = a or zero, b or zero

        def line(x: float, y: float) -> float:
            return x + (y - x) * steps

        out[name] = TracedOp(kind, round(line(a.dispatches, b.dispatches)), round(line(a.launches, b.launches)),
                             line(a.flops, b.flops), line(a.bytes, b.bytes))
    return out
