"""Text read from outside, made safe to show: the one rule every reader and every shell applies before a name, a field
or a line from a price file, an export, a log or a checkpoint reaches a terminal, a web page or JSON.

What goes is what Unicode says is not text: control characters (ESC starts the CSI and OSC sequences that move a
terminal's cursor, colour it or hide a hyperlink; carriage returns overwrite a line), format characters (bidirectional
marks, embeddings, overrides and isolates that reorder what follows; zero-width characters), lone surrogates (they
cannot be written as UTF-8) and private-use characters: Unicode's general categories Cc, Cf, Cs and Co. Rich markup is
escaped where text is rendered (report/, the CLI's printer), not here.
"""

from __future__ import annotations

import unicodedata

HIDDEN = frozenset({"Cc", "Cf", "Cs", "Co"})


def printable(text: str, *, one_line: bool = False) -> str:
    """``text`` without hidden characters; tabs and newlines stay unless ``one_line``, which also makes every run of
    whitespace (line and paragraph separators included) one space."""
    if not text.isprintable():  # the common case, printable, is decided in C
        kept = "" if one_line else "\t\n"
        text = "".join(c if c in kept or unicodedata.category(c) not in HIDDEN else
                       (" " if one_line and c.isspace() else "") for c in text)
    return " ".join(text.split()) if one_line else text
