"""Benchmark arithmetic by hand, the CPU path of the runner, calibration records; real-GPU tests are marked."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.catalog import Catalog
from gpuwise.cli.main import app
from gpuwise.errors import ConfigError
from gpuwise.estimate.speed.training import TrainPerf
from gpuwise.probe import bench

HAS_TORCH = importlib.util.find_spec("torch") is not None
runner = CliRunner()


def test_gemm_and_bandwidth_arithmetic() -> None:
    # an 8192^3 matmul is 2 x 8192^3 = 1.0995e12 FLOP; in 1.1 ms that is 999.5 TFLOP/s
    assert bench.gemm_tflops(8192, 8192, 8192, 1.1e-3) == pytest.approx(2 * 8192**3 / 1.1e-3 / 1e12)
    assert bench.copy_gb_s(1e9, 1e-3) == pytest.approx(2000.0)  # read + write
    assert bench.triad_gb_s(1e9, 1e-3) == pytest.approx(3000.0)  # two reads + one write
    assert bench.transfer_gb_s(256 * 2**20, 0.01) == pytest.approx(26.8435456)


def test_verdict_thresholds() -> None:
    assert bench.verdict(700, 989, pass_at=0.6, fail_below=0.45) == "PASS"
    assert bench.verdict(500, 989, pass_at=0.6, fail_below=0.45) == "WARN"
    assert bench.verdict(400, 989, pass_at=0.6, fail_below=0.45) == "FAIL"
    assert bench.verdict(400, None, pass_at=0.6, fail_below=0.45) == "N/A"


def test_dtypes_follow_the_compute_capability() -> None:
    assert bench.supported_dtypes("7.0", "cuda:0") == ["fp32", "fp16"]  # V100: no bf16, no tf32
    assert bench.supported_dtypes("8.0", "cuda:0") == ["fp32", "tf32", "fp16", "bf16"]
    assert bench.supported_dtypes("9.0", "cuda:0")[-1] == "fp8"


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
def test_runner_on_the_cpu_gives_na_verdicts_without_a_card() -> None:
    results = bench.run(None, device="cpu", quick=True, link_gb_s=None)
    assert {r.metric for r in results} >= {"gemm_fp32", "memory_copy", "memory_triad"}
    assert all(r.value > 0 and r.verdict == "N/A" for r in results)


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
def test_bench_without_a_cuda_device_exits_3() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    result = runner.invoke(app, ["bench"])
    assert result.exit_code == 3 and "sees no CUDA device" in result.stderr


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed")
def test_bench_names_the_h200_variant_by_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # NVML and torch call both H200 variants "NVIDIA H200"; the real card on our device run (2026-11-29, driver
    # 580.159.04) reported 143,771 MiB, which is the SXM part's 141 GB (the NVL has the same memory, so SXM is
    # taken unless the name says NVL, as doctor does). Before this was fixed, bench left the card unmatched.
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda device=None: type("P", (), {"total_memory": 143_771 * 2**20})())
    seen: list[str | None] = []

    def fake_run(card, device, quick, link_gb_s):  # type: ignore[no-untyped-def]
        seen.append(card.id if card else None)
        return [bench.Result("gemm_bf16", 745.6, "TFLOPS", None, "N/A", "fake")]

    monkeypatch.setattr(bench, "run", fake_run)
    saved = tmp_path / "cal.json"
    result = runner.invoke(app, ["bench", "--json", "--save", str(saved)])
    assert result.exit_code == 0, result.output
    assert seen == ["h200-sxm-141gb"]
    assert json.loads(result.stdout)["catalog_id"] == "h200-sxm-141gb"
    assert json.loads(saved.read_text())["gpu"] == "h200-sxm-141gb"


def test_a_calibration_record_slows_the_estimate_it_describes(tmp_path: Path, shipped: Catalog) -> None:
    record = tmp_path / "h100.json"
    # a card that reached half of the table's matmul rate (0.5 x 80% x 989.5) and 2 TB/s
    bench.CalibrationRecord(gpu="h100-sxm-80gb", name="NVIDIA H100 80GB HBM3", driver="550", torch="2.5",
                            date="2026-11-29", gemm_tflops={"bf16": 0.5 * 0.803 * 989.5},
                            memory_gb_s=2000).save(record)
    base = api.estimate("llama-3.1-8b", gpu="h100-sxm-80gb", batch=4, seq=4096, ckpt="full")
    slow = api.estimate("llama-3.1-8b", gpu="h100-sxm-80gb", batch=4, seq=4096, ckpt="full", calibration=record)
    assert isinstance(base.perf, TrainPerf) and isinstance(slow.perf, TrainPerf)
    assert 1.5 < slow.perf.step_time_s / base.perf.step_time_s < 2.1  # compute-bound: about twice as long
    with pytest.raises(ConfigError, match="measured on h100-sxm-80gb, not rtx-4090"):
        api.estimate("llama-3.1-8b", gpu="rtx-4090", calibration=record)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"gpu": "x"}))
    with pytest.raises(ConfigError, match="not a gpuwise calibration record"):
        bench.load_calibration(bad)


# ---- on a real GPU (scripts/gpu-check) ----------------------------------------------------------------------
@pytest.mark.gpu
def test_real_gemm_reaches_a_sane_fraction_of_the_datasheet(shipped: Catalog) -> None:
    import torch

    from gpuwise.probe.checks import match_catalog

    card, _ = match_catalog(torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0).total_memory / 2**20,
                            shipped)
    results = {r.metric: r for r in bench.run(card, device="cuda:0", quick=True, link_gb_s=None)}
    assert results["gemm_fp16"].value > 10
    if card is not None:
        assert results["gemm_fp16"].verdict in ("PASS", "WARN")
        assert results["memory_copy"].verdict in ("PASS", "WARN")


@pytest.mark.gpu
def test_real_doctor_reads_nvml() -> None:
    pytest.importorskip("pynvml")
    from gpuwise.probe.backend import read_machine

    snapshot = read_machine(load_seconds=1.0)
    assert snapshot.gpus and snapshot.driver_version
    assert snapshot.gpus[0].pcie_width_max is not None
