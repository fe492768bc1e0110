"""Benchmark results against the catalog, as a table and JSON."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from gpuwise.probe.bench import Result

_STYLE = {"PASS": "green", "WARN": "yellow", "FAIL": "bold red", "N/A": "dim"}


def bench_json(name: str, card: str | None, results: list[Result]) -> dict[str, Any]:
    return {"device": name, "catalog_id": card, "results": [
        {"metric": r.metric, "value": round(r.value, 3), "unit": r.unit, "reference": r.reference,
         "percent_of_reference": None if r.percent is None else round(r.percent, 1), "verdict": r.verdict,
         "settings": r.settings} for r in results]}


def bench_view(name: str, card: str | None, results: list[Result]) -> Table:
    table = Table(title=f"{name} ({card or 'not in catalog'}): measured vs datasheet", title_justify="left")
    for header in ("metric", "measured", "datasheet", "%", "verdict", "settings"):
        table.add_column(header, justify="right" if header in ("measured", "datasheet", "%") else "left")
    for r in results:
        style = _STYLE[r.verdict]
        table.add_row(r.metric, f"{r.value:,.1f} {r.unit}", "—" if r.reference is None else f"{r.reference:,.1f}",
                      "—" if r.percent is None else f"{r.percent:.0f}%", f"[{style}]{r.verdict}[/{style}]",
                      r.settings)
    return table
