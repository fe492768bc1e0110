"""How an engine sizes its KV pool at start-up, by version: the typed records an engine profile keeps in
``memory_profiles`` (the records themselves, with their sources, are in ``runtimes/memory_rules.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import takewhile
from typing import Literal

ProfileTokens = Literal["budget", "model_len_unless_chunked"]
"""The tokens a memory-profiling forward runs:
    budget                    the scheduler's token budget, max_num_batched_tokens (vLLM V1, chunked prefill always)
    model_len_unless_chunked  max(max_model_len, 2048) unless chunked prefill turns on for a long context, then its
                              small chunk (vLLM V0)"""


@dataclass(frozen=True)
class FractionReserve:
    """SGLang's default mem_fraction_static: (GPU MiB - reserve) / GPU MiB, rounded to 3 places, where reserve =
    base + max(chunk, 2048) x per_token + tp x pp x per_rank + the decode graphs' max batch x per_graph_seq, at
    least ``floor_mib`` on cards over ``floor_above_gib``."""

    base_mib: float
    per_token_mib: float
    per_rank_mib: float
    per_graph_seq_mib: float
    floor_mib: float
    floor_above_gib: float


@dataclass(frozen=True)
class MemoryProfile:
    """How a range of an engine's versions sizes its KV pool: from ``since`` until the next record's ``since``."""

    since: tuple[int, ...]  # the first version (0, 8) = 0.8 that does it this way
    profile_tokens: ProfileTokens
    graphs_before_pool: bool  # the CUDA graphs' memory is estimated and taken before the pool is sized
    max_num_seqs: int | None  # the default batch cap these versions take on every card (None: the card rules)
    chunked_above_len: int | None  # model_len_unless_chunked: chunked prefill on above this max_model_len (CUDA)
    chunk_tokens: int | None  # ... and then this many tokens per step
    source: str
    sampler_bytes_per_logit: float | None = None  # the profiled sampler's bytes per logit (None: the engine's own)
    fraction_by_tp: tuple[tuple[int, float], ...] = ()  # default pool fraction from this TP up (largest first)
    fraction_reserve: FractionReserve | None = None  # default pool fraction from a reserve by card and TP
    caches_latent: bool = True  # MLA layers cache their latent (False: each head's K and V, V padded to K's dims)
    groups_layers: bool = False  # the hybrid allocator: layers in groups by type, one block id per group


def version_tuple(version: str) -> tuple[int, ...]:
    """``v0.6.4.post1`` -> (0, 6, 4): the leading numbers of a version string."""
    numbers = []
    for part in version.lstrip("vV").split("."):
        digits = "".join(takewhile(str.isdigit, part[:6]))
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers)


