"""A time limit and a cancel switch for long computations, checked where their loops begin a new round.

The core stays pure: it only calls :func:`checkpoint`, which does nothing unless a caller (the web app) runs the
computation inside :func:`limited`. Every loop is already bounded by validated inputs; the budget is what lets a
server stop work whose client has gone, and answer within its time limit.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from gpuwise.errors import TimeLimitExceeded


@dataclass
class Budget:
    seconds: float
    deadline: float = field(init=False)
    cancelled: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.seconds

    def check(self) -> None:
        if self.cancelled.is_set():
            raise TimeLimitExceeded("the computation was cancelled (the client left)")
        if time.monotonic() > self.deadline:
            raise TimeLimitExceeded(f"the computation ran past its {self.seconds:g} s limit; ask for less "
                                    "(fewer workloads, GPUs or requests)")


_current: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("gpuwise_budget", default=None)


def checkpoint() -> None:
    """Raise TimeLimitExceeded when the running computation's budget is spent or cancelled; else nothing."""
    budget = _current.get()
    if budget is not None:
        budget.check()


@contextmanager
def limited(budget: Budget) -> Iterator[Budget]:
    """Run the body under ``budget``: every :func:`checkpoint` inside (this thread or context) enforces it."""
    token = _current.set(budget)
    try:
        yield budget
    finally:
        _current.reset(token)
