"""`gpuwise calibrate --from FILE` on real exports of each format, as committed in public repositories
(../shared/data/exports, SOURCES.md gives each file's origin): the figures read are the files' own, each schema
difference between tool versions is met, and a run is predicted at its own load. Skipped when the folder is absent
(a clean clone)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.api.measured_runs import calibrate
from gpuwise.cli.main import app
from gpuwise.errors import ConfigError
from gpuwise.workload.exports import read_export

EXPORTS = Path(__file__).resolve().parents[2] / "shared" / "data" / "exports"
pytestmark = pytest.mark.skipif(not EXPORTS.is_dir(), reason="../shared/data/exports is not here")
runner = CliRunner()
VLLM_H100 = EXPORTS / "vllm" / "massedcompute-h100-r1-distill-llama8b-c32.json"


def test_vllm_both_versions() -> None:
    new = read_export(VLLM_H100)[0]
    # 2026 nightly: 160 prompts of 128 + 128 tokens at --max-concurrency 32, request_rate "inf"
    assert (new.model, new.concurrency, new.request_rate) == ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", 32, None)
    assert (new.input_len, new.output_len) == (128, 128)
    assert new.ttft_ms == pytest.approx(97.06541787500278) and new.tpot_ms == pytest.approx(10.69904820684053)
    old = read_export(EXPORTS / "vllm" / "surajssd-8xa100-40g-llama3.3-70b-tp8-sharegpt-qps-inf.json")[0]
    # v0.8.3: "request_goodput:" with a colon, no max_concurrency: all 200 prompts at once
    assert old.concurrency == 200 and old.input_len == pytest.approx(42659 / 200)
    assert old.request_per_s == pytest.approx(8.398304797910107)


def test_sglang_old_and_new_with_infinity() -> None:
    online = read_export(EXPORTS / "sglang" / "datacrunch-h200x4-llama3.3-70b-online.jsonl")
    assert [r.request_rate for r in online] == [1, 2, 4, 8, 16, 4, 8]
    assert online[0].statistic == "median" and online[0].ttft_ms == pytest.approx(85.74514742940664)
    assert online[0].request_per_s == pytest.approx(300 / 298.3675805060193)  # completed / duration: no throughput key
    offline = read_export(EXPORTS / "sglang" / "datacrunch-h200x4-llama3.3-70b-offline.jsonl")
    assert len(offline) == 7 and all(r.request_rate is None for r in offline)  # the bare Infinity token
    new = read_export(EXPORTS / "sglang" / "massedcompute-h100-r1-distill-llama8b-c32.jsonl")[0]
    assert new.concurrency == 32 and new.input_len == pytest.approx(10223 / 160)  # random lengths, sampled


def test_aiperf_and_genai_perf_find_their_concurrency_in_any_config_shape() -> None:
    aiperf = read_export(EXPORTS / "aiperf" / "aiperf-wellflat-a100-gptoss20b-c1.json")[0]
    assert (aiperf.tool, aiperf.concurrency, aiperf.model) == ("aiperf", 1, "openai/gpt-oss-20b")
    assert aiperf.gpu_name == "NVIDIA A100-SXM4-80GB" and aiperf.ttft_ms == pytest.approx(82.84651240000001)
    old = read_export(EXPORTS / "aiperf" / "genai-perf-wellflat-a100-gptoss20b-c1-old.json")[0]
    assert (old.tool, old.concurrency) == ("genai-perf", 1)  # GenAI-Perf 25.01: flat CLI arguments
    assert old.ttft_ms == pytest.approx(2197.1986507727274)


def test_llama_bench_tests_and_their_format() -> None:
    pp, tg = read_export(EXPORTS / "llama-bench" / "brayniac-rtx4090-snowpiercer15b-q3kl-b5606.json")
    assert (pp.prompt_tokens, pp.generated_tokens, tg.generated_tokens) == (8192, None, 1280)
    assert pp.tokens_per_s == pytest.approx(3024.404345) and tg.tokens_per_s == pytest.approx(85.498819)
    assert pp.gpu_name == "NVIDIA GeForce RTX 4090"
    assert pp.weight_bytes == 7_982_305_280  # model_size: the GGUF's bytes, 4.26 bits per weight
    assert (pp.params, pp.architecture, pp.context_depth) == (14_974_182_400, "llama", 0)  # model_n_params, model_type


def test_sglang_says_whether_its_prefix_cache_was_on() -> None:
    new = read_export(EXPORTS / "sglang" / "massedcompute-h100-r1-distill-llama8b-c32.jsonl")[0]
    assert (new.prefix_cache, new.tp) == (True, 1)  # server_info: disable_radix_cache false, tp_size 1
    old = read_export(EXPORTS / "sglang" / "datacrunch-h200x4-llama3.3-70b-online.jsonl")[0]
    assert (old.prefix_cache, old.tp) == (None, None)  # the Dec-2024 format does not say


def test_vllm_per_request_lists_give_the_latest_first_token() -> None:
    path = EXPORTS / "vllm" / "surajssd-8xa100-40g-llama3.3-70b-tp8-sharegpt-qps-inf.json"
    run = read_export(path)[0]
    assert run.last_first_token_ms == pytest.approx(1e3 * max(json.loads(path.read_text())["ttfts"]))
    assert run.input_tokens_total == 42659


SETTINGS = {  # what each file does not say (SOURCES.md): the card, the TP, a preset of the served model
    "aiperf": ["--gpu", "a100-sxm-80gb", "--model", "gpt-oss-20b"],
    "llama-bench": ["--gpu", "rtx-4090"],
    "datacrunch": ["--gpu", "h200-sxm-141gb", "--tp", "4", "--model", "llama-3.3-70b"],
    "massedcompute": ["--gpu", "h100-pcie-80gb", "--model", "llama-3.1-8b"],
    "surajssd": ["--gpu", "a100-sxm-40gb", "--tp", "8", "--model", "llama-3.3-70b"],
}


@pytest.mark.parametrize("path", sorted(EXPORTS.rglob("*.json*")) if EXPORTS.is_dir() else [],
                         ids=lambda p: p.name)
def test_every_export_is_read_and_calibrated_or_refused_in_one_line(path: Path) -> None:
    assert read_export(path)
    given = next(v for k, v in SETTINGS.items() if k in str(path))
    for args in ([], given):
        result = runner.invoke(app, ["calibrate", "--from", str(path), *args, "--json"])
        assert result.exit_code in (0, 2), result.output[-300:]
        first = json.loads(result.output.splitlines()[0] if result.exit_code == 2 else result.output)
        assert ("error" in first and "\n" not in first["error"]) if result.exit_code == 2 else first["runs"]


def test_a_file_of_another_shape_is_one_line_naming_the_formats(tmp_path: Path) -> None:
    other = tmp_path / "x.json"
    other.write_text(json.dumps({"hello": 1}))
    with pytest.raises(ConfigError, match="llama-bench -o json"):
        read_export(other)
    result = runner.invoke(app, ["calibrate", "--from", str(other), "--json"])
    assert result.exit_code == 2 and "AIPerf" in json.loads(result.output.splitlines()[0])["error"]


def test_each_run_is_predicted_at_its_own_load_and_the_record_calibrates(tmp_path: Path) -> None:
    record = tmp_path / "h100.json"
    done = calibrate(VLLM_H100, settings={"gpu": "h100-pcie-80gb", "model": "llama-3.1-8b"}, save=record)
    run = done.runs[0]
    assert set(run.measured) == set(run.predicted) == {"ttft_ms", "tpot_ms", "request_per_s", "output_tokens_per_s"}
    assert all(v is not None and v > 0 for v in run.predicted.values())
    saved = json.loads(record.read_text())
    assert saved["kind"] == "gpuwise-calibration" and saved["runs"][0]["measured"]["ttft_ms"] == pytest.approx(
        97.06541787500278)
    calibrated = api.estimate("llama-3.1-8b", gpu="h100-pcie-80gb", task="infer", calibration=record)
    assert any("measured runs h100.json" in a for a in calibrated.perf.assumptions)  # type: ignore[union-attr]
    before = api.serve_sim("llama-3.1-8b", gpu="h100-pcie-80gb", concurrency=32, input_len=128, output_len=128)
    after = api.serve_sim("llama-3.1-8b", gpu="h100-pcie-80gb", concurrency=32, input_len=128, output_len=128,
                          calibration=record)
    measured = run.measured["tpot_ms"]
    assert measured is not None and before.at_concurrency is not None and after.at_concurrency is not None
    assert abs(after.at_concurrency.tpot_mean_ms - measured) <= abs(before.at_concurrency.tpot_mean_ms - measured)


def test_a_lone_clients_request_is_its_first_token_and_its_decode_steps() -> None:
    """At concurrency 1 AIPerf's request latency is its TTFT plus (output - 1) inter-token latencies (AIPerf's own
    definitions): the per-request overhead the record reports is near zero."""
    done = calibrate(EXPORTS / "aiperf" / "aiperf-wellflat-a100-gptoss20b-c1.json", settings={"gpu": "a100-sxm-80gb"})
    assert abs(done.calibration["request_overhead_ms"]) < 0.01 * done.runs[0].run.e2e_ms  # type: ignore[operator]
