"""`gpuwise catalog sync` on the real files: every SkyPilot catalog v8 vms.csv (tests/fixtures/skypilot-v8, whole files
or byte-exact slices, SOURCES.md says which), checked against the CSV's own rows read here with the csv module; the
gpuhunt v2 format (storage.py's columns); and what recommend and tco do with the offers it writes. Hostile and
oversized inputs: tests/test_catalog_sync_limits.py."""

from __future__ import annotations

import csv
import datetime as dt
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.catalog import CloudOffer, load_catalog
from gpuwise.catalog.schema import ID_PATTERN
from gpuwise.catalog.sync import read_offers
from gpuwise.cli.main import app
from gpuwise.errors import ConfigError

runner = CliRunner()
FIXTURES = Path(__file__).parent / "fixtures"
SKYPILOT_V8 = FIXTURES / "skypilot-v8"
CLOUDS = sorted(p.name for p in SKYPILOT_V8.iterdir() if p.is_dir())
GPUHUNT = FIXTURES / "gpuhunt" / "v3" / "runpod" / "20260819-1042" / "runpod.csv"
H100_INFO = ("\"{'Gpus': [{'Name': 'H100', 'Manufacturer': 'NVIDIA', 'Count': 8.0, "
             "'MemoryInfo': {'SizeInMiB': 81920}}]}\"")
A6000_INFO = ("\"{'Gpus': [{'Name': 'A6000', 'Manufacturer': 'NVIDIA', 'Count': 1.0, "
              "'MemoryInfo': {'SizeInMiB': 49152}}]}\"")


def _csv(cloud: str) -> list[dict[str, str]]:
    """The fixture's rows as the csv module reads them: the truth the synced offers are held to."""
    with (SKYPILOT_V8 / cloud / "vms.csv").open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _offers(cloud: str) -> list[CloudOffer]:
    return read_offers(SKYPILOT_V8 / cloud / "vms.csv", load_catalog()).offers


@pytest.mark.parametrize("cloud", CLOUDS)
def test_every_skypilot_v8_file_loads_or_is_refused_in_one_line(cloud: str) -> None:
    assert len(CLOUDS) == 21  # every vms.csv of v8 the index holds (SOURCES.md)
    try:
        found = read_offers(SKYPILOT_V8 / cloud / "vms.csv", load_catalog())
    except ConfigError as refused:
        assert "\n" not in str(refused)
        return
    assert found.offers and found.files == [str(SKYPILOT_V8 / cloud / "vms.csv")]
    ids = [o.id for o in found.offers]
    assert len(set(ids)) == len(ids) and all(re.fullmatch(ID_PATTERN, i) and len(i) <= 64 for i in ids)


def test_all_of_v8_syncs_into_one_file_every_command_reads(tmp_path: Path) -> None:
    target = tmp_path / "synced.yaml"
    done = api.sync_offers(SKYPILOT_V8, target=target, as_of="2026-11-30")
    catalog = load_catalog(catalog_files=(target,))
    synced = [o for o in catalog.offers.values() if o.source.startswith(str(SKYPILOT_V8))]
    assert len(synced) == done.offers and set(done.by_provider) == set(CLOUDS)
    assert {o.as_of for o in synced} == {dt.date(2026, 11, 30)} and done.as_of == ("2026-11-30",) and not done.notes
    shown = runner.invoke(app, ["catalog", "show", "h100-sxm-80gb", "--json", "--catalog", str(target)])
    assert shown.exit_code == 0
    assert {"lambda", "aws", "gcp"} <= {o["provider"] for o in json.loads(shown.output)["offers"]}


def test_lambda_h100_offers_are_the_files_price_in_each_region() -> None:
    rows = [r for r in _csv("lambda") if r["InstanceType"] == "gpu_8x_h100_sxm5"]
    offers = {o.region: o for o in _offers("lambda") if o.instance == "gpu_8x_h100_sxm5"}
    assert len(rows) == 17 and set(offers) == {r["Region"] for r in rows}
    for row in rows:
        offer = offers[row["Region"]]
        assert (offer.usd_per_hour, offer.gpus, offer.tier) == (float(row["Price"]), 8, "on-demand")
        size_gib = int(re.search(r"'SizeInMiB': (\d+)", row["GpuInfo"]).group(1)) / 1024  # type: ignore[union-attr]
        assert load_catalog().gpus[offer.gpu].memory_gb == size_gib and "H100" in load_catalog().gpus[offer.gpu].name


def test_aws_p5_keeps_each_regions_cheapest_zone_on_demand_and_spot() -> None:
    rows = [r for r in _csv("aws") if r["InstanceType"] == "p5.48xlarge"]
    offers = [o for o in _offers("aws") if o.instance == "p5.48xlarge"]
    for region in {r["Region"] for r in rows}:
        here = [r for r in rows if r["Region"] == region]
        demand = [o for o in offers if o.region.startswith(region + "/") and o.tier == "on-demand"]
        assert [o.usd_per_hour for o in demand] == [min(float(r["Price"]) for r in here)]
        spots = [r for r in here if r["SpotPrice"]]
        spot = [o for o in offers if o.region.startswith(region + "/") and o.tier == "spot"]
        if not spots:
            assert spot == []  # ap-northeast-2 lists no spot price: no spot offer is made up
            continue
        cheapest = min(spots, key=lambda r: float(r["SpotPrice"]))
        assert [(o.usd_per_hour, o.region) for o in spot] == [
            (float(cheapest["SpotPrice"]), f"{region}/{cheapest['AvailabilityZone']}")]


def test_gcp_a3_highgpu_in_australia_is_vm_plus_gpus_with_distinct_ids() -> None:
    zone = "australia-southeast1-c"
    vm = next(r for r in _csv("gcp") if r["InstanceType"] == "a3-highgpu-8g" and r["AvailabilityZone"] == zone)
    gpus = next(r for r in _csv("gcp") if not r["InstanceType"] and r["AcceleratorName"] == "H100"
                and r["AcceleratorCount"] == "8" and r["AvailabilityZone"] == zone)
    offers = {o.tier: o for o in _offers("gcp") if o.instance == "a3-highgpu-8g" and o.region.endswith(zone)}
    assert offers["on-demand"].usd_per_hour == pytest.approx(float(vm["Price"]) + float(gpus["Price"]))
    assert offers["spot"].usd_per_hour == pytest.approx(float(vm["SpotPrice"]) + float(gpus["SpotPrice"]))
    assert offers["on-demand"].id != offers["spot"].id  # their keys share the first 60 characters
    assert all(re.fullmatch(ID_PATTERN, o.id) for o in offers.values())


def test_runpods_h100_is_the_pcie_card_its_gpu_info_names() -> None:
    rows = [r for r in _csv("runpod") if r["InstanceType"] == "8x_H100_SECURE"]
    assert {"'Name': 'H100 PCIe'" in r["GpuInfo"] for r in rows} == {True}
    offers = [o for o in _offers("runpod") if o.instance == "8x_H100_SECURE" and o.tier == "on-demand"]
    assert len(offers) == len({r["Region"] for r in rows})  # a region's zones folded into one offer
    catalog = load_catalog()
    assert {(catalog.gpus[o.gpu].form_factor, o.usd_per_hour) for o in offers} == {
        ("pcie", float(p)) for p in {r["Price"] for r in rows}}


def test_a_card_whose_stated_memory_is_not_the_catalogs_is_not_placed() -> None:
    def per_gpu_gib(row: dict[str, str]) -> float:
        return int(re.search(r"'SizeInMiB': (\d+)", row["GpuInfo"]).group(1)) / 1024  # type: ignore[union-attr]

    modded = [r for r in _csv("vast") if r["AcceleratorName"] == "RTX4090"
              and per_gpu_gib(r) / float(r["AcceleratorCount"]) > 30]
    found = read_offers(SKYPILOT_V8 / "vast" / "vms.csv", load_catalog())
    assert len(modded) == 1 and found.unmapped["vast: RTX4090"] == 1  # a 48 GB board, not the 24 GB RTX 4090
    turing = [r for r in _csv("seeweb") if r["AcceleratorName"] == "RTX6000"]
    seeweb = read_offers(SKYPILOT_V8 / "seeweb" / "vms.csv", load_catalog())
    assert per_gpu_gib(turing[0]) == 24 and seeweb.unmapped["seeweb: RTX6000"] == 1  # not the 48 GB RTX 6000 Ada


def test_gpuhunt_rows_are_offers_dated_by_the_catalog_version_folder() -> None:
    found = read_offers(GPUHUNT, load_catalog())
    with GPUHUNT.open(newline="", encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["gpu_name"]]
    assert sorted((o.usd_per_hour, o.tier) for o in found.offers) == sorted(
        (float(r["price"]), "spot" if r["spot"] == "True" else "on-demand") for r in rows)
    assert {o.as_of for o in found.offers} == {dt.date(2026, 8, 19)} and not found.notes  # v3/runpod/20260819-1042/
    assert {o.provider for o in found.offers} == {"runpod"}
    assert found.skipped == {"no GPU on the row (a CPU machine)": 1}


def test_sync_creates_the_user_catalog_folder_every_command_reads(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUWISE_CONFIG_DIR", str(tmp_path / "new" / "config"))
    result = runner.invoke(app, ["catalog", "sync", "--from", str(SKYPILOT_V8 / "hyperbolic" / "vms.csv")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "new" / "config" / "catalog" / "synced-offers.yaml").is_file()
    assert f"dated by this sync ({dt.date.today()})" in " ".join(result.output.split())
    shown = json.loads(runner.invoke(app, ["catalog", "show", "h100-sxm-80gb", "--json"]).output)
    assert {o["instance"] for o in shown["offers"] if o["provider"] == "hyperbolic"} == {
        r["InstanceType"] for r in _csv("hyperbolic")}


@pytest.mark.parametrize(("as_of", "message"), [("2026-13-01", "not a date"), ("2999-01-01", "after today")])
def test_a_wrong_as_of_is_one_line_and_writes_nothing(tmp_path: Path, as_of: str, message: str) -> None:
    target = tmp_path / "out.yaml"
    result = runner.invoke(app, ["catalog", "sync", "--from", str(SKYPILOT_V8 / "mithril"), "--to", str(target),
                                 "--as-of", as_of, "--json"])
    assert result.exit_code == 2 and not target.exists()
    assert message in json.loads(result.output.splitlines()[0])["error"]


def test_a_date_column_dates_its_own_rows(tmp_path: Path) -> None:
    (tmp_path / "dated.csv").write_text(
        "instance_name,location,price,gpu_count,gpu_name,gpu_memory,spot,as_of\n"
        "a,EU,1.5,1,H100,80.0,False,2026-10-01\nb,EU,1.6,1,H100,80.0,False,\n")
    found = read_offers(tmp_path / "dated.csv", load_catalog(), as_of=dt.date(2026, 11, 1))
    assert sorted((o.instance, o.as_of) for o in found.offers) == [("a", dt.date(2026, 10, 1)),
                                                                   ("b", dt.date(2026, 11, 1))]


def _skypilot(root: Path) -> Path:
    (root / "lambda").mkdir(parents=True)
    (root / "lambda" / "vms.csv").write_text(
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\n"
        "cpu_4x_general,,,4.0,16.0,0.2,us-east-1,,\n"
        f"gpu_1x_a6000,A6000,1.0,14.0,100.0,1.09,us-east-1,{A6000_INFO},\n"
        f"gpu_8x_h100_sxm5,H100,8.0,208.0,1800.0,31.92,us-east-1,{H100_INFO},\n")
    (root / "gcp").mkdir()
    (root / "gcp" / "vms.csv").write_text(  # GCP's order; its GPUs priced on rows of their own, here before the VM
        "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,Price,"
        "SpotPrice\n"
        ",,,A100,1.0,,us-central1,us-central1-a,2.933908,1.1736\n"
        "a2-highgpu-1g,12.0,85.0,,,,us-central1,us-central1-a,0.73948,0.36975\n"
        ",,,T4,1.0,,us-central1,us-central1-a,0.35,0.14\n"
        "trn-like,8.0,32.0,Trainium,16.0,,us-central1,us-central1-a,21.5,\n")
    (root / "common").mkdir()
    (root / "common" / "accelerators.csv").write_text("name,kind\nA100,gpu\n")  # another of SkyPilot's CSVs
    return root


def test_gcp_gpu_rows_join_their_machine_in_either_order(tmp_path: Path) -> None:
    found = read_offers(_skypilot(tmp_path / "sky"), load_catalog())
    by_id = {(o.provider, o.instance, o.tier): o for o in found.offers}
    assert by_id[("lambda", "gpu_1x_a6000", "on-demand")].gpu == "rtx-a6000"
    # the a2-highgpu-1g machine's own price plus its A100's, in the same zone; a bare "A100" is the 40 GB part
    a2 = by_id[("gcp", "a2-highgpu-1g", "on-demand")]
    assert a2.gpu == "a100-sxm-40gb" and a2.usd_per_hour == pytest.approx(0.73948 + 2.933908)
    assert by_id[("gcp", "a2-highgpu-1g", "spot")].usd_per_hour == pytest.approx(0.36975 + 1.1736)
    assert found.unmapped["gcp: T4 (priced without its VM)"] == 1 and found.unmapped["gcp: Trainium"] == 1


def test_synced_offers_are_read_by_every_command_and_spot_only_with_spot(tmp_path: Path) -> None:
    target, hunted = tmp_path / "synced.yaml", tmp_path / "hunted.csv"  # a provider of its own: none shipped
    hunted.write_bytes(GPUHUNT.read_bytes())
    done = api.sync_offers(hunted, target=target)
    assert done.offers == 6 and done.spot == 1 and target.is_file()
    rec = {"workloads": [{"model": "llama-3.1-8b", "task": "infer", "qps": 1}], "acquisitions": ["rent"],
           "gpus": ["rtx-4090"], "providers": ["hunted"]}
    plain = api.recommend(rec, catalog_files=(target,))
    spot = api.recommend({**rec, "spot": True}, catalog_files=(target,))
    assert not any(":spot:" in o.acquisition for o in plain.options)
    cheapest = min(spot.options, key=lambda o: o.usd_per_hour)
    assert ":spot:" in cheapest.acquisition and cheapest.usd_per_hour == pytest.approx(0.34 * 1.15)


def test_a_file_of_another_shape_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "vms.csv"
    bad.write_text("a,b,c\n1,2,3\n")
    target = tmp_path / "out.yaml"
    result = runner.invoke(app, ["catalog", "sync", "--from", str(bad), "--to", str(target), "--json"])
    assert result.exit_code == 2 and not target.exists()
    assert "SkyPilot" in json.loads(result.output.splitlines()[0])["error"]
    ok = runner.invoke(app, ["catalog", "sync", "--from", str(_skypilot(tmp_path / "sky")), "--to", str(target)])
    assert ok.exit_code == 0 and "not in the catalog" in ok.output and target.is_file()
