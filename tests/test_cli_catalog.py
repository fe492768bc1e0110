"""`gpuwise` and `gpuwise catalog ...` through typer's test runner, as a user sees them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuwise import __version__
from gpuwise.cli.main import app

runner = CliRunner()


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_version() -> None:
    code, out, _ = run("--version")
    assert code == 0 and out.strip() == f"gpuwise {__version__}"


def test_help_lists_every_command_with_a_line() -> None:
    code, out, _ = run("--help")
    assert code == 0 and "catalog" in out
    code, out, _ = run("catalog", "--help")
    for command in ("list", "show", "compare"):
        assert command in out


def test_list_json_has_every_record_with_sources() -> None:
    code, out, _ = run("catalog", "list", "--json")
    records = json.loads(out)
    assert code == 0 and len(records) >= 45
    assert all(r["sources"] and r["as_of"] for r in records)


def test_list_filters_and_sorts() -> None:
    code, out, _ = run("catalog", "list", "--vendor", "nvidia", "--min-memory", "80", "--feature", "fp8",
                       "--sort", "memory_bandwidth_gb_s", "--json")
    records = json.loads(out)
    assert code == 0 and records
    assert all(r["vendor"] == "nvidia" and r["memory_gb"] >= 80 and r["fp8_dense_tflops"] for r in records)
    bandwidths = [r["memory_bandwidth_gb_s"] for r in records]
    assert bandwidths == sorted(bandwidths, reverse=True)
    assert "a100-sxm-80gb" not in {r["id"] for r in records}  # Ampere has no FP8
    assert "h200-sxm-141gb" in {r["id"] for r in records}


def test_list_ascending_price_puts_unknown_prices_last() -> None:
    _, out, _ = run("catalog", "list", "--sort", "price_usd", "--ascending", "--json")
    prices = [r["price"] and (r["price"]["street_usd"] or r["price"]["msrp_usd"]) for r in json.loads(out)]
    known = [p for p in prices if p]
    assert known == sorted(known)
    assert all(p is None for p in prices[len(known):])


def test_list_table_renders() -> None:
    code, out, _ = run("catalog", "list", "--segment", "consumer")
    assert code == 0 and "rtx-4090" in out and "h100-sxm-80gb" not in out


def test_show_by_loose_name_with_sources_and_offers() -> None:
    code, out, _ = run("catalog", "show", "H100 SXM", "--json")
    record = json.loads(out)
    assert code == 0 and record["id"] == "h100-sxm-80gb"
    assert record["bf16_dense_tflops"] == pytest.approx(989.4, rel=0.01)
    assert record["offers"] and all(o["gpu"] == "h100-sxm-80gb" for o in record["offers"])
    code, out, _ = run("catalog", "show", "rtx4090")
    assert code == 0 and "1,008 GB/s" in out and "sources" in out


def test_compare_gives_ratios_to_the_first() -> None:
    code, out, _ = run("catalog", "compare", "rtx-4090", "a100-sxm-80gb", "h100-sxm-80gb", "--json")
    data = json.loads(out)
    assert code == 0 and data["gpus"] == ["rtx-4090", "a100-sxm-80gb", "h100-sxm-80gb"]
    rows = {r["key"]: r for r in data["rows"]}
    bw = rows["memory_bandwidth_gb_s"]["ratios"]
    assert bw["rtx-4090"] == 1.0
    assert bw["a100-sxm-80gb"] == pytest.approx(2039 / 1008, rel=0.01)  # datasheets: 2,039 and 1,008 GB/s
    assert bw["h100-sxm-80gb"] == pytest.approx(3350 / 1008, rel=0.01)
    per_watt = rows["bf16_tflops_per_kw"]["values"]
    assert per_watt["h100-sxm-80gb"] == pytest.approx(989.4 / 700 * 1000, rel=0.01)
    assert rows["bf16_tflops_per_kw"]["derived"] is True


def test_compare_table_renders_all_gpus() -> None:
    code, out, _ = run("catalog", "compare", "rtx-4090", "a100-sxm-80gb", "h100-sxm-80gb")
    assert code == 0
    for gpu_id in ("rtx-4090", "a100-sxm-80gb", "h100-sxm-80gb"):
        assert gpu_id in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("catalog", "show", "rtx-4909"), "unknown GPU 'rtx-4909'; did you mean rtx-4090"),
        (("catalog", "show", "h100"), "ambiguous"),
        (("catalog", "compare", "rtx-4090"), "at least 2 GPUs"),
        (("catalog", "compare", "rtx-4090", "4090"), "named twice"),
        (("catalog", "list", "--vendor", "nvdia"), "unknown vendor 'nvdia'; use one of: nvidia, amd, intel"),
        (("catalog", "list", "--sort", "speed"), "unknown sort field 'speed'"),
        (("catalog", "list", "--feature", "warp-drive"), "unknown feature 'warp-drive'"),
        (("catalog", "list", "--min-memory", "-1"), "--min-memory must be from 0"),
        (("catalog", "list", "--min-memory", "nan"), "--min-memory must be from 0"),
        (("catalog", "list", "--catalog", "/nonexistent.yaml"), "does not exist"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], needle: str) -> None:
    code, out, err = run(*args)
    assert code == 2
    assert needle in err
    assert err.strip().count("\n") == 0, err
    assert "Traceback" not in err + out


def test_catalog_option_patches_a_price(tmp_path: Path) -> None:
    patch = tmp_path / "p.yaml"
    patch.write_text("gpus:\n  - id: rtx-4090\n    price: {street_usd: 1234, as_of: 2026-11-20, source: quote}\n")
    code, out, _ = run("catalog", "show", "rtx-4090", "--json", "--catalog", str(patch))
    assert code == 0 and json.loads(out)["price"]["street_usd"] == 1234
