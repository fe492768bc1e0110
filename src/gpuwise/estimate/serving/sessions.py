"""Multi-turn sessions: the requests they send, and the prefix-cache hit rate a closed form expects of them.

A session of ``turns`` turns shares a system prompt of S tokens with every other session; each turn adds I new input
tokens and O output tokens, and sends everything so far (the chat API is stateless; the engine's prefix cache is
what remembers). With the legend S system prompt, I input, O output, k = 0 .. N - 1 the turn:
    prompt_k   = S + k (I + O) + I
    context_k  = prompt_k + O                        (what the turn holds in the KV pool when it finishes)
    cached_k   = S + k (I + O)   for k >= 1          (the previous turn's context; the first turn hits S once cached)
so a session sends N I + N S + N (N - 1) / 2 (I + O) prompt tokens, of which N S + N (N - 1) / 2 (I + O) are the
prefix of an earlier prompt once the system prompt is cached: the hit rate when every context stays cached.
Sessions arrive as a Poisson process (``--qps``, sessions per second) or come from ``--concurrency`` users who each
start their next session when the last one ended; a session's next turn comes ``think_time_s`` after its last answer.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from gpuwise.errors import ConfigError
from gpuwise.estimate.serving.scheduler import Request

Follow = dict[int, tuple[int, float]]  # request -> (the request it lets in when it finishes, after how long)


@dataclass(frozen=True)
class SessionWorkload:
    """What each session sends: ``turns`` turns of ``input_len`` new tokens and ``output_len`` answered ones after a
    shared ``system_prompt_len``-token prompt, ``think_time_s`` apart."""

    turns: int
    think_time_s: float
    system_prompt_len: int
    input_len: int
    output_len: int

    def prompt_len(self, turn: int) -> int:
        """Prompt tokens of turn ``turn`` (0-based): the system prompt, every earlier turn, the new input."""
        return self.system_prompt_len + turn * (self.input_len + self.output_len) + self.input_len

    @property
    def last_context(self) -> int:
        """Tokens the last turn holds when it finishes: the longest context a session reaches."""
        return self.prompt_len(self.turns - 1) + self.output_len

    @property
    def mean_prompt_len(self) -> float:
        return self.system_prompt_len + self.input_len + (self.turns - 1) / 2 * (self.input_len + self.output_len)

    @property
    def mean_context(self) -> float:
        """A session's mean context between turns (what it holds while its user thinks), over its turns."""
        return self.mean_prompt_len + self.output_len

    @property
    def prefix_share(self) -> float:
        """Share of a session's prompt tokens that an earlier prompt already holds (module docstring), when the
        system prompt is cached and no context is evicted."""
        n = self.turns
        history = n * (n - 1) / 2 * (self.input_len + self.output_len)
        total = n * (self.system_prompt_len + self.input_len) + history
        return (n * self.system_prompt_len + history) / total if total else 0.0

    def session_s(self, turn_s: float) -> float:
        """Seconds a session lasts when each turn takes ``turn_s`` from its arrival to its last token."""
        return self.turns * turn_s + (self.turns - 1) * self.think_time_s


def check_context(work: SessionWorkload, max_positions: int | None, model: str) -> None:
    """A one-line error when the system prompt, or the last turn's context, is longer than the model's context."""
    if max_positions is None:
        return
    if work.system_prompt_len >= max_positions:
        raise ConfigError(f"--system-prompt-len {work.system_prompt_len:,} is not shorter than {model}'s context of "
                          f"{max_positions:,} tokens; use fewer tokens")
    if work.last_context > max_positions:
        fit = max((max_positions - work.system_prompt_len) // (work.input_len + work.output_len), 0)
        fix = (f"use at most --turns {fit} at these lengths" if fit else
               f"even one turn of --input-len {work.input_len:,} + --output-len {work.output_len:,} does not fit: "
               "shorten them")
        raise ConfigError(f"--turns {work.turns}: the last turn's context ({work.last_context:,} tokens) passes "
                          f"{model}'s context of {max_positions:,}; {fix}")


@dataclass(frozen=True)
class SessionStream:
    requests: list[Request]  # turn k of session s is request s x turns + k; later turns arrive when let in
    session_of: list[int]
    follow: Follow


def session_stream(work: SessionWorkload, sessions: int, *, qps: float | None = None, users: int | None = None,
                   seed: int = 0) -> SessionStream:
    """``sessions`` sessions arriving at ``qps`` per second (Poisson), or run by ``users`` closed-loop users."""
    rng = random.Random(seed)
    requests: list[Request] = []
    follow: Follow = {}
    t = 0.0
    for s in range(sessions):
        if qps is not None:
            t += rng.expovariate(qps)
            first = t
        else:
            first = 0.0 if users is not None and s < users else math.inf
        for k in range(work.turns):
            i = s * work.turns + k
            requests.append(Request(first if k == 0 else math.inf, work.prompt_len(k), work.output_len))
            if k + 1 < work.turns:
                follow[i] = (i + 1, work.think_time_s)
        if users is not None and s + users < sessions:  # the user's next session starts when this one ended
            follow[s * work.turns + work.turns - 1] = ((s + users) * work.turns, 0.0)
    return SessionStream(requests, [i // work.turns for i in range(len(requests))], follow)


def expected_hit_rate(work: SessionWorkload, *, concurrent_sessions: float, pool_tokens: float,
                      granularity: int) -> float:
    """The closed form's share of prompt tokens served from the cache. Every turn hits the shared system prompt; a
    later turn hits its session's previous context too, each floored to whole units of the engine's granularity
    and to all but the prompt's last token, while the pool holds that context. With ``concurrent_sessions`` live
    sessions (those in think time included) of ``mean_context`` tokens each beyond the system prompt, the pool holds
    them all while that working set fits ``pool_tokens``, and none of them once it does not: a session comes back
    after every other live session was touched, so LRU has evicted it first (the cliff of LRU under a cyclic
    reference pattern; serve-sim, which evicts block by block, shows it too). 0 without reuse."""
    if granularity <= 0:
        return 0.0
    g = granularity

    def reusable(cached: int, prompt: int) -> int:
        return max(0, min(cached, prompt - 1)) // g * g

    working_set = concurrent_sessions * max(work.mean_context - work.system_prompt_len, 0.0)
    room = max(pool_tokens - work.system_prompt_len, 0.0)
    held = 1.0 if working_set <= room else 0.0
    hits = 0.0
    for k in range(work.turns):
        shared = reusable(work.system_prompt_len, work.prompt_len(k))
        own = reusable(work.prompt_len(k - 1) + work.output_len, work.prompt_len(k)) if k else shared
        hits += held * own + (1 - held) * shared
    prompts = sum(work.prompt_len(k) for k in range(work.turns))
    return hits / prompts if prompts else 0.0
