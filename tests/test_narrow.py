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


def _cli(width: int, *args: str) -> str:
    from typer.testing import CliRunner

    from gpuwise.cli.main import app

    result = CliRunner().invoke(app, list(args), env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    return result.stdout


def _whole(text: str, width: int) -> None:
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= width


@pytest.mark.parametrize("width", [80, 200])
def test_models_never_cut_an_id_or_a_parameter_count(width: int) -> None:
    """issue 36: `models` cut 1,026,408,209,… at 80 columns. Every id and exact count shows whole; the hub ids
    leave before a count is cut, and the caption says so."""
    from gpuwise import api

    text = _cli(width, "models")
    _whole(text, width)
    for preset in api.list_models():
        assert preset.id in text and f"{api.model(preset.id).total_params:,}" in text
    assert ("meta-llama/Llama-3.1-8B" in text) is (width == 200)
    assert ("left out to fit: hub id" in text) is (width == 80)


def test_catalog_compare_of_six_gpus_keeps_every_figure_whole(shipped: Catalog) -> None:
    """Six GPUs do not fit 80 columns side by side: they follow in tables of as many as fit, each figure and its
    ratio to the first whole."""
    from gpuwise.catalog import compare
    from gpuwise.report.format import number, ratio

    ids = ["rtx-4090", "h100-sxm-80gb", "a100-sxm-80gb", "l40s", "b200-sxm-180gb", "rtx-pro-6000-blackwell"]
    text = _cli(80, "catalog", "compare", *ids)
    _whole(text, 80)
    result = compare([shipped.gpus[i] for i in ids])
    for row in result.rows:
        for i, (value, to_first) in enumerate(zip(row.values, row.ratios, strict=True)):
            shown = number(value) if i == 0 or value is None or to_first is None else \
                f"{number(value)} ({ratio(to_first)})"
            assert shown in text, (row.label, ids[i])
    assert text.count("ratios in brackets are to rtx-4090") >= 2


def test_scale_fits_80_columns_and_gives_no_speed_where_it_does_not_fit() -> None:
    from gpuwise import api

    rows = api.scale("llama-3.1-8b", gpu="h100-sxm-80gb", job=api.TrainJob())
    text = _cli(80, "scale", "llama-3.1-8b", "--gpu", "h100-sxm-80gb")
    _whole(text, 80)
    assert any(not r.fits for r in rows) and any(r.fits for r in rows)
    for r in rows:
        figure = f"{r.tokens_per_s:,.0f}"
        assert (figure in text) is r.fits, (r.count, figure)  # a count that does not fit shows no tokens/s


def test_a_prose_column_wraps_between_words_and_never_cuts_one() -> None:
    """The narrowest this table can be: 20 + 24 (the longest word) + 14 characters and 3 x 3 + 1 of rules, 68;
    at 70 the prose wraps between its words, at 100 it stays on one line."""
    columns = [Column("id", "left"), Column("family", "left", wraps=True), Column("parameters")]
    rows = [("x" * 20, "image pipeline (FluxTransformer2DModel)", "12,000,000,000")]
    narrow = _render(narrow_table("t", columns, rows, width=70), 70)
    assert "(FluxTransformer2DModel)" in narrow and "12,000,000,000" in narrow and "x" * 20 in narrow
    assert "image pipeline (Flux" not in narrow and max(len(line) for line in narrow.splitlines()) <= 70
    assert "image pipeline (FluxTransformer2DModel)" in _render(narrow_table("t", columns, rows, width=100), 100)
