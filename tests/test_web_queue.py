"""The web app's queue for heavy requests (web/runner.py), as docs/safety.md describes it: one computation at a time,
at most MAX_WAITING (32) waiting for their turn, and the next one answered 503 at once, without waiting."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

pytest.importorskip("starlette")

from gpuwise.errors import TimeLimitExceeded, http_status_for
from gpuwise.web.runner import MAX_WAITING, HeavyRunner


class Present:  # a Starlette request whose client stays connected
    async def is_disconnected(self) -> bool:
        return False


def _one() -> int:
    return 1


async def _fill_the_queue_then_ask_once_more() -> tuple[list[int], BaseException]:
    runner, started, gate = HeavyRunner(time_limit_s=120), threading.Event(), threading.Event()
    request: Any = Present()

    def hold() -> bool:
        started.set()
        return gate.wait()

    running = asyncio.ensure_future(runner.run(request, hold))
    try:
        while not started.is_set():  # the first one holds the worker until the gate opens
            await asyncio.sleep(0.01)
        waiting = [asyncio.ensure_future(runner.run(request, _one)) for _ in range(MAX_WAITING)]
        while runner.waiting < MAX_WAITING:
            await asyncio.sleep(0)
        # the hang guard: a queue without a bound would make this call wait for the gate, which stays shut
        with pytest.raises(TimeLimitExceeded) as refused:
            await asyncio.wait_for(runner.run(request, _one), timeout=60)
    finally:
        gate.set()  # whatever happened, the worker thread ends
    await running
    return list(await asyncio.gather(*waiting)), refused.value


def test_the_request_past_32_waiting_is_a_503_at_once_and_the_queue_still_runs() -> None:
    done, refusal = asyncio.run(_fill_the_queue_then_ask_once_more())
    assert MAX_WAITING == 32 and done == [1] * MAX_WAITING  # the 32 that waited all ran, in turn
    assert http_status_for(refusal) == 503
    assert str(refusal) == "busy: 32 computations are waiting; retry in a few seconds"
