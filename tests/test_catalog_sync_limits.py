"""`catalog sync` on hostile and oversized price files (generated here): every one is loaded with its bad rows counted
or refused in one line, memory stays bounded, what is written every command can read back, and a signal during the
write leaves nothing behind (issue 37)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.catalog import load_catalog, sync_rows
from gpuwise.catalog import sync as sync_module
from gpuwise.catalog.sync import read_offers
from gpuwise.cli.main import app
from gpuwise.errors import CatalogError, ConfigError, InputTooLarge
from gpuwise.report.recommend import recommendation_view

runner = CliRunner()
HEADER = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\n"
REAL_LAMBDA = Path(__file__).parent / "fixtures" / "skypilot-v8" / "lambda" / "vms.csv"


def _vms(folder: Path, *rows: str, cloud: str = "evil") -> Path:
    (folder / cloud).mkdir(parents=True, exist_ok=True)
    path = folder / cloud / "vms.csv"
    path.write_text(HEADER + "".join(row + "\n" for row in rows), encoding="utf-8", newline="")
    return path


def _sync(source: Path, target: Path, *extra: str) -> tuple[int, dict[str, object]]:
    result = runner.invoke(app, ["catalog", "sync", "--from", str(source), "--to", str(target), "--json", *extra])
    answer = result.output if result.exit_code == 0 else result.output.splitlines()[0]  # an error: its JSON line
    return result.exit_code, json.loads(answer)


def test_prices_out_of_range_are_counted_and_the_rest_loads(tmp_path: Path) -> None:
    source = _vms(tmp_path, "a,H100,1,26,200,1e308,us,,", "b,H100,1,26,200,2e9,us,,", "c,H100,1,26,200,-3,us,,",
                  "d,H100,1,26,200,nan,us,,", "e,H100,1,26,200,abc,us,,", "f,H100,1,26,200,0.0001,us,,",
                  "g,H100,1,26,200,2.5,us,,1e400", "ok,H100,1,26,200,2.5,us,,")
    code, done = _sync(source, tmp_path / "out.json")
    assert code == 0 and done["offers"] == 1 and done["skipped"] == {
        "a price outside 0.001 to 1e+09 USD/h": 6, "a price that is not a number": 1}
    assert [o.instance for o in load_catalog(catalog_files=(tmp_path / "out.json",)).offers_for("h100-sxm-80gb")
            if o.provider == "evil"] == ["ok"]


def test_a_field_past_the_csv_limit_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    source = _vms(tmp_path, "ok,H100,1,26,200,2.5,us,,", "big,H100,1,26,200,2.5," + "x" * 200_000 + ",,")
    code, done = _sync(source, tmp_path / "out.json")
    assert code == 2 and "line 3" in str(done["error"]) and not (tmp_path / "out.json").exists()


def test_an_overlong_name_skips_its_row(tmp_path: Path) -> None:
    found = read_offers(_vms(tmp_path, "x" * 5000 + ",H100,1,26,200,2.5,us,,", "ok,H100,1,26,200,2.5,us,,"),
                        load_catalog())
    assert [o.instance for o in found.offers] == ["ok"] and found.skipped == {"a name longer than 200 characters": 1}


@pytest.mark.parametrize("data", [b"\xff\xfe" + HEADER.encode() + b"a,H100,1,26,200,2.5,us,,\n", b""])
def test_bytes_that_are_not_a_csv_file_are_one_line(tmp_path: Path, data: bytes) -> None:
    (tmp_path / "evil").mkdir()
    (tmp_path / "evil" / "vms.csv").write_bytes(data)
    code, done = _sync(tmp_path / "evil" / "vms.csv", tmp_path / "out.json")
    assert code == 2 and "\n" not in str(done["error"]) and not (tmp_path / "out.json").exists()


def test_nul_bytes_in_a_name_are_dropped(tmp_path: Path) -> None:
    (tmp_path / "evil").mkdir()
    (tmp_path / "evil" / "vms.csv").write_bytes(HEADER.encode() + b"a\x00b,H1\x0000,1,26,200,2.5,us,,\n")
    assert _sync(tmp_path / "evil" / "vms.csv", tmp_path / "out.json")[0] == 0
    assert [o["instance"] for o in json.loads((tmp_path / "out.json").read_text())["offers"]] == ["ab"]


def test_names_are_printable_text_shown_as_written(tmp_path: Path) -> None:
    source = _vms(tmp_path, "[/bold],H100,1,26,200,0.5,us,,",
                  "[link=http://x]y\x1b]8;;http://x\x07z\x9b31m,H100,1,26,200,0.6,[red]eu\x1b[2J,,")
    target = tmp_path / "out.json"
    assert _sync(source, target)[0] == 0
    text = target.read_text(encoding="utf-8")
    assert not any(c in text for c in "\x1b\x07\x9b")
    shown = runner.invoke(app, ["catalog", "show", "h100-sxm-80gb", "--catalog", str(target)])
    assert shown.exit_code == 0 and "[/bold]" in shown.output
    rec = {"workloads": [{"model": "llama-3.1-8b", "task": "infer", "qps": 1}], "acquisitions": ["rent"],
           "gpus": ["h100-sxm-80gb"], "providers": ["evil"]}
    out = io.StringIO()
    Console(file=out, width=200).print(recommendation_view(api.recommend(rec, catalog_files=(target,))))
    assert "evil" in out.getvalue()


def test_a_user_file_with_terminal_escapes_loads_as_plain_text(tmp_path: Path) -> None:
    override = tmp_path / "mine.yaml"
    override.write_text('offers:\n  - {id: mine, provider: mine, instance: "h100\\e]8;;http://x\\a box", gpu: '
                        'h100-sxm-80gb, gpus: 1, usd_per_hour: 2.0, region: "eu\\e[2J", as_of: 2026-11-01, '
                        'source: "my contract"}\n')
    offer = load_catalog(catalog_files=(override,)).offers["mine"]
    assert (offer.instance, offer.region) == ("h100]8;;http://x box", "eu[2J")


def test_reading_streams_the_file(tmp_path: Path) -> None:
    info = '"' + str({"Gpus": [{"Name": "H100", "Manufacturer": "NVIDIA", "Count": 8, "Workloads": ["ml-ai"] * 40,
                                 "MemoryInfo": {"SizeInMiB": 81920}}], "TotalGpuMemoryInMiB": 655360}) + '"'
    rows = [f"p5.48xlarge,H100,8,192,2048,{60 + i % 1000 / 100:.2f},us-east-1,{info}," for i in range(6_000)]
    source = _vms(tmp_path, *rows)
    catalog = load_catalog()
    tracemalloc.start()
    try:
        found = read_offers(source, catalog)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert source.stat().st_size > 3_000_000 and peak < source.stat().st_size / 3  # never the whole file in memory
    assert [o.usd_per_hour for o in found.offers] == [60.0] and found.folded_rows == 5_999


def test_more_distinct_offers_than_a_sync_keeps_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sync_rows, "MAX_SYNCED_OFFERS", 5)
    with pytest.raises(InputTooLarge, match="more than 5 distinct GPU offers"):
        read_offers(REAL_LAMBDA, load_catalog())


def test_what_is_written_stays_under_the_loaders_bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sync_module, "MAX_OVERRIDE_BYTES", 3_000)
    target = tmp_path / "out.json"
    with pytest.raises(ConfigError, match="more than 3,000 bytes"):
        api.sync_offers(REAL_LAMBDA, target=target)
    assert list(tmp_path.iterdir()) == []  # no target, no temporary file
    monkeypatch.undo()
    done = api.sync_offers(REAL_LAMBDA, target=target)
    assert done.bytes_written == target.stat().st_size < sync_module.MAX_OVERRIDE_BYTES


def test_a_synced_file_cut_short_is_refused_in_one_line(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    api.sync_offers(REAL_LAMBDA, target=target)
    data = target.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    with pytest.raises(CatalogError, match="cut short or edited: run the sync again") as refused:
        load_catalog(catalog_files=(target,))
    assert "\n" not in str(refused.value)


def test_a_broken_earlier_sync_does_not_stop_the_next(_isolated_config: Path) -> None:
    synced = _isolated_config / "catalog" / "synced-offers.yaml"
    synced.parent.mkdir(parents=True, exist_ok=True)
    synced.write_text('{"offers":[\n{"id":"x"')
    result = runner.invoke(app, ["catalog", "sync", "--from", str(REAL_LAMBDA)])
    assert result.exit_code == 0, result.output
    assert len(json.loads(synced.read_text())["offers"]) > 0


def test_a_missing_folder_for_to_is_refused_before_reading(tmp_path: Path) -> None:
    code, done = _sync(tmp_path / "no-such.csv", tmp_path / "missing" / "out.json")
    assert code == 2 and "does not exist; create it first" in str(done["error"])


def test_ids_stay_distinct_when_names_differ_only_in_punctuation(tmp_path: Path) -> None:
    found = read_offers(_vms(tmp_path, "a_b,H100,1,26,200,2.5,us,,", "a-b,H100,1,26,200,2.6,us,,",
                             "a.b,H100,1,26,200,2.7,us,,"), load_catalog())
    assert len({o.id for o in found.offers}) == 3


def test_sigterm_during_a_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    script = ("import os, signal, sys\n"
              "from pathlib import Path\n"
              "from gpuwise.safe_io import atomic_write\n"
              "def write(handle):\n"
              "    handle.write(b'x' * 100_000)\n"
              "    os.kill(os.getpid(), signal.SIGTERM)\n"
              "    handle.write(b'not reached')\n"
              "atomic_write(Path(sys.argv[1]), write, what='synced offers')\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "out.json")], timeout=120,
                          capture_output=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 143 and list(tmp_path.iterdir()) == [], done.stderr
