"""The figures of PyTorch's CUDA out-of-memory message, and what their arithmetic says about the cause.

PyTorch's caching allocator (c10/cuda/CUDACachingAllocator.cpp) writes, since 2.1::

    Tried to allocate R. GPU 0 has a total capacity of T of which F is free. [Process P has M memory in use.]
    Including non-PyTorch memory, this process has U memory in use. Of the allocated memory A is allocated by
    PyTorch, and Y is reserved by PyTorch but unallocated.

and before 2.1 ``Tried to allocate R (GPU 0; T total capacity; A already allocated; F free; S reserved in total by
PyTorch)``, where the reserved-but-unallocated part is S - A (1.x said ``S cached``).

The request R could have been served from F + Y had the allocator's reserve been one contiguous block. So
fragmentation is the likely cause only when F + Y >= R; below that, even a perfectly packed reserve falls short and
the job simply needs more memory (``expandable_segments`` cannot give back more than Y).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

UNITS = {"bytes": 1, "b": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = r"([\d.]+)\s*(bytes|B|KiB|MiB|GiB|TiB)"
_WINDOW = 1500  # characters after "Tried to allocate" that one message spans
_FIELDS = {
    "requested": (rf"Tried to allocate {_SIZE}",),
    "capacity": (rf"total capac\w* of {_SIZE}", rf"{_SIZE} total capacity"),
    "free": (rf"of which {_SIZE} is free", rf";\s*{_SIZE} free"),
    "unallocated": (rf"{_SIZE} is reserved by PyTorch but unallocated",),
    "allocated": (rf"allocated memory {_SIZE} is allocated by PyTorch", rf"{_SIZE} already allocated"),
    "reserved": (rf"{_SIZE} reserved in total by PyTorch", rf"{_SIZE} cached\)"),
    "process": (rf"this process has {_SIZE} memory in use",),
}
_OTHERS = re.compile(rf"Process \d+ has {_SIZE} memory in use", re.IGNORECASE)


def size_bytes(number: str, unit: str) -> float:
    """``("1.88", "GiB")`` -> 2,018,634,629.12 bytes (PyTorch prints binary units)."""
    return float(number) * UNITS[unit.lower()]


def _field(window: str, patterns: tuple[str, ...]) -> float | None:
    for pattern in patterns:
        found = re.search(pattern, window, re.IGNORECASE)
        if found:
            return size_bytes(found.group(1), found.group(2))
    return None


@dataclass(frozen=True)
class OomFigures:
    """The first out-of-memory message of a log, in bytes; None where the message does not say."""

    requested_bytes: float
    capacity_bytes: float | None
    free_bytes: float | None
    reserved_unallocated_bytes: float | None
    allocated_bytes: float | None
    process_bytes: float | None
    other_processes_bytes: float

    @property
    def servable_bytes(self) -> float | None:
        """Free plus reserved-but-unallocated: what a contiguous reserve could have handed out."""
        if self.free_bytes is None or self.reserved_unallocated_bytes is None:
            return None
        return self.free_bytes + self.reserved_unallocated_bytes

    @property
    def fragmented(self) -> bool | None:
        """True when free + reserved-but-unallocated >= requested (a contiguous reserve would have served the
        request); False when even that falls short; None when the message lacks a figure."""
        servable = self.servable_bytes
        return None if servable is None else servable >= self.requested_bytes

    def arithmetic(self) -> str:
        """The comparison in the message's own units, as one sentence."""
        servable = self.servable_bytes
        if servable is None or self.free_bytes is None or self.reserved_unallocated_bytes is None:
            return f"requested {gib(self.requested_bytes)}; the message gives no free or reserved figure"
        sign = ">=" if self.fragmented else "<"
        return (f"free {gib(self.free_bytes)} + reserved but unallocated {gib(self.reserved_unallocated_bytes)} = "
                f"{gib(servable)} {sign} requested {gib(self.requested_bytes)}")


def gib(value: float) -> str:
    """Bytes as PyTorch's message writes them: GiB from 1 GiB up, MiB below."""
    return f"{value / 2**30:,.2f} GiB" if value >= 2**30 else f"{value / 2**20:,.2f} MiB"


def read_oom(text: str) -> OomFigures | None:
    """The figures of the first CUDA out-of-memory message that names its request; None when there is none."""
    start = text.find("Tried to allocate")
    if start < 0:
        return None
    window = text[start:start + _WINDOW]
    end = window.find("Tried to allocate", 1)  # the next message's figures are not this one's
    window = window if end < 0 else window[:end]
    figures = {name: _field(window, patterns) for name, patterns in _FIELDS.items()}
    requested = figures["requested"]
    if requested is None:
        return None
    unallocated = figures["unallocated"]
    if unallocated is None and figures["reserved"] is not None and figures["allocated"] is not None:
        unallocated = max(figures["reserved"] - figures["allocated"], 0.0)  # before 2.1: reserved in total - allocated
    others = sum(size_bytes(m.group(1), m.group(2)) for m in _OTHERS.finditer(window))
    return OomFigures(requested, figures["capacity"], figures["free"], unallocated, figures["allocated"],
                      figures["process"], others)


FRAGMENTATION, OUT_OF_MEMORY = "cuda-oom-fragmentation", "cuda-oom"


def weigh(entry_id: str, figures: OomFigures | None) -> tuple[float, tuple[str, ...]]:
    """How the message's own arithmetic weighs an out-of-memory entry: (score factor, notes).

    Every message since PyTorch 2.1 suggests expandable_segments, so the fragmentation entry matches them all; its
    figures decide whether it is the cause (x 1.5) or not (x 0.3, and the plain OOM entry x 1.5), as doctor facts do.
    """
    verdict = None if figures is None else figures.fragmented
    if figures is None or verdict is None or entry_id not in (FRAGMENTATION, OUT_OF_MEMORY):
        return 1.0, ()
    sums = figures.arithmetic()
    if entry_id == FRAGMENTATION:
        if verdict:
            return 1.5, (f"the message's figures point here: {sums}; a contiguous reserve would have served it",)
        return 0.3, (f"less likely: {sums}; even a contiguous reserve falls short, and expandable_segments gives "
                     "back at most the reserved-but-unallocated part",)
    if verdict:
        return 1.0, ()
    short = figures.requested_bytes - (figures.servable_bytes or 0.0)
    return 1.5, (f"the message's figures point here: {sums}; this allocation alone was {gib(short)} short, so the "
                 "job needs less memory (or a larger card), not a defragmented one",)
