"""`gpuwise models`: the presets, image pipelines and scientific applications, as a table that fits the terminal."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table

from gpuwise.report.narrow import Column, narrow_table

MODEL_COLUMNS = (Column("id", "left"), Column("family", "left", wraps=True), Column("parameters"),
                 Column("hub id", "left"))
MODEL_DROPS = ("hub id",)  # at 80 columns the hub ids (up to 45 characters) leave before a count is cut


def models_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """One row per model: its id, family, exact parameter count and first hub id; the family wraps between words
    and the hub id leaves (kept in ``--json``) on a narrow terminal."""
    cells = [(r["id"], r["family"], f"{r['params']:,}" if r["params"] else "—", (r["hub_ids"] or [""])[0])
             for r in rows]
    return narrow_table(f"{len(rows)} model presets, image pipelines and scientific applications", MODEL_COLUMNS,
                        cells, drop=MODEL_DROPS, note_dropped=True)
