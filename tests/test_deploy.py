"""deploy/: the Kubernetes manifests against the Kubernetes schemas (offline), the Grafana dashboard against the
exporter's metric names, and the Slurm scripts' logic run on recorded doctor snapshots with a stand-in scontrol."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from gpuwise.cli.main import app

ROOT = Path(__file__).parents[1]
DEPLOY = ROOT / "deploy"
SNAPSHOTS = ROOT / "tests" / "fixtures" / "snapshots"
KUBERNETES = "1.33.0"  # a release the GPU Operator supports; kubernetes-validate ships its schemas


def _manifest(name: str) -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((DEPLOY / "kubernetes" / name).read_text())


@pytest.mark.parametrize("name", ["exporter-daemonset.yaml", "exporter-service.yaml", "acceptance-job.yaml"])
def test_manifests_validate_against_the_kubernetes_schemas(name: str) -> None:
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    kubernetes_validate.validate(_manifest(name), KUBERNETES, strict=True)  # raises on any unknown or bad field


def test_the_daemonset_lands_on_gpu_nodes_and_the_monitor_finds_it() -> None:
    """GPU Operator conventions: nodes labelled nvidia.com/gpu.present, the nvidia.com/gpu taint tolerated, the
    nvidia runtime class; the Service selects the pods and the ServiceMonitor the Service, by the named port."""
    daemonset, service = _manifest("exporter-daemonset.yaml"), _manifest("exporter-service.yaml")
    monitor = _manifest("exporter-servicemonitor.yaml")
    pod = daemonset["spec"]["template"]
    assert pod["spec"]["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["spec"]["tolerations"]
    assert pod["spec"]["runtimeClassName"] == "nvidia"
    container = pod["spec"]["containers"][0]
    assert container["command"][:4] == ["gpuwise", "exporter", "--host", "0.0.0.0"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert service["spec"]["ports"][0]["targetPort"] == container["ports"][0]["name"] == "metrics"
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1" and monitor["kind"] == "ServiceMonitor"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]


def test_the_dashboard_asks_only_for_metrics_the_exporter_serves() -> None:
    served = runner_once()
    dashboard = json.loads((DEPLOY / "grafana" / "gpuwise-dashboard.json").read_text())
    asked = {m for p in dashboard["panels"] for t in p["targets"] for m in re.findall(r"gpuwise_[a-z_]+", t["expr"])}
    assert asked and asked <= served, asked - served


def runner_once() -> set[str]:
    done = CliRunner().invoke(app, ["exporter", "--from", str(SNAPSHOTS / "healthy-h100-sxm.json"), "--bench",
                                    str(ROOT / "benchmarks" / "results" / "h200-2026-11-29" / "bench.json"), "--once"])
    assert done.exit_code == 0
    return set(re.findall(r"^# TYPE (gpuwise_[a-z_]+)", done.stdout, flags=re.M))


def _gpuwise(tmp_path: Path) -> Path:
    """A `gpuwise` command for the scripts: this interpreter's gpuwise, whatever PATH holds."""
    tool = tmp_path / "gpuwise"
    tool.write_text(f"#!/bin/sh\nexec {sys.executable} -m gpuwise.cli.main \"$@\"\n")
    tool.chmod(0o755)
    return tool


def _healthcheck(tmp_path: Path, snapshot: str, *extra: str) -> tuple[int, str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "scontrol.log"
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(f"#!/bin/sh\necho \"$@\" >> {log}\n")
    scontrol.chmod(0o755)
    env = {**os.environ, "GPUWISE": str(_gpuwise(tmp_path)), "SCONTROL": str(scontrol), "NODE": "gpu-node-07",
           "GPUWISE_STATE": str(tmp_path / "state"), "GPUWISE_DOCTOR_ARGS": f"--from {SNAPSHOTS / snapshot}"}
    done = subprocess.run(["bash", str(DEPLOY / "slurm" / "gpuwise-healthcheck.sh"), *extra], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    return done.returncode, log.read_text() if log.exists() else ""


def test_the_health_check_drains_a_node_whose_doctor_fails(tmp_path: Path) -> None:
    """A100 with pending remapped rows (doctor: ecc FAIL, remapped_rows FAIL) is drained with those checks named;
    a healthy H100 is left alone, its report kept."""
    code, calls = _healthcheck(tmp_path / "a", "pending-remapped-rows-a100.json")
    assert code == 0
    assert "NodeName=gpu-node-07 State=DRAIN" in calls and "remapped_rows" in calls and "ecc" in calls
    assert _healthcheck(tmp_path / "b", "healthy-h100-sxm.json") == (0, "")
    assert (tmp_path / "b" / "state" / "doctor.json").is_file()


def test_as_a_prolog_it_fails_instead_and_lets_slurm_drain(tmp_path: Path) -> None:
    code, calls = _healthcheck(tmp_path, "power-capped-a100.json", "--prolog")
    assert code == 1 and calls == ""


def test_collect_node_writes_the_folder_fleet_report_reads(tmp_path: Path) -> None:
    """collect-node.sh on a recorded snapshot, bench on the CPU (no GPU here), burn-in skipped; fleet report
    then reads the folder it wrote."""
    pytest.importorskip("torch")
    env = {**os.environ, "GPUWISE": str(_gpuwise(tmp_path)), "NODE": "gpu-node-01",
           "GPUWISE_DOCTOR_ARGS": f"--from {SNAPSHOTS / 'healthy-h100-sxm.json'}",
           "GPUWISE_BENCH_ARGS": "--device cpu --quick", "GPUWISE_BURNIN_MINUTES": "0"}
    out = tmp_path / "fleet"
    done = subprocess.run(["bash", str(DEPLOY / "slurm" / "collect-node.sh"), str(out)], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-1000:]
    node = out / "gpu-node-01"
    assert json.loads((node / "doctor.json").read_text())["host"] == "dgx-h100"
    bench = json.loads((node / "bench.json").read_text())
    assert bench["host"] and bench["taken_at"] and bench["results"]
    report = CliRunner().invoke(app, ["fleet", "report", str(out), "--json"])
    assert [n["name"] for n in json.loads(report.stdout)["nodes"]] == ["gpu-node-01"]
