"""`gpuwise doctor` on recorded snapshots (tests/fixtures/snapshots), and the NVML door behind a fake."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuwise.catalog import Catalog
from gpuwise.cli.main import app
from gpuwise.errors import ProbeUnavailable
from gpuwise.probe.backend import read_machine, read_snapshot
from gpuwise.probe.checks import match_catalog, run_checks

SNAPSHOTS = Path(__file__).parent / "fixtures" / "snapshots"
runner = CliRunner()


def statuses(name: str, shipped: Catalog) -> dict[str, str]:
    report = run_checks(read_snapshot(SNAPSHOTS / f"{name}.json"), shipped)
    return {c.id: c.status for c in report.checks if c.gpu in (0, None)}  # GPU 0 and machine-wide checks


def test_a_healthy_h100_passes_everything_it_reports(shipped: Catalog) -> None:
    got = statuses("healthy-h100-sxm", shipped)
    assert set(got.values()) <= {"PASS", "N/A"}
    assert got["retired_pages"] == "N/A"  # Hopper remaps rows; page retirement is a pre-Ampere query
    report = run_checks(read_snapshot(SNAPSHOTS / "healthy-h100-sxm.json"), shipped)
    assert report.exit_code == 0 and report.inventory[0].catalog_id == "h100-sxm-80gb"


def test_a_4090_in_a_chipset_x4_slot_fails_the_link_check(shipped: Catalog) -> None:
    # NVML's max width is already the slot's (4 = current = max), so only the catalog's native x16 reveals it
    report = run_checks(read_snapshot(SNAPSHOTS / "rtx4090-in-x4-chipset-slot.json"), shipped)
    link = next(c for c in report.checks if c.id == "pcie_link")
    assert link.status == "FAIL" and "x4" in link.measured and "x16" in link.expected
    assert "x16 slot" in link.fix


def test_power_cap_thermal_throttling_and_memory_faults(shipped: Catalog) -> None:
    assert statuses("power-capped-a100", shipped)["power_limit"] == "FAIL"  # 250 of 400 W
    hot = statuses("thermal-throttling-rtx3090", shipped)
    assert hot["throttle_reasons"] == "FAIL" and hot["temperature"] == "FAIL"
    assert hot["pcie_replays"] == "WARN" and hot["processes"] == "WARN"
    sick = statuses("pending-remapped-rows-a100", shipped)
    assert sick["remapped_rows"] == "FAIL" and sick["ecc"] == "FAIL"


def test_not_supported_is_never_a_pass(shipped: Catalog) -> None:
    got = statuses("consumer-card-notsupported", shipped)
    for check in ("throttle_reasons", "ecc", "remapped_rows", "pcie_replays", "processes"):
        assert got[check] == "N/A"
    assert got["torch"] == "FAIL"  # a CPU-only torch build


def test_torch_built_for_a_newer_cuda_than_the_driver(shipped: Catalog) -> None:
    # 12.8 on a 12.2 driver is minor version compatibility: a WARN; this machine's torch still sees no GPU (FAIL)
    got = statuses("torch-newer-than-driver", shipped)
    assert got["torch_cuda"] == "WARN" and got["cuda_available"] == "FAIL"
    snapshot = read_snapshot(SNAPSHOTS / "torch-newer-than-driver.json")
    for torch_cuda, expected in (("13.0", "FAIL"), ("12.2", "PASS"), ("11.8", "PASS")):
        changed = snapshot.model_copy(update={"software": snapshot.software.model_copy(
            update={"torch_cuda": torch_cuda})})
        check = next(c for c in run_checks(changed, shipped).checks if c.id == "torch_cuda")
        assert check.status == expected, torch_cuda


@pytest.mark.parametrize("snapshot", sorted(SNAPSHOTS.glob("*.json")), ids=lambda p: p.stem)
def test_cli_json_and_exit_codes(snapshot: Path) -> None:
    result = runner.invoke(app, ["doctor", "--from", str(snapshot), "--json"])
    doc = json.loads(result.stdout)
    assert doc["schema"] == "gpuwise.doctor/1"
    bad = doc["summary"]["WARN"] + doc["summary"]["FAIL"]
    assert result.exit_code == (1 if bad else 0)
    assert all({"id", "gpu", "status", "measured", "expected", "fix"} <= set(c) for c in doc["checks"])


def test_save_and_replay_a_snapshot(tmp_path: Path) -> None:
    saved = tmp_path / "copy.json"
    source = SNAPSHOTS / "power-capped-a100.json"
    result = runner.invoke(app, ["doctor", "--from", str(source), "--save-snapshot", str(saved), "--json"])
    assert result.exit_code == 1
    assert read_snapshot(saved) == read_snapshot(source)


def test_a_malformed_snapshot_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"gpus": [{"index": "zero"}]}')
    result = runner.invoke(app, ["doctor", "--from", str(bad)])
    assert result.exit_code == 2 and "field 'gpus.0" in result.stderr


def test_catalog_matching_of_nvml_names(shipped: Catalog) -> None:
    assert match_catalog("NVIDIA GeForce RTX 4090", 24564, shipped)[0].id == "rtx-4090"  # type: ignore[union-attr]
    assert match_catalog("NVIDIA A100-SXM4-80GB", 81920, shipped)[0].id == "a100-sxm-80gb"  # type: ignore[union-attr]
    h200, note = match_catalog("NVIDIA H200", 143771, shipped)
    assert h200 is not None and h200.id == "h200-sxm-141gb" and "matched" in note
    unknown, note = match_catalog("NVIDIA GeForce GTX 1080 Ti", 11264, shipped)
    assert unknown is None and note.startswith("not in catalog")


# ---- the NVML door, behind a fake pynvml ------------------------------------------------------------------
class _NVMLError(Exception):
    """What pynvml raises for an unsupported or failed query."""


def _fake_pynvml(*, init_error: bool = False, count: int = 1) -> types.ModuleType:
    fake: Any = types.ModuleType("pynvml")
    fake.NVMLError = _NVMLError

    def init() -> None:
        if init_error:
            raise _NVMLError("NVML Shared Library Not Found")

    def unsupported(*_: object) -> None:
        raise _NVMLError("Not Supported")

    fake.nvmlInit = init
    fake.nvmlShutdown = lambda: None
    fake.nvmlDeviceGetCount = lambda: count
    fake.nvmlDeviceGetHandleByIndex = lambda i: i
    fake.nvmlDeviceGetName = lambda h: b"NVIDIA GeForce RTX 4090"
    fake.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(total=24564 * 2**20, used=2**30)
    fake.nvmlDeviceGetMaxPcieLinkWidth = lambda h: 4
    fake.nvmlDeviceGetCurrPcieLinkWidth = lambda h: 4
    fake.nvmlDeviceGetMaxPcieLinkGeneration = lambda h: 4
    fake.nvmlDeviceGetCurrPcieLinkGeneration = lambda h: 4
    fake.nvmlDeviceGetEnforcedPowerLimit = lambda h: 450000
    fake.nvmlDeviceGetPowerManagementDefaultLimit = lambda h: 450000
    fake.nvmlDeviceGetCurrentClocksEventReasons = lambda h: 0x4 | 0x1
    fake.nvmlDeviceGetEccMode = unsupported
    fake.nvmlSystemGetCudaDriverVersion = lambda: 12040
    fake.nvmlSystemGetDriverVersion = lambda: "550.90.07"
    for name in ("NVML_CLOCK_SM", "NVML_TEMPERATURE_GPU", "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN",
                 "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN", "NVML_MEMORY_ERROR_TYPE_UNCORRECTED",
                 "NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_VOLATILE_ECC", "NVML_AGGREGATE_ECC"):
        setattr(fake, name, 0)
    return fake


def test_nvml_readings_through_the_fake(monkeypatch: pytest.MonkeyPatch, shipped: Catalog) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml())
    snapshot = read_machine(load_seconds=0)
    g = snapshot.gpus[0]
    assert g.name == "NVIDIA GeForce RTX 4090" and g.power_limit_w == 450
    assert g.clock_event_reasons == ("gpu_idle", "sw_power_cap")
    assert g.ecc_enabled is None  # NotSupported stays unknown
    assert snapshot.cuda_driver_version == "12.4"
    link = next(c for c in run_checks(snapshot, shipped).checks if c.id == "pcie_link")
    assert link.status == "FAIL"


@pytest.mark.parametrize(("fake", "needle"), [
    ({"init_error": True}, "no NVIDIA driver"),
    ({"count": 0}, "sees no GPU"),
])
def test_no_driver_and_no_gpu_exit_3(monkeypatch: pytest.MonkeyPatch, fake: dict[str, Any], needle: str) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(**fake))
    with pytest.raises(ProbeUnavailable, match=needle):
        read_machine(load_seconds=0)
    result = runner.invoke(app, ["doctor", "--load-seconds", "0"])
    assert result.exit_code == 3 and needle in result.stderr and "Traceback" not in result.stderr


def test_doctor_without_nvidia_ml_py_exits_3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    result = runner.invoke(app, ["doctor"])
    assert result.exit_code == 3 and "pip install 'gpuwise[probe]'" in result.stderr


def test_topology_and_precision_support(shipped: Catalog) -> None:
    h100 = run_checks(read_snapshot(SNAPSHOTS / "healthy-h100-sxm.json"), shipped)
    topo = [c for c in h100.checks if c.id == "topology"]
    assert topo and topo[0].status == "PASS" and "nvlink" in topo[0].measured
    precisions = next(c for c in h100.checks if c.id == "precisions" and c.gpu == 0)
    assert "sm_90" in precisions.measured and "FP8" in precisions.measured
    rig = run_checks(read_snapshot(SNAPSHOTS / "thermal-throttling-rtx3090.json"), shipped)
    # GeForce without P2P (bridge not fitted): expected by design, explained, not a failure
    topo = next(c for c in rig.checks if c.id == "topology")
    assert topo.status == "PASS" and "P2P no" in topo.measured and "via host" in topo.expected
    ampere = next(c for c in rig.checks if c.id == "precisions")
    assert "FP8" not in ampere.measured and "Ada" in ampere.fix


def test_amd_gpus_are_read_through_amdsmi(monkeypatch: pytest.MonkeyPatch, shipped: Catalog) -> None:
    amd: Any = types.ModuleType("amdsmi")
    amd.amdsmi_init = lambda *a: 0
    amd.amdsmi_shut_down = lambda: 0
    amd.amdsmi_get_processor_handles = lambda: ["h0"]
    amd.amdsmi_get_gpu_asic_info = lambda h: {"market_name": "AMD Instinct MI300X"}
    amd.amdsmi_get_pcie_info = lambda h: {"pcie_static": {"max_pcie_width": 16, "max_pcie_speed": 32000},
                                          "pcie_metric": {"pcie_width": 16, "pcie_speed": 32000,
                                                          "pcie_replay_count": 0}}
    amd.amdsmi_get_power_cap_info = lambda h: {"power_cap": 750_000_000, "default_power_cap": 750_000_000}

    def unsupported(*_: object) -> None:
        raise RuntimeError("AMDSMI_STATUS_NOT_SUPPORTED")

    amd.amdsmi_get_temp_metric = unsupported
    amd.amdsmi_get_gpu_total_ecc_count = lambda h: {"correctable_count": 0, "uncorrectable_count": 0}
    monkeypatch.setitem(sys.modules, "amdsmi", amd)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # no NVIDIA stack on this machine
    snapshot = read_machine(load_seconds=0)
    g = snapshot.gpus[0]
    assert g.name == "AMD Instinct MI300X" and g.pcie_gen_max == 5 and g.power_limit_w == 750
    assert g.temperature_c is None  # unsupported stays unknown
    report = run_checks(snapshot, shipped)
    assert report.inventory[0].catalog_id == "mi300x"
    assert next(c for c in report.checks if c.id == "pcie_link").status == "PASS"
    assert next(c for c in report.checks if c.id == "temperature").status == "N/A"


@pytest.mark.parametrize(("args", "needle"), [
    (["doctor", "--from", "{fixtures}/healthy-h100-sxm.json", "--save-snapshot", "{tmp}/missing/s.json"],
     "does not exist"),
    (["recommend", "llama-3.1-8b", "--report", "{tmp}"], "is a folder"),
    (["bench", "--save", "{tmp}/missing/cal.json"], "does not exist"),
    (["burn-in", "--timeline", "{tmp}/missing/t.csv"], "does not exist"),
])
def test_an_output_file_in_a_missing_folder_is_refused_before_any_work(tmp_path: Path, args: list[str],
                                                                      needle: str) -> None:
    fixtures = Path(__file__).parent / "fixtures" / "snapshots"
    result = runner.invoke(app, [a.format(fixtures=fixtures, tmp=tmp_path) for a in args])
    flat = " ".join(result.stderr.replace("│", " ").split())  # the error box wraps long paths
    assert result.exit_code == 2 and needle in flat, flat
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize("document", [[1, 2], {"checks": [1, "x"]}, {"checks": "PASS"}])
def test_diagnose_with_a_doctor_report_of_the_wrong_shape_is_one_line(tmp_path: Path, document: object) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps(document))
    result = runner.invoke(app, ["diagnose", "--text", "CUDA out of memory", "--doctor", str(report)])
    assert result.exit_code == 2 and "not a `gpuwise doctor --json` document" in result.stderr
    assert "Traceback" not in result.output
