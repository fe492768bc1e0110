"""Where a step's time goes: per-operator seconds merged over the phases of a step and the largest shares.
"""

from __future__ import annotations

from collections.abc import Mapping


def merged_seconds(parts: list[Mapping[str, float]], times: int) -> dict[str, float]:
    merged: dict[str, float] = {}
    for part in parts:
        for name, seconds in part.items():
            key = name.removesuffix(".bwd")
            merged[key] = merged.get(key, 0.0) + seconds * times
    return merged


def top_ops(by_op: Mapping[str, float], total: float, n: int = 6) -> tuple[tuple[str, float], ...]:
    ranked = sorted(by_op.items(), key=lambda kv: -kv[1])[:n]
    return tuple((name, seconds / total) for name, seconds in ranked)
