"""Long computations of the web app run off the event loop, one at a time, with a time limit and a cancel switch.

A recommendation is CPU-bound Python: run in the event loop it would stall every other request; run ten at once
in threads they would share the interpreter lock with the light handlers. So heavy handlers wait their turn for a
single worker thread (at most MAX_WAITING queue; beyond that the answer is an immediate 503), and each runs under
a :class:`gpuwise.budget.Budget`: past the time limit, or when the client has gone, its next checkpoint stops it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread
from starlette.requests import Request

from gpuwise.budget import Budget, limited
from gpuwise.errors import TimeLimitExceeded

T = TypeVar("T")
MAX_WAITING = 32
POLL_S = 0.1


class HeavyRunner:
    def __init__(self, time_limit_s: float) -> None:
        self.time_limit_s = time_limit_s
        self.waiting = 0
        self._turn: asyncio.Semaphore | None = None

    def _semaphore(self) -> asyncio.Semaphore:
        if self._turn is None:  # created in the server's event loop, on first use
            self._turn = asyncio.Semaphore(1)
        return self._turn

    async def run(self, request: Request, work: Callable[[], T]) -> T:
        """``work()`` in the worker thread under the time limit; TimeLimitExceeded (HTTP 503) when busy or late."""
        if self.waiting >= MAX_WAITING:
            raise TimeLimitExceeded(f"busy: {self.waiting} computations are waiting; retry in a few seconds")
        start = time.monotonic()
        self.waiting += 1
        try:
            await asyncio.wait_for(self._semaphore().acquire(), timeout=self.time_limit_s)
        except (asyncio.TimeoutError, TimeoutError):
            raise TimeLimitExceeded(f"busy: no turn within {self.time_limit_s:g} s; retry later") from None
        finally:
            self.waiting -= 1
        budget = Budget(max(self.time_limit_s - (time.monotonic() - start), 0.1))
        watcher = asyncio.ensure_future(_watch(request, budget))
        try:
            return await anyio.to_thread.run_sync(_limited, budget, work)
        finally:
            watcher.cancel()
            self._semaphore().release()


def _limited(budget: Budget, work: Callable[[], Any]) -> Any:
    with limited(budget):
        return work()


async def _watch(request: Request, budget: Budget) -> None:
    """Cancel the computation when its client disconnects (it would compute an answer nobody reads)."""
    while not budget.cancelled.is_set():
        await asyncio.sleep(POLL_S)
        if await request.is_disconnected():
            budget.cancelled.set()
