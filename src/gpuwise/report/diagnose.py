"""Diagnoses as a rich report and as the documented JSON."""

from __future__ import annotations

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
        "context": d.context.__dict__,
    }


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
    if d.memory_advice:
        parts.append(f"[bold]memory:[/bold] {d.memory_advice}")
    if len(d.matches) > top:
        parts.append(f"[dim]{len(d.matches) - top} more: " + ", ".join(m.entry.id for m in d.matches[top:]) + "[/dim]")
    return Group(*parts)
