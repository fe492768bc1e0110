"""The decode step's time on a grid of batch sizes and contexts, interpolated: the serving simulation asks for the
same few steps millions of times."""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence

StepTime = Callable[[int, float], float]  # (batch, mean context) -> seconds of one decode step


def step_table(step: StepTime, max_batch: int, context: float) -> StepTime:
    """Decode step times on a grid of batch sizes (powers of two) and contexts, each computed once when first
    needed, linear between grid points (the roofline's weight, KV and activation traffic is linear in both)."""
    grid = sorted({1, max_batch, *[2 ** k for k in range(int(math.log2(max(max_batch, 1))) + 1)]})
    contexts = [context * f for f in (0.25, 0.5, 1.0, 2.0, 4.0)]
    table: dict[tuple[int, float], float] = {}
    segments: dict[tuple[float, int], tuple[float, float, float, float]] = {}

    def at(batch: int, ctx: float) -> float:
        if (batch, ctx) not in table:
            table[(batch, ctx)] = step(batch, ctx)
        return table[(batch, ctx)]

    def segment(batch: float, j: int) -> tuple[float, float, float, float]:
        """The step at ``batch`` (between its grid points) at the contexts j - 1 and j: linear between them."""
        b0, b1, wb = _bracket(grid, batch)
        c0, c1 = contexts[j - 1], contexts[j]
        return (at(int(b0), c0) * (1 - wb) + at(int(b1), c0) * wb,
                at(int(b0), c1) * (1 - wb) + at(int(b1), c1) * wb, c0, c1)

    def lookup(batch: float, ctx: float) -> float:
        j = min(max(bisect.bisect_left(contexts, ctx), 1), len(contexts) - 1)
        found = segments.get((batch, j))
        if found is None:  # each batch's segment once: the simulation asks for the same batches again and again
            found = segments[(batch, j)] = segment(batch, j)
        v0, v1, c0, c1 = found
        return v0 + (v1 - v0) * min(max((ctx - c0) / (c1 - c0), 0.0), 1.0)

    return lookup


def _bracket(points: Sequence[float], value: float) -> tuple[float, float, float]:
    """The grid points around ``value`` and its weight towards the upper one (clamped to the grid)."""
    i = min(max(bisect.bisect_left(points, value), 1), len(points) - 1)
    low, high = points[i - 1], points[i]
    if len(points) == 1 or high == low:
        return high, high, 0.0
    return low, high, min(max((value - low) / (high - low), 0.0), 1.0)
