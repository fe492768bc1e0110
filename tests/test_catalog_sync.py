"""`gpuwise catalog sync` on files in SkyPilot's and gpuhunt's published formats (their headers as the catalogs ship
them: skypilot-org/skypilot-catalog catalogs/v8/<cloud>/vms.csv, dstackai/gpuhunt's v2 CSV), and what recommend
and tco do with the offers it writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.catalog import load_catalog
from gpuwise.catalog.sync import read_offers
from gpuwise.cli.main import app

runner = CliRunner()
H100_INFO = ("\"{'Gpus': [{'Name': 'H100', 'Manufacturer': 'NVIDIA', 'Count': 8.0, "
             "'MemoryInfo': {'SizeInMiB': 81920}}]}\"")
A6000_INFO = ("\"{'Gpus': [{'Name': 'A6000', 'Manufacturer': 'NVIDIA', 'Count': 1.0, "
              "'MemoryInfo': {'SizeInMiB': 49152}}]}\"")


def _skypilot(root: Path) -> Path:
    (root / "lambda").mkdir(parents=True)
    (root / "lambda" / "vms.csv").write_text(
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\n"
        "cpu_4x_general,,,4.0,16.0,0.2,us-east-1,,\n"
        f"gpu_1x_a6000,A6000,1.0,14.0,100.0,1.09,us-east-1,{A6000_INFO},\n"
        f"gpu_8x_h100_sxm5,H100,8.0,208.0,1800.0,31.92,us-east-1,{H100_INFO},\n")
    (root / "gcp").mkdir()
    (root / "gcp" / "vms.csv").write_text(  # GCP's order; its GPUs priced on rows of their own
        "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,Price,"
        "SpotPrice\n"
        "a2-highgpu-1g,12.0,85.0,,,,us-central1,us-central1-a,0.73948,0.36975\n"
        ",,,A100,1.0,,us-central1,us-central1-a,2.933908,1.1736\n"
        ",,,T4,1.0,,us-central1,us-central1-a,0.35,0.14\n"
        "trn-like,8.0,32.0,Trainium,16.0,,us-central1,us-central1-a,21.5,\n")
    (root / "common").mkdir()
    (root / "common" / "accelerators.csv").write_text("name,kind\nA100,gpu\n")  # another of SkyPilot's CSVs
    return root


def _gpuhunt(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "hunted.csv").write_text(
        "instance_name,location,price,cpu,memory,gpu_count,gpu_name,gpu_memory,spot,disk_size,gpu_vendor,flags\n"
        "NVIDIA RTX 4090,EU-RO-1,0.69,8,62,1,RTX4090,24.0,False,,nvidia,\n"
        "NVIDIA RTX 4090,EU-RO-1,0.34,8,62,1,RTX4090,24.0,True,,nvidia,\n"
        "NVIDIA MI300X,US-TX-3,2.49,24,283,1,MI300X,192.0,False,,amd,\n"
        "Mystery,US,1.0,8,32,1,ZZ9000,12.0,False,,nvidia,\n")
    return root


def test_skypilot_rows_become_offers_matched_by_name_and_memory(tmp_path: Path) -> None:
    found = read_offers(_skypilot(tmp_path / "sky"), load_catalog())
    by_id = {(o.provider, o.instance, o.tier): o for o in found.offers}
    assert by_id[("lambda", "gpu_1x_a6000", "on-demand")].gpu == "rtx-a6000"
    h100 = by_id[("lambda", "gpu_8x_h100_sxm5", "on-demand")]
    assert (h100.gpu, h100.gpus, h100.usd_per_hour) == ("h100-sxm-80gb", 8, 31.92)
    # GCP: the a2-highgpu-1g machine's own price plus its A100's, in the same zone; a bare "A100" is the 40 GB part
    a2 = by_id[("gcp", "a2-highgpu-1g", "on-demand")]
    assert a2.gpu == "a100-sxm-40gb" and a2.usd_per_hour == pytest.approx(0.73948 + 2.933908)
    assert by_id[("gcp", "a2-highgpu-1g", "spot")].usd_per_hour == pytest.approx(0.36975 + 1.1736)
    assert found.unmapped["gcp: T4 (priced without its VM)"] == 1 and found.unmapped["gcp: Trainium"] == 1
    assert all(o.source.endswith("vms.csv") and o.as_of for o in found.offers)


def test_gpuhunt_rows_keep_their_spot_offers_apart(tmp_path: Path) -> None:
    found = read_offers(_gpuhunt(tmp_path / "hunt"), load_catalog())
    tiers = sorted((o.gpu, o.tier, o.usd_per_hour) for o in found.offers)
    assert tiers == [("mi300x", "on-demand", 2.49), ("rtx-4090", "on-demand", 0.69), ("rtx-4090", "spot", 0.34)]
    assert found.unmapped == {"hunted: ZZ9000": 1}


def test_synced_offers_are_read_by_every_command_and_spot_only_with_spot(tmp_path: Path) -> None:
    target = tmp_path / "synced.yaml"
    done = api.sync_offers(_gpuhunt(tmp_path / "hunt"), target=target)
    assert done.offers == 3 and done.spot == 1 and target.is_file()
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
