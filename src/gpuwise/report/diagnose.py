"""Diagnoses as a rich report and as the documented JSON."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from rich.console import Group
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
    return "[bold]the log says:[/bold] " + "; ".join(s for s in said if s)


def diagnosis_view(d: Diagnosis, *, top: int = 5) -> Group:
    if not d.matches:
        lines = "\n".join(f"- {item}" for item in d.checklist)
        return Group("[yellow]no known signature in this log.[/yellow] Collect this evidence first:", lines)
    parts: list[Any] = []
    for rank, m in enumerate(d.matches[:top], 1):
        e = m.entry
        body = [f"[bold]what it means[/bold] {e.cause.strip()}",
                "[bold]evidence[/bold]\n" + "\n".join(f"  > {line}" for line in m.evidence[:3]),
                "[bold]confirm[/bold]\n" + "\n".join(f"  - {c}" for c in e.confirm),
                "[bold]fix[/bold]\n" + "\n".join(f"  - {f}" for f in e.fix)]
        if e.folklore:
            body.append(f"[bold]not true[/bold] {e.folklore.strip()}")
        body += [f"[dim]{note}[/dim]" for note in m.notes]
        body.append("[dim]sources: " + "; ".join(f"{s.title} <{s.url}>" for s in e.sources) + "[/dim]")
        parts.append(Panel("\n".join(body), title=f"#{rank} {e.title} [dim]({e.id}, score {m.score:.2f}, "
                                                  f"{m.lines} line(s))[/dim]", title_align="left"))
    if (line := _context_line(d)) is not None:
        parts.append(line)
    if d.memory_advice:
        parts.append(f"[bold]memory:[/bold] {d.memory_advice}")
    if len(d.matches) > top:
        parts.append(f"[dim]{len(d.matches) - top} more: " + ", ".join(m.entry.id for m in d.matches[top:]) + "[/dim]")
    return Group(*parts)
