"""What a runtime's profile says for one card and one job: its batch and token limits, the decode batches it captures
as CUDA graphs, and the job fields a training framework fills. Pure functions of the records' data."""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from gpuwise.runtimes.schema import CardRule, EngineProfile, FrameworkProfile, GraphCapture

GIB = 2**30


def engine_refusal(profile: EngineProfile, *, quant: str | None, kv_dtype: str, memory_fraction: float | None,
                   cpu_moe: int, pooled: tuple[str, ...], engine_version: str | None = None,
                   enforce_eager: bool = False) -> str | None:
    """Why ``profile`` cannot run a job with these settings, or None: a weight or KV format it lacks, a KV pool
    fraction for an engine without a pool, expert offload on an engine that has none, a version or eager mode
    for an engine whose memory gpuwise does not model by version or with graphs."""
    if engine_version is not None and not profile.memory_profiles:
        return (f"--engine-version picks the memory profile of a vLLM or SGLang release; --engine {profile.id} has "
                "none: leave it out")
    if enforce_eager and profile.graphs is None:
        return f"--enforce-eager turns off CUDA graphs, which --engine {profile.id} does not capture: leave it out"
    formats = profile.weight_formats.value
    if quant is not None and formats is not None and quant not in formats:
        return f"--engine {profile.id} with --quant {quant}: {profile.formats_instead}"
    if kv_dtype not in profile.kv_formats.value:
        kept = ", ".join(sorted(profile.kv_formats.value))
        return (f"--kv-dtype {kv_dtype}: {profile.name} keeps its KV cache as {kept} "
                f"({profile.kv_formats.source.split(':')[0]}); use one of those")
    if memory_fraction is not None and not profile.pooled:
        return (f"--mem-fraction sizes a serving engine's KV pool: --engine {profile.id} has none (use "
                f"{', '.join(pooled)})")
    if cpu_moe and profile.expert_offload is None:
        return (f"--n-cpu-moe keeps MoE experts in host RAM, which {profile.name} does not do; llama.cpp does "
                "(--engine llamacpp)")
    return None


def card_rule(profile: EngineProfile, memory_bytes: float, names: tuple[str, ...]) -> CardRule:
    """The first of the engine's card rules that applies to a card of ``memory_bytes`` total memory named ``names``
    (catalog id, product name: the words an engine matches its device name against)."""
    gib = memory_bytes / GIB
    lowered = " ".join(names).lower()
    for rule in profile.card_rules.value:
        if rule.at_least_gib <= gib < rule.below_gib and not any(word in lowered for word in rule.unless_named):
            return rule
    return CardRule()


def captured_sizes(graphs: GraphCapture | None, rule: CardRule, *, tp: int, max_num_seqs: int | None,
                   query: int = 1) -> tuple[int, ...] | None:
    """The decode batch sizes, in sequences of ``query`` tokens each, the engine replays as CUDA graphs; None when
    it captures none."""
    if graphs is None:
        return None
    return _captured(graphs, rule, tp, max_num_seqs, query)


@lru_cache(maxsize=128)
def _captured(graphs: GraphCapture, rule: CardRule, tp: int, max_num_seqs: int | None,
              query: int) -> tuple[int, ...]:
    largest = _largest(graphs, rule, tp, max_num_seqs, query)
    sizes: list[int] = []
    for item in graphs.sizes:
        start, stop, step = (item, item + 1, 1) if isinstance(item, int) else item
        sizes.extend(range(start, min(stop, largest + 1), step))
    per_sequence = query if graphs.unit == "tokens" else 1
    return tuple(sorted({max(1, s // per_sequence) for s in sizes if s <= largest}))


def _largest(graphs: GraphCapture, rule: CardRule, tp: int, max_num_seqs: int | None, query: int) -> int:
    limits = [graphs.largest_cap] if graphs.largest_cap else []
    if graphs.largest_per_sequence and max_num_seqs:
        limits.append(graphs.largest_per_sequence * max_num_seqs * query)
    if graphs.unit == "tokens" and rule.max_batched_tokens:
        limits.append(rule.max_batched_tokens)
    if graphs.largest_from_card and rule.graph_max_batch:
        limits.append(rule.graph_max_batch[1] if tp >= 4 else rule.graph_max_batch[0])
    return min(limits) if limits else 1


def graph_batch(graphs: GraphCapture | None, batch: int, sizes: tuple[int, ...] | None) -> int | None:
    """The captured size a decode step of ``batch`` sequences replays (padded up where the engine pads), or None
    when it runs without a graph."""
    if graphs is None or not sizes or batch > sizes[-1]:
        return None
    at = sizes[bisect.bisect_left(sizes, batch)]
    return at if graphs.pads or at == batch else None


def framework_fills(profile: FrameworkProfile, values: Mapping[str, Any]) -> dict[str, object]:
    """The fields ``profile``'s framework sets for a job given as ``values`` (the user's flags), before the user's
    own values are laid over them."""
    fills = dict(profile.fills.value)
    method = values.get("method", "full")
    count, tp, pp = (_whole(values.get(k, 1)) for k in ("count", "tp", "pp"))
    accumulates = _whole(values.get("global_batch") or 0) > _whole(values.get("batch", 1))
    if profile.fills_one_gpu_full and method == "full" and count == 1 and not accumulates:
        fills.update(profile.fills_one_gpu_full.value)
    checkpointing = values.get("ckpt", "full") != "none" and values.get("grad_ckpt") is not False
    if profile.fills_while_checkpointing and checkpointing:
        fills.update(profile.fills_while_checkpointing.value)
    if profile.zero_when_data_parallel is not None and count > tp * pp:
        fills["zero"] = profile.zero_when_data_parallel.value
    return fills


def recipe_fields(profile: FrameworkProfile) -> frozenset[str]:
    """Every field ``profile``'s recipe may fill, for some GPU count, method or checkpointing."""
    sources = (profile.fills, profile.fills_one_gpu_full, profile.fills_while_checkpointing)
    found = {k for s in sources if s is not None for k in s.value}
    return frozenset(found | ({"zero"} if profile.zero_when_data_parallel is not None else set()))


def _whole(value: object) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 1


def apply_framework(data: dict[str, Any]) -> dict[str, Any]:
    """A job's flag values with its framework's defaults for the fields the user left out, and ``framework_filled``
    naming them. The grad-ckpt shorthand counts as setting ckpt."""
    from gpuwise import runtimes

    name = data.get("framework")
    if not isinstance(name, str) or name not in runtimes.FRAMEWORK_IDS:
        return data  # no framework, or one the field's own validation refuses
    given = set(data) | ({"ckpt"} if data.get("grad_ckpt") is not None else set())
    filled = {k: v for k, v in framework_fills(runtimes.framework(name), data).items() if k not in given}
    return {**data, **filled, "framework_filled": tuple(sorted(filled))}
