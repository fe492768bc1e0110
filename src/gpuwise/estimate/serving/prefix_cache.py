"""The engine's prefix cache during a session workload: which of a turn's prompt tokens are already in the KV pool.

Each session's context (its earlier turns' prompts and answers, less the shared system prompt) stays in the pool
after its turn finishes, unreferenced and so evictable; the shared system prompt is held once and, touched by every
turn, never the least recently used. When admitted requests need the room, the least recently used session loses
its tail first (vLLM frees a request's blocks in reverse order; SGLang evicts leaves), and with host offload the
evicted tokens move to host memory (within its size), from where a later turn reloads them over the card's host
link when that takes less time than prefilling them again (the engine profile's ``kv_reuse``, runtimes/schema.py).

A hit is the longest cached prefix in whole units of the engine's granularity (vLLM's 16-token block, SGLang's one
token) and at most all but the prompt's last token, whose logits give the first output token
(:func:`reusable_tokens`). llama.cpp's slots (``eviction: slot``) are taken as LRU over the pool: a slot keeps its
last prompt until another request takes it, the least recently served slot first when there are more sessions than
slots.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


def reusable_tokens(cached: int, prompt: int, granularity: int) -> int:
    """Prompt tokens a prefix cache serves: the ``cached`` prefix, at most ``prompt - 1`` tokens, floored to whole
    units of ``granularity``. vLLM (block 16): a 40-token cached prefix of a longer prompt serves 32; SGLang (1): 40.
    A granularity of 0 is an engine that reuses nothing."""
    if granularity <= 0:
        return 0
    return max(0, min(cached, prompt - 1)) // granularity * granularity


@dataclass
class CacheStats:
    """Prompt tokens over a run: all of them, those served from the GPU's cache, those reloaded from host memory,
    and the tokens evicted from the GPU (its count of lost prefixes)."""

    prompt_tokens: int = 0
    hit_tokens: int = 0
    reloaded_tokens: int = 0
    evicted_tokens: int = 0
    reload_s: float = 0.0

    @property
    def hit_rate(self) -> float:
        """Share of prompt tokens not prefilled (served from the GPU or reloaded from host memory)."""
        return (self.hit_tokens + self.reloaded_tokens) / self.prompt_tokens if self.prompt_tokens else 0.0


@dataclass
class _Entry:
    gpu_tokens: int = 0  # the session's context held in the pool (after the shared prefix)
    host_tokens: int = 0  # the next tokens of it, held in host memory


class PrefixCache:
    """The pool's cached session contexts, least recently used first, and the host tier beside them.

    ``reload_s(tokens)``: seconds to bring that many tokens' KV back over the host link; ``recompute_s(tokens,
    after)``: seconds to prefill ``tokens`` more at the end of a prompt chunk of ``after`` tokens."""

    def __init__(self, *, granularity: int, shared_tokens: int, host_tokens: float,
                 reload_s: Callable[[int], float], recompute_s: Callable[[int, int], float]) -> None:
        self.granularity, self.shared, self.host_capacity = granularity, shared_tokens, host_tokens
        self.reload_s, self.recompute_s = reload_s, recompute_s
        self.entries: OrderedDict[int, _Entry] = OrderedDict()  # contexts with tokens on the GPU, LRU first
        self.hosted: OrderedDict[int, _Entry] = OrderedDict()  # contexts only in host memory, oldest first
        self.idle_tokens = 0  # GPU tokens of unreferenced session contexts (evictable)
        self.host_used = 0
        self.shared_cached = False
        self.stats = CacheStats()

    def take(self, session: int, prompt: int) -> tuple[int, float]:
        """A turn of ``session`` with a ``prompt``-token prompt is admitted: (tokens it need not prefill, seconds of
        reloading them from host memory). Its context leaves the idle list: the running request now holds it."""
        entry = self.entries.pop(session, None) or self.hosted.pop(session, None) or _Entry()
        self.idle_tokens -= entry.gpu_tokens
        self.host_used -= entry.host_tokens
        shared = self.shared if self.shared_cached else 0  # the first turn of all prefills the system prompt
        self.shared_cached = True
        on_gpu = reusable_tokens(shared + entry.gpu_tokens, prompt, self.granularity)
        self.stats.prompt_tokens += prompt
        self.stats.hit_tokens += on_gpu
        if not entry.host_tokens:
            return on_gpu, 0.0
        more = reusable_tokens(shared + entry.gpu_tokens + entry.host_tokens, prompt, self.granularity) - on_gpu
        if more <= 0:
            return on_gpu, 0.0
        load = self.reload_s(more)
        if load >= self.recompute_s(more, prompt - on_gpu - more):  # prefilling them again is no slower
            return on_gpu, 0.0
        self.stats.reloaded_tokens += more
        self.stats.reload_s += load
        return on_gpu + more, load

    def release(self, session: int, context: int) -> None:
        """A turn finished: its ``context`` tokens (prompt and answer) stay in the pool, the shared prefix once."""
        kept = max(context - self.shared, 0)
        self.entries[session] = _Entry(kept)
        self.idle_tokens += kept

    def fit(self, room: float) -> None:
        """Evict idle contexts, least recently used first and each from its tail, until they take at most ``room``
        tokens; the evicted tokens move to host memory, in front of what it already held of that context, and the
        host drops its oldest contexts to make room for them."""
        while self.idle_tokens > room and self.entries:
            session, entry = next(iter(self.entries.items()))
            out = int(min(entry.gpu_tokens, math.ceil(self.idle_tokens - max(room, 0.0))))
            entry.gpu_tokens -= out
            self.idle_tokens -= out
            self.stats.evicted_tokens += out
            if self.host_capacity > 0:
                self._host(session, entry, out)
            if entry.gpu_tokens <= 0:
                del self.entries[session]
                if entry.host_tokens > 0:
                    self.hosted[session] = entry

    def _host(self, session: int, entry: _Entry, tokens: int) -> None:
        """Keep ``tokens`` evicted from the tail of ``session``'s context in host memory, before its older part."""
        wanted = min(entry.host_tokens + tokens, int(self.host_capacity))
        while self.host_used - entry.host_tokens + wanted > self.host_capacity and self.hosted:
            _, oldest = self.hosted.popitem(last=False)
            self.host_used -= oldest.host_tokens
        self.host_used += wanted - entry.host_tokens
        entry.host_tokens = wanted
