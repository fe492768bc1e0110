"""Burn-in verdicts on synthetic telemetry (a fake clock, workload and sampler) and the monitor's hints."""

from __future__ import annotations

import itertools
import sys

import pytest
from typer.testing import CliRunner

from gpuwise.cli.main import app
from gpuwise.probe import burnin
from gpuwise.probe.monitor import Reading, hints

runner = CliRunner()


def fake_run(samples: list[burnin.Sample], *, seconds: float, shutdown_c: float | None = 95.0,
             wrong_at: int | None = None) -> burnin.BurnInResult:
    ticks = itertools.count()
    readings = iter(samples)
    calls = {"n": 0}

    def clock() -> float:
        return float(next(ticks) // 2)  # each workload+sample round advances one second

    def workload() -> tuple[int, int]:
        calls["n"] += 1
        return (1 if wrong_at is not None and calls["n"] >= wrong_at else 0), 0

    return burnin.run(seconds=seconds, workload=workload, sampler=lambda: next(readings), shutdown_c=shutdown_c,
                      clock=clock)


def steady(n: int, clock_at: float = 1980.0, **kw: object) -> list[burnin.Sample]:
    return [burnin.Sample(t_s=i, sm_clock_mhz=clock_at, temperature_c=70.0, power_w=650.0,
                          ecc_uncorrected=0, **kw) for i in range(n)]  # type: ignore[arg-type]


def test_a_clean_sustained_run_passes() -> None:
    result = fake_run(steady(200), seconds=120)
    assert result.status == "PASS" and result.completed and result.clock_ratio == pytest.approx(1.0)


def test_clocks_that_sag_are_reported() -> None:
    samples = steady(70) + steady(130, clock_at=1700.0)  # 86% of the first minute
    result = fake_run(samples, seconds=150)
    assert result.status == "WARN" and "fell to 86%" in result.reasons[0]
    worse = fake_run(steady(70) + steady(130, clock_at=1500.0), seconds=150)
    assert worse.status == "FAIL"


def test_it_stops_at_the_temperature_limit_and_fails() -> None:
    hot = [*steady(10), burnin.Sample(t_s=10, sm_clock_mhz=1900, temperature_c=91.0, ecc_uncorrected=0), *steady(50)]
    result = fake_run(hot, seconds=60, shutdown_c=95.0)
    assert result.status == "FAIL" and not result.completed and "stop point (90 C)" in result.reasons[0]
    assert len(result.samples) == 11


def test_new_ecc_errors_and_wrong_results_stop_the_test() -> None:
    ecc = [*steady(5), burnin.Sample(t_s=5, sm_clock_mhz=1980, temperature_c=70, ecc_uncorrected=1), *steady(40)]
    assert "new uncorrected ECC" in fake_run(ecc, seconds=30).reasons[0]
    wrong = fake_run(steady(40), seconds=30, wrong_at=3)
    assert wrong.status == "FAIL" and "differed from the reference" in wrong.reasons[0]


def test_an_interrupted_or_empty_run_is_never_a_pass() -> None:
    result = burnin.judge([], planned_s=60, stop_reason=None)
    assert result.status == "FAIL" and "not a pass" in result.reasons[0]


def test_thermal_throttling_in_the_samples_fails() -> None:
    samples = steady(100)
    samples[50:60] = [burnin.Sample(t_s=i, sm_clock_mhz=1980, temperature_c=80, reasons=("hw_thermal",),
                                    ecc_uncorrected=0) for i in range(50, 60)]
    assert fake_run(samples, seconds=90).status == "FAIL"


def test_timeline_csv(tmp_path: pytest.TempPathFactory) -> None:
    result = fake_run(steady(20), seconds=10)
    path = tmp_path / "timeline.csv"  # type: ignore[operator]
    burnin.write_timeline(result, path)
    lines = path.read_text().splitlines()
    assert lines[0].startswith("t_s,sm_clock_mhz") and len(lines) == len(result.samples) + 1


def reading(**kw: object) -> Reading:
    base = dict(index=0, name="GPU", utilization_pct=95.0, memory_used_mib=10000.0, memory_total_mib=24000.0,
                power_w=400.0, power_limit_w=450.0, temperature_c=70.0, sm_clock_mhz=2500.0, reasons=())
    base.update(kw)
    return Reading(**base)  # type: ignore[arg-type]


def test_monitor_hints() -> None:
    assert hints(reading(), cpu_busy_fraction=0.3) == []
    assert "input pipeline" in hints(reading(utilization_pct=30.0), cpu_busy_fraction=0.95)[0]
    assert "memory nearly full" in hints(reading(memory_used_mib=23500.0), cpu_busy_fraction=0.2)[0]
    assert "thermal throttling" in hints(reading(reasons=("hw_thermal",)), cpu_busy_fraction=0.2)[0]


@pytest.mark.parametrize("command", [["monitor", "--count", "1"], ["burn-in", "--minutes", "0.1"]])
def test_without_a_gpu_stack_the_commands_exit_3(monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py absent
    result = runner.invoke(app, command)
    assert result.exit_code == 3 and "Traceback" not in result.stderr


def test_monitor_json_lines_from_a_fake_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import types

    fake = types.ModuleType("pynvml")
    fake.NVMLError = type("NVMLError", (Exception,), {})  # type: ignore[attr-defined]
    calls = {
        "nvmlInit": lambda: None, "nvmlShutdown": lambda: None, "nvmlDeviceGetCount": lambda: 1,
        "nvmlDeviceGetHandleByIndex": lambda i: i, "nvmlDeviceGetName": lambda h: b"NVIDIA GeForce RTX 4090",
        "nvmlDeviceGetUtilizationRates": lambda h: types.SimpleNamespace(gpu=30),
        "nvmlDeviceGetMemoryInfo": lambda h: types.SimpleNamespace(used=23_500 * 2**20, total=24_564 * 2**20),
        "nvmlDeviceGetPowerUsage": lambda h: 120_000, "nvmlDeviceGetEnforcedPowerLimit": lambda h: 450_000,
        "nvmlDeviceGetCurrentClocksEventReasons": lambda h: 0, "nvmlDeviceGetTemperature": lambda h, s: 61,
        "nvmlDeviceGetClockInfo": lambda h, c: 2520,
    }
    for name, func in calls.items():
        setattr(fake, name, func)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    result = runner.invoke(app, ["monitor", "--json", "--count", "2", "--interval", "0.01"])
    assert result.exit_code == 0, result.output
    rounds = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(rounds) == 2
    gpu = rounds[0]["gpus"][0]
    assert gpu["power_w"] == 120.0 and gpu["memory_total_mib"] == 24_564 and gpu["utilization_pct"] == 30
    assert any("memory nearly full" in h for h in gpu["hints"])  # 23.5 of 24.6 GB used
    bad = runner.invoke(app, ["monitor", "--interval", "0"])
    assert bad.exit_code == 2
