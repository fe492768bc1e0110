"""An engine start-up log beside gpuwise's prediction: a table of each figure (log | gpuwise | difference), then the
configuration read and where each knob came from; and the same as JSON. Every text from the file (its name, the
model id, knob values, the version) is escaped: never rich markup, never a terminal sequence."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.table import Table

from gpuwise.api.engine_logs import LogComparison

_KNOB_NAMES = {"gpu": "GPU", "model": "model", "tp": "tensor parallel", "pp": "pipeline parallel", "dtype": "dtype",
               "quantization": "quantization", "format": "weights as (gpuwise)", "kv_cache_dtype": "KV cache dtype",
               "memory_fraction": "memory fraction", "context": "context (max model len)",
               "max_num_seqs": "max sequences", "max_num_batched_tokens": "max batched tokens",
               "enforce_eager": "enforce eager", "block_size": "block size", "engine_version": "engine version"}


def engine_log_json(done: LogComparison) -> dict[str, Any]:
    return done.record()


def _cell(value: float | None, key: str) -> str:
    if value is None:
        return "—"
    if key.endswith("_gib"):
        return f"{value:,.2f}"
    if key == "max_concurrency":
        return f"{value:,.2f}x"
    return f"{value:,.0f}"


def engine_log_view(done: LogComparison) -> Group:
    log = done.log
    version = f" {escape(str(log.version.value))}" if log.version else ""
    table = Table(title=f"{escape(log.source)}: {log.engine}{version}, {escape(done.model)} on {escape(done.gpu)} "
                        "(per GPU): the log beside gpuwise", title_justify="left")
    for header in ("figure", "log", "gpuwise", "difference"):
        table.add_column(header, justify="left" if header == "figure" else "right")
    for row in done.rows:
        diff = row.difference
        table.add_row(row.label, _cell(row.log, row.key), _cell(row.predicted, row.key),
                      f"{diff:+.1%}" if diff is not None else "—")
    knobs = Table(title="configuration read", title_justify="left")
    for header in ("setting", "value", "from"):
        knobs.add_column(header)
    for key, knob in done.settings.items():
        shown = "—" if knob.value is None else str(knob.value)
        knobs.add_row(_KNOB_NAMES.get(key, key), escape(shown[:120]), escape(knob.origin))
    lines = [escape(n) for n in done.notes]
    lines.append("difference = (gpuwise - log) / log; the KV tokens, blocks and concurrency are the engine's count "
                 "over its workers, the GiB figures one GPU's")
    return Group(table, knobs, "\n".join(lines))
