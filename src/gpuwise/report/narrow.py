"""Tables that fit the terminal without cutting a figure: columns are dropped, never truncated.

Each kept column is as wide as its widest cell and its header's longest word (headers wrap between words, cells
never); a column of prose (``wraps``) may instead wrap its cells between words, down to its longest word. Columns
are dropped in the order given (``drop``: the first to go first) until the table fits the width, 80 columns on a
default terminal; prose columns then take back the room that is left. What a dropped column said stays in
``--json``.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.table import Table

MIN_COLUMNS = 80  # a table always fits a default terminal, even when the width cannot be read
BORDER = 3  # rich's default box: a rule and a space of padding either side, shared between neighbours


@dataclass(frozen=True)
class Column:
    header: str
    justify: Literal["left", "right"] = "right"
    wraps: bool = False  # prose that may wrap between words; never a figure or an id


def terminal_width() -> int:
    """The terminal's columns ($COLUMNS when set), at least MIN_COLUMNS."""
    return max(MIN_COLUMNS, shutil.get_terminal_size((MIN_COLUMNS, 24)).columns)


def _longest_word(text: str) -> int:
    return max((len(word) for word in text.split()), default=0)


def _width(column: Column, cells: Sequence[str], *, least: bool = False) -> int:
    """The column's natural width (its widest cell), or with ``least`` the narrowest it may wrap to."""
    widths = [_longest_word(c) if least and column.wraps else len(c) for c in cells]
    return max(_longest_word(column.header), *widths) if widths else _longest_word(column.header)


def span(widths: Sequence[int], kept: Sequence[int]) -> int:
    """A table's width in characters: its kept columns' widths, their borders and the closing one."""
    return sum(widths[i] + BORDER for i in kept) + 1


def fit_widths(columns: Sequence[Column], rows: Sequence[Sequence[str]], *, drop: Sequence[str] = (),
               width: int | None = None) -> dict[int, int]:
    """Kept column index -> width: the ``drop`` columns leave, first named first, until the least widths fit;
    prose columns then grow toward their natural width with the room left."""
    limit = width or terminal_width()
    least = [_width(c, [r[i] for r in rows], least=True) for i, c in enumerate(columns)]
    natural = [_width(c, [r[i] for r in rows]) for i, c in enumerate(columns)]
    kept = list(range(len(columns)))
    for index in [i for name in drop for i, c in enumerate(columns) if c.header == name]:  # bounded by drop
        if span(least, kept) <= limit:
            break
        kept.remove(index)
    widths = {i: least[i] for i in kept}
    room = limit - span(least, kept)
    for i in kept:  # the room left goes to prose, first column first
        grow = max(0, min(room, natural[i] - least[i]))
        widths[i] += grow
        room -= grow
    return widths


def narrow_table(title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]], *,
                 drop: Sequence[str] = (), width: int | None = None, caption: str | None = None,
                 note_dropped: bool = False) -> Table:
    """A table of ``rows`` under ``columns`` that fits ``width`` (the terminal's): the columns named in ``drop``
    leave, first named first, until every kept one shows its cells whole; the rest are never dropped. With
    ``note_dropped`` the caption says which left and that ``--json`` keeps them."""
    widths = fit_widths(columns, rows, drop=drop, width=width)
    left = [c.header for i, c in enumerate(columns) if i not in widths]
    if note_dropped and left:
        caption = (f"{caption}\n" if caption else "") + f"left out to fit: {', '.join(left)} (--json keeps them)"
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    for i, w in widths.items():
        table.add_column(columns[i].header, justify=columns[i].justify, width=w, overflow="fold")
    for row in rows:
        table.add_row(*(row[i] for i in widths))
    return table
