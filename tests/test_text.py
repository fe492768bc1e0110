"""The one rule for text from files (gpuwise/text.py), against Unicode's own character categories and the terminal
sequences the hostile-input probes used."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwise.text import printable


def test_terminal_and_bidi_sequences_lose_their_hidden_characters() -> None:
    osc_link = "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\"
    assert printable(osc_link) == "]8;;http://evil.example\\click]8;;\\"  # no ESC left: nothing a terminal acts on
    assert printable("name\u202eexe.txt") == "nameexe.txt"  # the right-to-left override that reverses a file name
    assert printable("a\rb\x9b31m") == "ab31m"  # carriage return and the C1 CSI byte
    assert printable("two\nlines\tand a tab") == "two\nlines\tand a tab"
    assert printable("two\nlines\u2028too", one_line=True) == "two lines too"


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_nothing_hidden_survives_and_nothing_visible_is_lost(text: str) -> None:
    kept = printable(text)
    assert all(c in "\t\n" or unicodedata.category(c) not in ("Cc", "Cf", "Cs", "Co") for c in kept)
    visible = [c for c in text if unicodedata.category(c) not in ("Cc", "Cf", "Cs", "Co") or c in "\t\n"]
    assert kept == "".join(visible)
    line = printable(text, one_line=True)
    assert "\n" not in line and "\t" not in line and "  " not in line
