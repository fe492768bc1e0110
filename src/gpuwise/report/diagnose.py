"""Diagnoses as a rich report and as the documented JSON.

Every text shown is plain text, escaped for rich: the log's lines and the card name it prints (already stripped of
control characters where they were read, troubleshoot/matcher.py) and the knowledge base's own words, which quote
log syntax such as ``capabilities: [[gpu]]`` that rich would otherwise read as markup."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.panel import Panel

from gpuwise.api import Diagnosis


def diagnosis_json(d: Diagnosis) -> dict[str, Any]:
    return {
        "matches": [
            {"id": m.entry.id, "title": m.entry.title, "cause": m.entry.cause.strip(), "confirm": list(m.entry.confirm),
             "fix": list(m.entry.fix), "sources": [{"url": str(s.url), "title": s.title} for s in m.entry.sources],
             "folklore": m.entry.folklore, "score": round(m.score, 3), "evidence": list(m.evidence),
             "matching_lines": m.lines, "notes": list(m.notes)}
            for m in d.matches
        ],
        "checklist": list(d.checklist),
        "memory_advice": d.memory_advice,
        "context": asdict(d.context),
    }


def _context_line(d: Diagnosis) -> str | None:
    """What the log says of the run, and its out-of-memory message's arithmetic, as one line."""
    c = d.context
    if c.oom is None and c.gpu is None:
        return None
    said = [f"card {c.gpu_name} ({c.gpu})" if c.gpu else "", f"method {c.method}" if c.oom else ""]
    if c.oom is not None:
        said.append(c.oom.arithmetic())
    return "[bold]the log says:[/bold] " + escape("; ".join(s for s in said if s))


def _items(prefix: str, texts: Iterable[str]) -> str:
    return "\n".join(f"{prefix}{escape(text)}" for text in texts)


def _panels(d: Diagnosis, top: int) -> list[Panel]:
    panels = []
    for rank, m in enumerate(d.matches[:top], 1):
        e = m.entry
        body = [f"[bold]what it means[/bold] {escape(e.cause.strip())}",
                "[bold]evidence[/bold]\n" + _items("  > ", m.evidence[:3]),
                "[bold]confirm[/bold]\n" + _items("  - ", e.confirm),
                "[bold]fix[/bold]\n" + _items("  - ", e.fix)]
        if e.folklore:
            body.append(f"[bold]not true[/bold] {escape(e.folklore.strip())}")
        body += [f"[dim]{escape(note)}[/dim]" for note in m.notes]
        body.append("[dim]sources: " + escape("; ".join(f"{s.title} <{s.url}>" for s in e.sources)) + "[/dim]")
        panels.append(Panel("\n".join(body), title=f"#{rank} {escape(e.title)} [dim]({escape(e.id)}, score "
                                                    f"{m.score:.2f}, {m.lines} line(s))[/dim]", title_align="left"))
    return panels


def diagnosis_view(d: Diagnosis, *, top: int = 5) -> Group:
    if not d.matches:
        return Group("[yellow]no known signature in this log.[/yellow] Collect this evidence first:",
                     _items("- ", d.checklist))
    parts: list[Any] = list(_panels(d, top))
    if (line := _context_line(d)) is not None:
        parts.append(line)
    if d.memory_advice:
        parts.append(f"[bold]memory:[/bold] {escape(d.memory_advice)}")
    if len(d.matches) > top:
        parts.append(f"[dim]{len(d.matches) - top} more: " + escape(", ".join(m.entry.id for m in d.matches[top:]))
                     + "[/dim]")
    return Group(*parts)
