"""From one card to a fleet: the Prometheus exporter, the fleet report and the collective benchmark."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from conftest import load_benchmark
from gpuwise.cli.main import app
from gpuwise.probe.collective import bus_bandwidth
from gpuwise.report.prometheus import DCGM_EQUIVALENT

ROOT = Path(__file__).parents[1]
H200 = ROOT / "benchmarks" / "results" / "h200-2026-11-29"
SNAPSHOT = ROOT / "tests" / "fixtures" / "snapshots" / "healthy-h100-sxm.json"
runner = CliRunner()


def _started_exporter(*args: str) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen([sys.executable, "-m", "gpuwise.cli.main", "exporter", "--port", "0", *args],
                               stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert process.stderr is not None
    line = process.stderr.readline()  # "serving http://127.0.0.1:PORT/metrics (Ctrl-C stops)"
    found = re.search(r":(\d+)/metrics", line)
    assert found, line
    return process, int(found.group(1))


def _get(port: int, host: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""


def test_the_exporter_serves_a_recorded_snapshot_to_prometheus() -> None:
    """Started for real on a recorded H100 snapshot and scraped over HTTP; prometheus_client's own parser reads
    the page: every doctor check as gpuwise_check_status, and at least eight per-GPU gauges with samples."""
    process, port = _started_exporter("--from", str(SNAPSHOT), "--bench", str(H200 / "bench.json"))
    try:
        status, text = _get(port)
        assert status == 200
        families = {f.name: f for f in text_string_to_metric_families(text)}
        checks = families["gpuwise_check_status"].samples
        assert {s.labels["check"] for s in checks} >= {"pcie_link", "ecc", "remapped_rows", "power_limit"}
        assert all(s.value in (0, 1, 2, 3) for s in checks)
        gpu_metrics = [f for name, f in families.items() if name.startswith("gpuwise_") and f.samples
                       and "uuid" in f.samples[0].labels and name not in ("gpuwise_check_status", "gpuwise_gpu_info")]
        assert len(gpu_metrics) >= 8, sorted(families)
        temperature = families["gpuwise_gpu_temperature_celsius"].samples[0]
        assert temperature.labels["catalog_id"] == "h100-sxm-80gb" and temperature.labels["hostname"] == "dgx-h100"
        assert "gemm_fp16" in {s.labels["metric"] for s in families["gpuwise_bench_ratio"].samples}
        assert _get(port, host="attacker.example:80")[0] == 421  # bound to loopback: loopback names only
    finally:
        process.terminate()
        process.wait(timeout=10)
        assert process.stderr is not None
        process.stderr.close()


def test_exporter_names_mean_what_dcgm_exporter_means() -> None:
    """dcgm-exporter's default counters (etc/default-counters.csv) for the same readings; units in our names."""
    assert DCGM_EQUIVALENT["gpuwise_gpu_temperature_celsius"] == "DCGM_FI_DEV_GPU_TEMP"
    assert DCGM_EQUIVALENT["gpuwise_power_usage_watts"] == "DCGM_FI_DEV_POWER_USAGE"
    assert DCGM_EQUIVALENT["gpuwise_pcie_replay_total"] == "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"
    assert DCGM_EQUIVALENT["gpuwise_remapped_rows_uncorrectable"] == "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"


def test_exporter_once_prints_the_text_format_and_bad_input_is_one_line() -> None:
    done = runner.invoke(app, ["exporter", "--from", str(SNAPSHOT), "--once"])
    assert done.exit_code == 0 and "# TYPE gpuwise_check_status gauge" in done.stdout
    missing = runner.invoke(app, ["exporter", "--from", "/nonexistent/snapshot.json", "--once"])
    assert missing.exit_code == 2 and len(missing.output.strip().splitlines()) == 1
    hostile = Path(__file__).parent / "fixtures" / "hostile-bench.json"
    odd = runner.invoke(app, ["exporter", "--from", str(SNAPSHOT), "--bench", str(hostile), "--once"])
    assert odd.exit_code == 0 and "gpuwise_bench_ratio" not in odd.stdout  # nothing usable in it, no traceback
    recorded = runner.invoke(app, ["exporter", "--from", str(H200 / "doctor.json"), "--once"])  # no readings in it
    assert recorded.exit_code == 0
    status = {s.labels["check"]: s.value for f in text_string_to_metric_families(recorded.stdout)
              if f.name == "gpuwise_check_status" for s in f.samples}
    assert status["pcie_replays"] == 1 and status["ecc"] == 0  # the recorded H200 run: one replay, WARN


def _fleet(tmp: Path, slow: int | None) -> Path:
    """Four nodes built from the recorded H200 run (doctor, bench, burn-in), node ``slow``'s GEMM 25 % lower:
    benchmarks/fleet_example.py, the README's example."""
    load_benchmark("fleet_example").build(tmp, slow=-1 if slow is None else slow)
    return tmp


def test_the_fleet_report_names_exactly_the_slow_node(tmp_path: Path) -> None:
    """GEMM 25 % under the fleet's median is a FAIL against the fleet (and under the datasheet's 60 % pass line);
    the PCIe replay WARN every node shares is reported once, for the fleet, not as an outlier of each node."""
    html = tmp_path / "report.html"
    done = runner.invoke(app, ["fleet", "report", str(_fleet(tmp_path / "fleet", slow=2)), "--json", "--html",
                               str(html)])
    assert done.exit_code == 1, done.output
    report = json.loads(done.stdout)
    flagged = [n["name"] for n in report["nodes"] if n["verdict"] != "PASS" or n["outliers"]]
    assert flagged == ["node02"]
    fleet_outliers = [o for o in report["nodes"][2]["outliers"] if o["against"] == "fleet"]
    assert {o["metric"] for o in fleet_outliers} == {"gemm_fp16", "gemm_fp32"}
    assert all(o["severity"] == "FAIL" and o["reference"] == pytest.approx(o["value"] / 0.75) for o in fleet_outliers)
    assert any("pcie_replays" in f for f in report["fleet_findings"])
    page = html.read_text()
    assert "Plotly.newPlot" in page and "cdn" not in page.split("<body>")[1][:2000].lower()


def test_a_healthy_fleet_passes_and_a_bad_folder_is_one_line(tmp_path: Path) -> None:
    done = runner.invoke(app, ["fleet", "report", str(_fleet(tmp_path / "ok", slow=None)), "--json"])
    assert done.exit_code == 0 and all(n["verdict"] == "PASS" for n in json.loads(done.stdout)["nodes"])
    empty = tmp_path / "empty"
    empty.mkdir()
    failed = runner.invoke(app, ["fleet", "report", str(empty), "--json"])
    assert failed.exit_code == 2 and "doctor.json" in json.loads(failed.stdout)["error"]


def test_bus_bandwidth_is_counted_as_nccl_tests_counts_it() -> None:
    """nccl-tests doc/PERFORMANCE.md: 1 GB all-reduced in 10 ms over 8 ranks is algbw 100 GB/s and busbw
    100 x 2 x 7/8 = 175; all-gather and reduce-scatter carry (n-1)/n: 87.5."""
    assert bus_bandwidth("all_reduce", 10**9, 0.010, 8) == pytest.approx((100.0, 175.0))
    assert bus_bandwidth("all_gather", 10**9, 0.010, 8) == pytest.approx((100.0, 87.5))
    assert bus_bandwidth("reduce_scatter", 10**9, 0.010, 2) == pytest.approx((100.0, 50.0))


def test_bench_collective_over_gloo_reports_a_bus_bandwidth() -> None:
    """Two CPU processes started by torch.distributed's launcher, as CI can run them."""
    pytest.importorskip("torch")
    done = subprocess.run([sys.executable, "-m", "gpuwise.cli.main", "bench", "collective", "--nproc", "2",
                           "--backend", "gloo", "--size-mb", "4", "--iterations", "3", "--json"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert result["ranks"] == 2 and result["allreduce_busbw_gb_s"] > 0
    for row in result["results"]:
        factor = 1.0 if row["op"] == "all_reduce" else 0.5  # 2(n-1)/n and (n-1)/n at n = 2
        assert row["busbw_gb_s"] == pytest.approx(row["algbw_gb_s"] * factor, rel=0.01, abs=0.002)
