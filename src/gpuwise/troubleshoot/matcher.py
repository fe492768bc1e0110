"""Find every known error signature in a log, rank the likely causes, and weigh doctor facts.

Each pattern first needs one of its literal anchors (text every match must contain) to occur anywhere in the
lower-cased log, a C-speed substring test; only then does the regex run, once over the whole log. A 100,000-line
log is scanned in well under a second. Score = weight x (1 + ln(matching lines)),
x 1.5 when a doctor fact confirms the entry, x 0.3 when one rules it out, and the same for the out-of-memory entries
when the message's own figures decide between fragmentation and a job too large (oom.py). A log that matches nothing
gets the generic evidence checklist.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpuwise import budget
from gpuwise.text import printable
from gpuwise.troubleshoot.kb import Entry, entries
from gpuwise.troubleshoot.oom import OomFigures, read_oom, weigh

MAX_EVIDENCE = 5
GENERIC_CHECKLIST = (
    "the first error in the log (later ones are often consequences): search for 'Error', 'Traceback', 'Xid'",
    "nvidia-smi (driver loaded, memory in use, processes) and `gpuwise doctor` (link, power, throttling, ECC)",
    "python -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())'",
    "sudo dmesg | grep -i -E 'nvrm|xid' for driver-level faults",
    "rerun with CUDA_LAUNCH_BLOCKING=1 to get the failing kernel's real stack trace",
)


@dataclass(frozen=True)
class Match:
    entry: Entry
    score: float
    evidence: tuple[str, ...]
    lines: int
    notes: tuple[str, ...] = field(default_factory=tuple)


def _skip_class(pattern: str, i: int) -> int:
    """Index just after the character class that starts at ``pattern[i] == '['``."""
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j + 1


def _split_top_level(pattern: str) -> list[str]:
    branches, depth, start, i = [], 0, 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i = _skip_class(pattern, i)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            branches.append(pattern[start:i])
            start = i + 1
        i += 1
    return [*branches, pattern[start:]]


_QUANTIFIER = re.compile(r"\{\d*(?:,\d*)?\}")


def _literal_runs(branch: str) -> list[str]:
    """Literal text a match must contain: runs outside groups and classes, quantified characters dropped."""
    runs: list[str] = []
    run = ""
    depth, i = 0, 0
    while i < len(branch):
        c = branch[i]
        if c == "\\" and i + 1 < len(branch):
            nxt = branch[i + 1]
            i += 2
            if depth or nxt.isalnum():  # \b \d \s \w ... or a backreference: not a literal
                runs, run = [*runs, run], ""
            else:
                run += nxt
            continue
        if c == "[":
            runs, run = [*runs, run], ""
            if depth == 0 and (close := _skip_class(branch, i)) < len(branch) and branch[close] in "?*{":
                pass  # an optional class: nothing to drop, the run already ended
            i = _skip_class(branch, i)
            continue
        if c == "(":
            depth += 1
            runs, run = [*runs, run], ""
        elif c == ")":
            depth -= 1
        elif depth == 0 and c in "?*{":
            runs, run = [*runs, run[:-1]], ""
            if c == "{" and (quantifier := _QUANTIFIER.match(branch, i)):
                i = quantifier.end()  # {m,n} repeats what precedes it: its body is not text to look for
                continue
        elif depth == 0 and c in ".^$+":
            runs, run = [*runs, run], ""
        elif depth == 0:
            run += c
        i += 1
    return [r for r in [*runs, run] if r]


def anchors(pattern: str) -> tuple[str, ...] | None:
    """Lower-case substrings of which a matching line must contain one; None when no safe anchor exists."""
    found = []
    for branch in _split_top_level(pattern):
        runs = _literal_runs(branch)
        if not runs or len(max(runs, key=len).strip()) < 3:
            return None
        found.append(max(runs, key=len).lower())
    return tuple(found)


@functools.lru_cache(maxsize=4)
def _compiled(kb: tuple[Entry, ...]) -> tuple[tuple[Entry, tuple[tuple[re.Pattern[str], tuple[str, ...] | None], ...]],
                                              ...]:
    return tuple((e, tuple((re.compile(p, re.IGNORECASE), anchors(p)) for p in e.patterns)) for e in kb)


class _Lines:
    """Where each line of a text starts, found once (linear), so that mapping a hit to its line is a bisection --
    not a scan back to the previous newline, which is quadratic on a long line with many hits."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._starts: list[int] | None = None

    @property
    def starts(self) -> list[int]:
        if self._starts is None:
            self._starts = [0, *(m.end() for m in re.finditer("\n", self.text))]
        return self._starts

    def line_of(self, position: int) -> tuple[int, int]:
        """(start, end) of the line holding ``position``."""
        index = bisect.bisect_right(self.starts, position) - 1
        start = self.starts[index]
        end = self.starts[index + 1] - 1 if index + 1 < len(self.starts) else len(self.text)
        return start, end


def scan(text: str, kb: Sequence[Entry] | None = None) -> dict[str, tuple[Entry, list[str], int]]:
    """entry id -> (entry, first evidence lines, number of matching lines).

    Each pattern runs once over the whole text (the regex engine's C loop); hits are mapped to their lines.
    """
    found: dict[str, tuple[Entry, list[str], int]] = {}
    lowered = text.lower()
    lines = _Lines(text)
    present: dict[str, bool] = {}
    for entry, patterns in _compiled(tuple(entries() if kb is None else kb)):
        budget.checkpoint()
        starts: set[int] = set()
        evidence: list[str] = []
        for pattern, needles in patterns:
            if needles is not None and not any(present.setdefault(n, n in lowered) for n in needles):
                continue  # a C-speed substring test rules the pattern out for the whole log
            for hit in pattern.finditer(text):
                begin, end = lines.line_of(hit.start())
                if begin in starts:
                    continue
                starts.add(begin)
                if len(evidence) < MAX_EVIDENCE:  # a line of the log is text: no ESC, OSC or bidi override
                    evidence.append(printable(text[begin:min(end, begin + 2000)]).strip()[:500])
        if starts:
            found[entry.id] = (entry, evidence, len(starts))
    return found


def _fact_factor(entry: Entry, facts: Mapping[str, str]) -> tuple[float, tuple[str, ...]]:
    notes = []
    factor = 1.0
    for fact in entry.confirmed_by:
        if facts.get(fact.check) == fact.status:
            factor *= 1.5
            notes.append(f"confirmed by doctor: {fact.check} is {fact.status}")
    for fact in entry.ruled_out_by:
        if facts.get(fact.check) == fact.status:
            factor *= 0.3
            notes.append(f"less likely: doctor reports {fact.check} {fact.status}")
    return factor, tuple(notes)


def diagnose_text(text: str, *, facts: Mapping[str, str] | None = None, kb: Sequence[Entry] | None = None,
                  oom: OomFigures | None = None) -> list[Match]:
    """Every matching entry, best first; ``facts`` maps doctor check ids to their worst status; ``oom`` the OOM
    message's figures when the caller has read them already (else they are read here when an OOM entry matches)."""
    matches = []
    found = scan(text, kb)
    figures = oom or (read_oom(text) if any("oom" in entry_id for entry_id in found) else None)
    for entry, evidence, count in found.values():
        factor, notes = _fact_factor(entry, facts or {})
        by_figures, arithmetic = weigh(entry.id, figures)
        score = entry.weight * (1 + math.log(count)) * factor * by_figures
        matches.append(Match(entry, score, tuple(evidence), count, arithmetic + notes))
    return sorted(matches, key=lambda m: (-m.score, m.entry.id))
