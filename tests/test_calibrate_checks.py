"""`gpuwise calibrate` on real exports (tests/fixtures/exports, byte-exact copies, SOURCES.md): a run faster than its
cards can be is flagged, its record is not applied and the output names the likely wrong assumption; llama-bench
files calibrate from their own parameter count; what a file holds in place of a number is one line, never an
internal error; names from files reach the terminal as text."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.api.measured_runs import calibrate
from gpuwise.catalog import Catalog
from gpuwise.cli.main import app
from gpuwise.errors import ConfigError
from gpuwise.report.validate import calibrate_view
from gpuwise.workload.exports import read_export, text

FIXTURES = Path(__file__).parent / "fixtures" / "exports"
BENCH = FIXTURES / "llama-bench" / "brayniac-rtx4090-snowpiercer15b-q3kl-b5606.json"
VLLM_H100 = FIXTURES / "vllm" / "massedcompute-h100-r1-distill-llama8b-c32.json"
runner = CliRunner()


@pytest.fixture(scope="module")
def a100x8(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The vLLM v0.8.3 export of 8 x A100 40 GB, unpacked; its sha256 is the one SOURCES.md records."""
    packed = FIXTURES / "vllm" / "surajssd-8xa100-40g-llama3.3-70b-tp8-sharegpt-qps-inf.json.gz"
    data = gzip.decompress(packed.read_bytes())
    recorded = re.search(r"qps-inf\.json\.gz.*?\| ([0-9a-f]{64}) \(unpacked\)", (FIXTURES / "SOURCES.md").read_text())
    assert recorded and hashlib.sha256(data).hexdigest() == recorded.group(1)
    path = tmp_path_factory.mktemp("a100x8") / "surajssd-8xa100-40g-llama3.3-70b-tp8-sharegpt-qps-inf.json"
    path.write_bytes(data)
    return path


def test_all_prompts_answered_faster_than_8_a100s_compute_them_is_not_applied(
        a100x8: Path, tmp_path: Path, shipped: Catalog) -> None:
    record = tmp_path / "a100.json"
    done = calibrate(a100x8, settings={"gpu": "a100-sxm-40gb", "tp": 8}, save=record)
    data = json.loads(a100x8.read_text())
    card = shipped.gpus["a100-sxm-40gb"]
    assert card.int8_dense_tops and card.bf16_dense_tflops
    # the file's own numbers: every prompt token had been computed by the latest first token (all sent at once)
    need = 2 * api.model("llama-3.3-70b").total_params * data["total_input_tokens"] / max(data["ttfts"])
    prefill = next(b for b in done.breaches if b.figure == "prefill")
    assert prefill.value == pytest.approx(need, rel=1e-9)
    assert prefill.limit == pytest.approx(8 * card.int8_dense_tops * 1e12)  # A100's fastest dense rate: INT8
    assert need > 5 * 8 * card.bf16_dense_tflops * 1e12  # 13.3 PFLOP/s against 2.5 at BF16
    limits = {b.figure: b.limit for b in done.breaches}
    assert limits["gemm_tflops"] == card.bf16_dense_tflops and limits["memory_gb_s"] == card.memory_bandwidth_gb_s
    saved = json.loads(record.read_text())
    assert "prefix-cache hits" in saved["calibration"]["not_applied"] and saved["runs"][0]["beyond_the_cards"]
    for use in (lambda: api.estimate("llama-3.3-70b", gpu="a100-sxm-40gb", task="infer", calibration=record),
                lambda: api.serve_sim("llama-3.3-70b", gpu="a100-sxm-40gb", tp=8, count=8, calibration=record)):
        with pytest.raises(ConfigError, match=r"is not applied: .*prefix-cache hits"):
            use()


def test_a_record_saved_before_the_check_is_refused_above_the_datasheet(a100x8: Path, tmp_path: Path) -> None:
    record = tmp_path / "old.json"
    calibrate(a100x8, settings={"gpu": "a100-sxm-40gb", "tp": 8}, save=record)
    old = json.loads(record.read_text())
    del old["calibration"]["not_applied"]  # as gpuwise wrote it before: bf16 364 TFLOP/s on a 312 TFLOP/s card
    record.write_text(json.dumps(old))
    with pytest.raises(ConfigError, match=re.escape("not within 1%-100% of a100-sxm-40gb's 312.0 dense peak")):
        api.estimate("llama-3.3-70b", gpu="a100-sxm-40gb", task="infer", calibration=record)


def test_a_70b_on_one_a100_names_the_tp(a100x8: Path) -> None:
    result = runner.invoke(app, ["calibrate", "--from", str(a100x8), "--gpu", "a100-sxm-40gb", "--json"])
    assert result.exit_code == 2
    error = json.loads(result.output.splitlines()[0])["error"]
    assert "--tp N" in error and "\n" not in error


def test_a_run_within_its_card_applies_and_its_floors_hold(shipped: Catalog) -> None:
    done = calibrate(VLLM_H100, settings={"gpu": "h100-pcie-80gb", "model": "llama-3.1-8b"})
    assert done.applicable and done.breaches == ()
    run, card = json.loads(VLLM_H100.read_text()), shipped.gpus["h100-pcie-80gb"]
    fastest = max(card.peak_flops(d, fp16_accumulate=True) or 0 for d in ("bf16", "fp16", "fp8", "int8", "fp4"))
    floor_ms = 2 * api.model("llama-3.1-8b").total_params * run["total_input_tokens"] / run["completed"] / fastest * 1e3
    assert run["mean_ttft_ms"] > floor_ms


def _bench(tmp_path: Path, name: str, **changes: Any) -> Path:
    """The real llama-bench file with ``changes`` made to each of its tests (or to test 2 with ``tg_``)."""
    tests = json.loads(BENCH.read_text())
    for key, value in changes.items():
        target = tests[1:] if key.startswith("tg_") else tests
        for test in target:
            test[key.removeprefix("tg_")] = value
    path = tmp_path / name
    path.write_text(json.dumps(tests))
    return path


def test_llama_bench_calibrates_from_its_own_parameter_count(shipped: Catalog) -> None:
    tests = json.loads(BENCH.read_text())
    done = calibrate(BENCH)
    assert done.gpu == "rtx-4090" and done.applicable
    assert any("dense model of the file's 14.97 B parameters" in n for n in done.notes)
    assert api.model("llama-3.1-8b").total_params < tests[0]["model_n_params"]  # a real count, not a preset's
    tg = done.runs[1]
    assert tg.measured["tokens_per_s"] == tests[1]["avg_ts"]
    ceiling = shipped.gpus["rtx-4090"].memory_bandwidth_gb_s * 1e9 / tests[1]["model_size"]  # tokens/s
    assert 0 < tg.predicted["tokens_per_s"] <= ceiling  # type: ignore[operator]


def test_two_server_editions_read_as_two_cards_of_the_workstation_record(tmp_path: Path) -> None:
    server = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    done = calibrate(_bench(tmp_path, "pro6000.json", gpu_info=f"{server}, {server}"))
    assert done.gpu == "rtx-pro-6000-blackwell"
    assert any("read as 2 x rtx-pro-6000-blackwell" in n and "Server Edition" in n for n in done.notes)


def test_a_dense_guess_faster_than_the_memory_names_a_mixture_of_experts(tmp_path: Path, shipped: Catalog) -> None:
    tests = json.loads(BENCH.read_text())
    limit = shipped.gpus["rtx-4090"].memory_bandwidth_gb_s * 1e9 / tests[1]["model_size"]
    done = calibrate(_bench(tmp_path, "fast.json", tg_avg_ts=3 * limit))
    decode = next(b for b in done.breaches if b.figure == "decode")
    assert decode.factor == pytest.approx(3.0)
    assert "mixture of experts" in done.calibration["not_applied"] and "--model" in done.calibration["not_applied"]


BAD_VALUES = [("a string", "12.5"), ("a list", [1]), ("Infinity", float("inf")), ("NaN", float("nan")),
              ("a negative", -0.09), ("a bool", True)]


@pytest.mark.parametrize(("kind", "value"), BAD_VALUES, ids=[k for k, _ in BAD_VALUES])
@pytest.mark.parametrize("field", ["avg_ts", "n_prompt", "model_size"])
def test_what_is_not_a_measurement_in_llama_bench_is_one_line(tmp_path: Path, field: str, kind: str,
                                                             value: Any) -> None:
    _refused(_bench(tmp_path, "bad.json", **{field: value}), field, kind, tmp_path)


@pytest.mark.parametrize(("kind", "value"), BAD_VALUES, ids=[k for k, _ in BAD_VALUES])
@pytest.mark.parametrize("field", ["mean_ttft_ms", "completed", "total_input_tokens", "output_throughput"])
def test_what_is_not_a_measurement_in_a_vllm_export_is_one_line(tmp_path: Path, field: str, kind: str,
                                                               value: Any) -> None:
    data = json.loads(VLLM_H100.read_text())
    data[field] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    _refused(path, field, kind, tmp_path)


def _refused(path: Path, field: str, kind: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        read_export(path)
    message = str(err.value)
    assert "\n" not in message and (field in message or (kind == "NaN" and "NaN" in message)), message
    target = tmp_path / "record.json"
    result = runner.invoke(app, ["calibrate", "--from", str(path), "--gpu", "h100-pcie-80gb", "--model",
                                 "llama-3.1-8b", "--save", str(target), "--json"])
    assert result.exit_code == 2 and not target.exists()
    assert "error" in json.loads(result.output.splitlines()[0])


def test_a_deeply_nested_export_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 10_000 + "]" * 10_000)
    result = runner.invoke(app, ["calibrate", "--from", str(path), "--gpu", "rtx-4090"])
    assert result.exit_code == 2 and "nested" in result.output and "Traceback" not in result.output


def test_names_from_files_lose_their_control_characters() -> None:
    hostile = "\x1b]8;;https://evil.example\x07NVIDIA\x1b[31m GeForce\u202e RTX\x9b 4090\x00"
    cleaned = text(hostile)
    assert cleaned is not None and "NVIDIA" in cleaned and "4090" in cleaned
    assert not re.search(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", cleaned)
    assert text("x" * 10_000) == "x" * 200 and text(42) is None and text("\x1b\x07") is None


def test_markup_in_a_file_name_is_shown_as_text(tmp_path: Path) -> None:
    path = tmp_path / "[bold][link=https:evil.example]run[blink].json"  # a file name cannot hold a closing "/"
    path.write_bytes(VLLM_H100.read_bytes())
    done = calibrate(path, settings={"gpu": "h100-pcie-80gb", "model": "llama-3.1-8b"})
    out = io.StringIO()
    Console(file=out, width=300, color_system=None).print(calibrate_view(done))
    assert "[bold][link=https:evil.example]run[blink].json" in out.getvalue()


def test_a_hostile_gpu_name_is_one_line_of_text(tmp_path: Path) -> None:
    path = _bench(tmp_path, "evil.json", gpu_info="\x1b]8;;https://evil.example\x07[/bold] Evil GPU\x1b[2J")
    result = runner.invoke(app, ["calibrate", "--from", str(path)])
    assert result.exit_code == 2 and "\x1b" not in result.output and "Traceback" not in result.output
    assert "[/bold] Evil GPU" in result.output and "--gpu" in result.output


def test_a_hostile_file_name_is_text_in_the_error(tmp_path: Path) -> None:
    path = tmp_path / "\x1b[2J\x1b]0;owned\x07run.json"
    path.write_text(json.dumps({"hello": 1}))
    result = runner.invoke(app, ["calibrate", "--from", str(path), "--gpu", "rtx-4090"])
    assert result.exit_code == 2 and "\x1b" not in result.output and "\x07" not in result.output
    assert "not a benchmark export" in result.output and len(result.output.strip().splitlines()) == 1
