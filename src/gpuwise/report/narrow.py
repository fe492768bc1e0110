"""Tables that fit the terminal without cutting a figure: columns are dropped, never truncated.

Each kept column is as wide as its widest cell and its header's longest word (headers wrap between words, cells
never); columns are dropped in the order given (``drop``: the first to go first) until the table fits the width,
80 columns on a default terminal. What a dropped column said stays in ``--json``.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.table import Table

MIN_COLUMNS = 80  # a table always fits a default terminal, even when the width cannot be read


@dataclass(frozen=True)
class Column:
    header: str
    justify: Literal["left", "right"] = "right"


def terminal_width() -> int:
    """The terminal's columns ($COLUMNS when set), at least MIN_COLUMNS."""
    return max(MIN_COLUMNS, shutil.get_terminal_size((MIN_COLUMNS, 24)).columns)


def _width(column: Column, cells: Sequence[str]) -> int:
    longest_word = max((len(word) for word in column.header.split()), default=0)
    return max(longest_word, *(len(c) for c in cells)) if cells else longest_word


def narrow_table(title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]], *,
                 drop: Sequence[str] = (), width: int | None = None) -> Table:
    """A table of ``rows`` under ``columns`` that fits ``width`` (the terminal's): the columns named in ``drop``
    leave, first named first, until every kept one shows its cells whole; the rest are never dropped."""
    limit = width or terminal_width()
    kept = list(range(len(columns)))
    widths = [_width(c, [r[i] for r in rows]) for i, c in enumerate(columns)]
    order = [i for name in drop for i, c in enumerate(columns) if c.header == name]
    for index in order:  # bounded by the columns named in drop
        if sum(widths[i] + 3 for i in kept) + 1 <= limit:
            break
        kept.remove(index)
    table = Table(title=title, title_justify="left")
    for i in kept:
        table.add_column(columns[i].header, justify=columns[i].justify, width=widths[i], overflow="fold")
    for row in rows:
        table.add_row(*(row[i] for i in kept))
    return table
