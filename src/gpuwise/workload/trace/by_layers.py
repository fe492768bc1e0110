"""A trace of a deep model from two shallow ones: the model's own code built with one and with two periods of its
layer pattern, and every figure extended along the line through them to the model's depth.

Each repeated layer adds the same parameters, gradients, optimizer states, saved activations, FLOPs and dispatched
operators, and the peak falls at the same point of the step (the loss, or the end of backward), so the traced figures
are linear in the number of layers: an 8B model of 32 identical layers traces as 3 and 4 layers, in seconds instead
of many minutes. A layer pattern is read from the config: ``layer_types`` (sliding/full or linear/full attention),
``decoder_sparse_step`` (a routed-expert layer every k), ``first_k_dense_replace`` (dense layers before the
experts). A config whose layers follow no such pattern (``mlp_only_layers``) traces whole.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from gpuwise.workload.trace.kernels import scaled
from gpuwise.workload.trace.steps import Trace

SHALLOW_LAYERS = 3  # the shorter trace keeps at least this many layers (a prefix plus a period, or three)


def _period(types: Sequence[object], start: int) -> int:
    """The smallest p with types[i] == types[i + p] for every i from ``start`` (the whole tail if none is shorter)."""
    tail = list(types[start:])
    for p in range(1, len(tail) // 2 + 1):
        if all(tail[i] == tail[i + p] for i in range(len(tail) - p)):
            return p
    return len(tail)


def layer_plan(config: Mapping[str, Any]) -> tuple[int, int] | None:
    """(layers before the pattern repeats, layers per period), or None when the config must trace whole."""
    layers = config.get("num_hidden_layers")
    if not isinstance(layers, int) or config.get("mlp_only_layers"):
        return None
    prefix = int(config.get("first_k_dense_replace") or 0)
    period = int(config.get("decoder_sparse_step") or 1)
    types = config.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        period = max(period, _period(types, prefix))
    return prefix, period


def _shallow(config: Mapping[str, Any], layers: int) -> dict[str, Any]:
    cut = {**config, "num_hidden_layers": layers}
    if isinstance(config.get("layer_types"), list):
        cut["layer_types"] = list(config["layer_types"])[:layers]
    return cut


def _extend(short: Trace, long: Trace, steps: float, layers: int) -> Trace:
    def line(a: float, b: float) -> float:
        return a + (b - a) * steps

    kinds = set(short.breakdown_bytes) | set(long.breakdown_bytes)
    breakdown = {k: line(short.breakdown_bytes.get(k, 0.0), long.breakdown_bytes.get(k, 0.0)) for k in kinds}
    highest = {k: line(short.max_by_kind.get(k, 0.0), long.max_by_kind.get(k, 0.0))
               for k in set(short.max_by_kind) | set(long.max_by_kind)}
    return replace(long, peak_allocated_bytes=line(short.peak_allocated_bytes, long.peak_allocated_bytes),
                   breakdown_bytes=breakdown, max_by_kind=highest,
                   flops_per_step=line(short.flops_per_step, long.flops_per_step),
                   kernels_per_step=round(line(short.kernels_per_step, long.kernels_per_step)),
                   ops=scaled(short.ops, long.ops, steps),
                   method=f"{long.method}; traced at two depths and extended to {layers} layers (linear in the "
                          "number of repeated layers: workload/trace/by_layers.py)")


def trace_by_layers(config: Mapping[str, Any], trace: Callable[[Mapping[str, Any]], Trace]) -> Trace:
    """``trace(config)``, from two shallow traces when the model is deep enough for that to save time."""
    plan = layer_plan(config)
    layers = config.get("num_hidden_layers")
    if plan is None or not isinstance(layers, int):
        return trace(config)
    prefix, period = plan
    shallow = prefix + period * max(1, -(-(SHALLOW_LAYERS - prefix) // period))
    if layers <= shallow + 2 * period:
        return trace(config)
    short, long = trace(_shallow(config, shallow)), trace(_shallow(config, shallow + period))
    return _extend(short, long, (layers - shallow) / period, layers)
