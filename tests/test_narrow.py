"""Tables at 80 columns drop columns rather than cut a figure or a header (issue 28)."""

from __future__ import annotations

import pytest
from rich.console import Console

from gpuwise.catalog import Catalog
from gpuwise.report.catalog import gpu_list_table
from gpuwise.report.narrow import Column, narrow_table


def _render(table: object, width: int) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(table)
    return console.export_text()


@pytest.mark.parametrize("width", [80, 100, 160])
def test_catalog_list_never_cuts_a_figure(width: int, shipped: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every GPU id and memory figure shows whole, no header is cut to an ellipsis, no line passes the width; the
    wider the terminal, the more columns stay."""
    monkeypatch.setenv("COLUMNS", str(width))
    gpus = list(shipped.gpus.values())
    text = _render(gpu_list_table(gpus), width)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= width
    for gpu in gpus:
        assert gpu.id in text
    assert ("vendor" in text) is (width >= 160)  # the first column to go


def test_columns_leave_in_the_order_given_until_the_rest_fit() -> None:
    """Four 10-character columns take 4 x 13 + 1 = 53 characters: at 45 one must go, the first named."""
    columns = [Column(h) for h in ("alpha", "beta", "gamma", "delta")]
    rows = [("a" * 10, "b" * 10, "c" * 10, "d" * 10)]
    text = _render(narrow_table("t", columns, rows, drop=("gamma", "beta"), width=45), 45)
    assert "c" * 10 not in text and "b" * 10 in text and "a" * 10 in text and "d" * 10 in text
