"""The engine's scheduler state for the serving simulation (``serving.simulate``): its queues, its KV pool and clock,
and, for session workloads, the prefix cache (``serving.prefix_cache``) that decides how much of each prompt is
prefilled."""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpuwise.estimate.serving.prefix_cache import PrefixCache

StepTime = Callable[[int, float], float]  # (batch, mean context) -> seconds of one decode step


@dataclass(frozen=True)
class Request:
    arrival_s: float
    input_len: int
    output_len: int


@dataclass(frozen=True)
class Policy:
    """How the engine's scheduler forms an iteration (the engine profile's ``mixes_prefill``, ``schedules_ahead``
    and ``client_turnaround_s``, runtimes/schema.py): whether decodes and prompt chunks share an iteration and its
    token budget, how many iterations it forms ahead of the GPU, and how long a closed-loop client's next request
    takes to reach it."""

    mixes_prefill: bool = True
    ahead: int = 0
    turnaround_s: float = 0.0  # mean of the exponential time from a closed-loop request's last token to the
    # client's next request reaching the scheduler (beside CLIENT_TURNAROUND_S): what lets clients drift apart
    request_overhead_s: float = 0.0  # the engine's server between the client and the scheduler (HTTP, the chat
    # template and tokenizer, detokenizing and streaming the first token back): a request reaches the scheduler
    # this long after the client sent it, and every latency the client measures includes it


@dataclass(frozen=True)
class Sessions:
    """A session workload's link to the prefix cache: the session of each request (a turn) and the cache."""

    session_of: Sequence[int]
    cache: PrefixCache
    attention_pair_s: float = 0.0  # prefill attention per (query, key) pair: what a turn's keys cost beyond the
    planned_keys: float = 0.0  # keys the replica's prefill charges each query (half the planned mean prompt)

    def attention_s(self, prompt: int, cached: int) -> float:
        """What the prefill of a turn's ``prompt - cached`` new tokens costs beyond the replica's prefill: its queries
        attend to the cached prefix and half the new tokens (causal), not to ``planned_keys``; less for an early
        turn, more for a late one of a long session."""
        new = max(prompt - cached, 1)
        return new * (cached + new / 2 - self.planned_keys) * self.attention_pair_s


class Scheduler:
    """The engine's queues and clock: pending (not arrived yet, a heap by time), waiting (arrived, not admitted),
    prefilling (admitted, prompt not done) and running (decoding) requests. Every running sequence gains one token
    per decoding iteration, so each one's last decoding iteration is known when it starts decoding: a heap of those
    makes an iteration cost O(log n), not O(n)."""

    def __init__(self, requests: Sequence[Request], arrival: list[float], max_batch: int, kv_capacity: float,
                 token_budget: int | None, prefix_hit: float, policy: Policy, sessions: Sessions | None = None
                 ) -> None:
        self.requests, self.arrival, self.max_batch, self.kv_capacity = requests, arrival, max_batch, kv_capacity
        self.token_budget, self.prefix_hit, self.policy, self.sessions = token_budget, prefix_hit, policy, sessions
        self.shared = sessions.cache.shared if sessions is not None else 0  # held once in the pool, not per request
        self.loading: dict[int, float] = {}  # request -> seconds of reloading its prefix from host memory and of
        # its queries' attention beyond the replica's prefill (Sessions.attention_s), charged with its first chunk
        self.pending = [(t + policy.request_overhead_s, i) for i, t in enumerate(arrival) if t < math.inf]
        heapq.heapify(self.pending)
        self.waiting: deque[int] = deque()
        self.prefilling: dict[int, int] = {}  # request -> prompt tokens still to prefill (insertion = arrival order)
        self.ends: list[tuple[int, int]] = []  # heap of (the decoding iteration a request finishes in, request)
        self.context_sum = 0  # tokens held by the running sequences (prompt + generated)
        n = len(requests)
        self.first_token, self.finished, self.started = [math.nan] * n, [math.nan] * n, [math.nan] * n
        self.clock, self.batches, self.steps, self.generated = 0.0, 0, 0, 0
        self.decode_steps = 0  # iterations that decoded (all of them, unless prefills run alone)
        self.starts: deque[float] = deque(maxlen=policy.ahead + 1)  # when the last iterations started

    @property
    def running(self) -> int:
        return len(self.ends)

    def busy(self) -> bool:
        return bool(self.pending or self.waiting or self.prefilling or self.ends)

    def arrive(self, i: int, t: float) -> None:
        """The client sends request ``i`` at ``t``; the scheduler sees it after the server's overhead."""
        self.arrival[i] = t
        heapq.heappush(self.pending, (t + self.policy.request_overhead_s, i))

    def mean_context(self) -> float:
        return self.context_sum / len(self.ends)

    def schedule(self) -> dict[int, int]:
        """This iteration's prompt chunks: request -> tokens. It takes the arrivals before the start of the
        iteration ``policy.ahead`` back (the one it was formed during), or before now when the engine was idle."""
        idle = not self.waiting and not self.prefilling and not self.ends
        if idle:
            self.clock = max(self.clock, self.pending[0][0])
            self.starts.clear()
        self.starts.append(self.clock)
        cutoff = self.starts[0]
        while self.pending and self.pending[0][0] <= cutoff:
            self.waiting.append(heapq.heappop(self.pending)[1])
        self._admit()
        used = self.running if self.policy.mixes_prefill else 0  # decodes share the budget only when mixed
        room = math.inf if self.token_budget is None else max(self.token_budget - used, 0)
        chunks: dict[int, int] = {}
        for i, left in self.prefilling.items():
            if room <= 0:
                break
            take = int(min(left, room))
            chunks[i] = take
            room -= take
        return chunks

    def _admit(self) -> None:
        shared = self.shared
        used = self.context_sum - shared * self.running + sum(
            self.requests[i].input_len + self.requests[i].output_len - shared for i in self.prefilling)
        while self.waiting and self.running + len(self.prefilling) < self.max_batch:
            i = self.waiting[0]
            need = self.requests[i].input_len + self.requests[i].output_len - shared
            if used + need > self.kv_capacity - shared and (self.ends or self.prefilling):
                break
            self.waiting.popleft()
            self.prefilling[i] = max(1, self.requests[i].input_len - self._cached(i))  # the cached prefix is reused
            self.started[i] = self.clock
            used += need
        if self.sessions is not None:  # idle sessions' contexts give way to the running requests' KV
            self.sessions.cache.fit(self.kv_capacity - shared - used)

    def _cached(self, i: int) -> int:
        """Prompt tokens of request ``i`` already in the cache: the session's, or the stream's --prefix-hit share."""
        prompt = self.requests[i].input_len
        if self.sessions is None:
            return math.floor(prompt * self.prefix_hit)
        cached, load_s = self.sessions.cache.take(self.sessions.session_of[i], prompt)
        extra_s = load_s + self.sessions.attention_s(prompt, cached)
        if extra_s:
            self.loading[i] = extra_s
        return cached

    def coast(self, decode_step: StepTime) -> bool:
        """Run at once the decode-only iterations before the next sequence finishes and before the next arrival,
        when nothing waits (an O(1) jump instead of one loop turn per token). The context grows by one token a
        step, so the k steps cost k x the step at their middle context (exact where the step is linear in the
        context, as the step table is between its grid points). An arrival joins the first iteration that starts at
        or after it, so the jump ends before it: the iterations the loop would have run one by one, none of which
        admits anything. False when there is nothing to jump over."""
        k = self.ends[0][0] - self.decode_steps - 1
        if k < 2 or self.waiting or self.prefilling:
            return False
        context = self.mean_context()
        seconds = k * decode_step(self.running, context + (k - 1) / 2)
        if self.pending:
            room = self.pending[0][0] - self.clock
            while k >= 2 and seconds >= room:  # fewer steps, each no longer than the k steps' middle one
                k = min(k - 1, math.floor(room / (seconds / k)))
                seconds = k * decode_step(self.running, context + (k - 1) / 2)
            if k < 2:
                return False
        self.clock += seconds
        self.starts.append(self.clock - seconds / k)  # the last jumped iteration's start
        self.steps += k
        self.decode_steps += k
        self.batches += self.running * k
        self.generated += self.running * k
        self.context_sum += self.running * k
        return True

    def advance(self, step: float, chunks: dict[int, int], decoded: bool = True) -> list[int]:
        """Run the iteration (``decoded``: the running sequences gain a token in it); returns the requests that
        finished, whose contexts stay in the prefix cache of a session workload."""
        self.clock += step
        self.steps += 1
        if decoded:
            self.decode_steps += 1
            self.batches += self.running
            self.generated += self.running
            self.context_sum += self.running
        done: list[int] = []
        while self.ends and self.ends[0][0] <= self.decode_steps:
            _, i = heapq.heappop(self.ends)
            self.finished[i] = self.clock
            self.context_sum -= self.requests[i].input_len + self.requests[i].output_len
            done.append(i)
        for i, take in chunks.items():
            self.prefilling[i] -= take
            if self.prefilling[i] > 0:
                continue
            del self.prefilling[i]
            self.first_token[i] = self.clock  # the prompt's last chunk yields the first token
            self.generated += 1
            if self.requests[i].output_len <= 1:
                self.finished[i] = self.clock
                done.append(i)
            else:  # one token now; the rest one per decoding iteration, the last output_len - 1 of them later
                heapq.heappush(self.ends, (self.decode_steps + self.requests[i].output_len - 1, i))
                self.context_sum += self.requests[i].input_len + 1
        if self.sessions is not None:
            for i in done:
                self.sessions.cache.release(self.sessions.session_of[i], self.requests[i].input_len
                                            + self.requests[i].output_len)
        return done
