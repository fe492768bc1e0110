"""One regression test per defect of the review and fuzzing run behind issue 11 (a hang, a crash, a corruption, a
silently wrong answer, a seam), each named for what was wrong."""

from __future__ import annotations

import ast
import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.budget import Budget, checkpoint, limited
from gpuwise.catalog import Catalog
from gpuwise.cli.main import app
from gpuwise.errors import ConfigError, InputTooLarge, TimeLimitExceeded
from gpuwise.safe_io import atomic_write_text, excerpt, parse_json, parse_yaml
from gpuwise.troubleshoot.matcher import anchors, diagnose_text
from gpuwise.workload.jobs.parse import job_flag_fields

runner = CliRunner()
ROOT = Path(__file__).parents[1]
H200_RUN = ROOT / "benchmarks" / "results" / "h200-2026-11-29"


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    assert "Traceback" not in result.stdout + result.stderr
    return result.exit_code, result.stdout, result.stderr


# ---- the shape of the code -------------------------------------------------------------------------------
def test_no_function_over_80_lines_and_no_module_over_400() -> None:
    long_functions, long_modules = [], []
    for path in (ROOT / "src" / "gpuwise").rglob("*.py"):
        text = path.read_text()
        if text.count("\n") > 400:
            long_modules.append(path.name)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None \
                    and node.end_lineno - node.lineno + 1 > 80:
                long_functions.append(f"{path.name}:{node.name}")
    assert not long_functions and not long_modules, (long_functions, long_modules)


def _help_flags(command: str) -> set[str]:
    code, out, _ = run(command, "--help")
    assert code == 0
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", out)) - {"--help"}


@pytest.mark.parametrize(("command", "foreign"), [
    ("estimate", {"--qps", "--budget-usd", "--objective", "--requests", "--scenario"}),  # --emit: issue 30
    ("fit", {"--qps", "--calibration", "--budget-usd", "--exact", "--p99-ms"}),
    ("serve-sim", {"--method", "--seq", "--zero", "--budget-usd", "--emit", "--task", "--exact"}),
    ("recommend", {"--gpu", "--count", "--nodes", "--exact", "--requests", "--seed"}),  # --emit: issue 30
])
def test_help_lists_only_the_commands_own_flags(command: str, foreign: set[str]) -> None:
    # every command once listed about 60 flags; now each lists what its typed models give it, and nothing else
    listed = _help_flags(command)
    assert not listed & foreign, listed & foreign
    declared = {flag.spelling(name) for name, (_info, flag) in job_flag_fields(command).items()}
    if command == "serve-sim":
        declared = {flag.spelling(name) for name, (_info, flag) in job_flag_fields(command, ("infer",)).items()}
    assert declared - {"--grad-ckpt"} <= listed


# ---- files: bounded reads, atomic writes --------------------------------------------------------------------
def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "report.md"
    target.write_text("the old report")

    def full_disk(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(ConfigError, match=r"cannot write report .*report\.md.*No space left"):
        atomic_write_text(target, "the new report", what="report")
    assert target.read_text() == "the old report" and [p.name for p in tmp_path.iterdir()] == ["report.md"]
    monkeypatch.undo()
    atomic_write_text(target, "the new report", what="report")
    assert target.read_text() == "the new report" and [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_doctor_writes_no_snapshot_when_its_checks_cannot_run(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"gpus": [{"index": -1, "name": "x"}]}))  # a negative index: not a reading
    saved = tmp_path / "saved.json"
    code, _, err = run("doctor", "--from", str(bad), "--save-snapshot", str(saved))
    assert code == 2 and "index -1 is outside 0" in err and not saved.exists()


def test_a_saved_doctor_report_replays_as_recorded() -> None:
    # the H200 run's doctor.json is a report, not a snapshot: it was refused; now its checks show as recorded
    code, out, _ = run("doctor", "--from", str(H200_RUN / "doctor.json"), "--json")
    document = json.loads(out)
    assert code == 1 and document["summary"]["WARN"] >= 1  # the one PCIe replay the card counted
    assert {c["id"] for c in document["checks"]} >= {"pcie_link", "power_limit", "ecc"} and "snapshot" not in document
    code, out, _ = run("doctor", "--from", str(H200_RUN / "doctor.json"))
    assert "shown as recorded" in " ".join(out.split())


def test_doctor_json_without_a_gpu_is_json(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setitem(sys.modules, "amdsmi", None)
    code, out, _ = run("doctor", "--json", "--load-seconds", "0")
    assert code == 3 and json.loads(out)["exit_code"] == 3 and "nvidia-ml-py" in json.loads(out)["error"]


def test_the_shipped_h200_calibration_is_accepted_for_its_card(shipped: Catalog) -> None:
    # recorded with the device name "NVIDIA H200" (both variants carry it); it was refused for h200-sxm-141gb
    record = H200_RUN / "calibration.json"
    measured = api.estimate("llama-3.2-1b", gpu="h200-sxm-141gb", batch=8, calibration=record)
    table = api.estimate("llama-3.2-1b", gpu="h200-sxm-141gb", batch=8)
    assert measured.perf is not None and table.perf is not None
    assert measured.perf.step_time_s != table.perf.step_time_s
    with pytest.raises(ConfigError, match="measured on h200-nvl-141gb, h200-sxm-141gb, not h100-sxm-80gb"):
        api.estimate("llama-3.2-1b", gpu="h100-sxm-80gb", calibration=record)


@pytest.mark.parametrize(("rates", "needle"), [
    ({"bf16": -500.0}, "gemm_tflops.bf16"),  # a negative rate gave an MFU of 107 %
    ({"bf16": 5000.0}, "not within 1%-125% of h100-sxm-80gb's 989.5 dense peak"),
    ({"bf16": 1e-300}, "not within 1%-125% of h100-sxm-80gb's 989.5 dense peak"),  # an MFU of 0.0
])
def test_implausible_calibrations_are_refused(tmp_path: Path, rates: dict[str, float], needle: str) -> None:
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({"gpu": "h100-sxm-80gb", "name": "NVIDIA H100 80GB HBM3", "date": "2026-12-01",
                                "gemm_tflops": rates, "memory_gb_s": 3000}))
    with pytest.raises(ConfigError, match=re.escape(needle)):
        api.estimate("llama-3.1-8b", gpu="h100-sxm-80gb", calibration=path)


def test_bounded_parsers() -> None:
    with pytest.raises(InputTooLarge, match="nested more than 32"):
        parse_json("[" * 40 + "]" * 40, origin="x")
    with pytest.raises(ConfigError, match="5,000 digits"):
        parse_json("9" * 5000, origin="x")
    with pytest.raises(ConfigError, match="no NaN or Infinity"):
        parse_json('{"a": NaN}', origin="x")
    assert parse_json('{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}', origin="x")  # brackets in strings
    with pytest.raises(InputTooLarge, match=r"aliases|values"):
        parse_yaml("a: &a [1,1,1,1,1,1,1,1,1,1]\n" + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(6)), origin="x")
    assert excerpt(10**10000).startswith("<a 10,001-digit number")  # str() of it raises in Python 3.11
    assert len(excerpt("x" * 10**6)) <= 60


# ---- config fields that were silently wrong -----------------------------------------------------------
@pytest.mark.parametrize(("change", "needle"), [
    ({"sliding_window": -4096}, "sliding_window"),  # gave a negative KV cache
    ({"tie_word_embeddings": "no"}, "tie_word_embeddings"),  # read as tied
    ({"num_local_experts": 8, "num_experts_per_tok": 64}, "num_experts_per_tok 64"),  # 363 B active of 47 B
    ({"architectures": 5}, "architectures"),
    ({"hidden_size": "4096"}, "hidden_size"),
])
def test_config_values_no_model_has_are_one_line(tmp_path: Path, change: dict[str, object], needle: str) -> None:
    base = {"model_type": "mixtral", "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
            "intermediate_size": 1024, "vocab_size": 1000, "num_local_experts": 8, "num_experts_per_tok": 2}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**base, **change}))
    code, _, err = run("estimate", str(path), "--gpu", "t4", "--task", "infer")
    assert code == 2 and needle in err and err.count("\n") == 1


def test_a_resnet_config_with_huge_depths_is_refused_at_once(tmp_path: Path) -> None:
    # 230 bytes that spun for ever in the CLI and in a web request (and the server then ignored SIGTERM)
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "resnet", "embedding_size": 64, "hidden_sizes": [256, 512, 1024, 2048], '
                    '"depths": [3000000000, 4, 6, 3], "layer_type": "bottleneck", "architectures": '
                    '["ResNetForImageClassification"]}')
    code, _, err = run("estimate", str(path), "--gpu", "a100-sxm-80gb")
    assert code == 2 and "depths" in err  # refused by the config's validation, before any layer is counted


# ---- commands -------------------------------------------------------------------------------------------
def test_fit_of_a_12_head_model_for_inference() -> None:
    # fit proposed --tp 8 and then failed on its own proposal: "--tp 8 does not divide 12 heads"
    code, out, _ = run("fit", "gpt2", "--gpu", "rtx-4090", "--task", "infer", "--json")
    assert code == 0 and all("--tp 8" not in c["flags"] for c in json.loads(out)["changes"])


def test_json_commands_answer_errors_in_json() -> None:
    code, out, _err = run("estimate", "llama-3.1-8b", "--gpu", "rtx-4909", "--json")
    document = json.loads(out)
    assert code == 2 and document["exit_code"] == 2 and document["error"].startswith(
        "unknown GPU 'rtx-4909'; did you mean rtx-4090")
    code, out, _ = run("tco", "rtx-4090", "--price-usd", "nan", "--json")  # was a traceback in the JSON writer
    assert code == 2 and "--price-usd" in json.loads(out)["error"]
    code, out, _ = run("estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--batch", "two", "--json")
    assert code == 2 and "--batch" in json.loads(out)["error"]  # a usage error from click, in JSON too


def test_memory_is_shown_in_gib_and_the_contract_stays_in_gb() -> None:
    # an 80 GB H100 showed "of 85.9 GB" and a 16 GB card "of 17 GB": capacity is binary, so it is GiB
    code, out, _ = run("estimate", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--method", "lora")
    assert code == 0 and "of 80.00 GiB per GPU" in out and "GiB per GPU" in out and " GB per GPU" not in out
    code, out, _ = run("estimate", "llama-3.1-8b", "--gpu", "rtx-4060-ti-16gb", "--method", "qlora", "--json")
    memory = json.loads(out)["memory"]
    assert memory["capacity_gb"] == pytest.approx(16 * 2**30 / 1e9, abs=1e-3) and memory["capacity_gib"] == 16
    assert memory["per_gpu_gib"] == pytest.approx(memory["per_gpu_gb"] * 1e9 / 2**30, abs=1e-3)


def test_serve_refuses_a_port_that_does_not_exist_and_warns_on_a_public_bind(monkeypatch: pytest.MonkeyPatch
                                                                              ) -> None:
    code, _, err = run("serve", "--port", "70000")  # was an OverflowError traceback from uvicorn
    assert code == 2 and "--port" in err
    pytest.importorskip("uvicorn")
    import uvicorn

    started: list[dict[str, object]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: started.append(kw))
    code, _, err = run("serve", "--host", "0.0.0.0", "--port", "8123")
    assert code == 0 and "reachable from other machines" in err and started[0]["host"] == "0.0.0.0"


def test_recommend_takes_at_most_16_workloads() -> None:
    # 1,000 workloads ran past 30 s: each is a whole-catalog enumeration
    workloads = [{"model": "qwen2-7b", "options": {"method": "qlora"}}] * 17
    with pytest.raises(ConfigError, match="at most 16 items"):
        api.recommend({"workloads": workloads})


def test_diagnose_is_linear_on_one_long_line(tmp_path: Path) -> None:
    # a 5 MB log of carriage returns (a progress bar) took 49 s: every hit scanned back to the line start
    log = tmp_path / "train.log"
    log.write_text("step 1 CUDA out of memory. Tried to allocate 2.00 GiB\r" * 100_000)
    code, out, _ = run("diagnose", str(log), "--json")
    doc = json.loads(out)  # its time: benchmarks/diagnose_speed.py (a timed check fails at random on a loaded CI)
    assert code == 0 and doc["matches"][0]["id"] == "cuda-oom" and doc["matches"][0]["matching_lines"] == 1


def test_a_quantifier_is_not_read_as_text_to_look_for() -> None:
    # the literal prefilter read "{2,}" of "error:\s{2,}x" as text every matching line contains: none did
    assert anchors(r"Xid\s{1,3}79") == ("xid",)
    assert anchors(r"abc{2,4}def") == ("def",) or anchors(r"abc{2,4}def") == ("ab",)
    from gpuwise.troubleshoot.kb import Entry

    entry = Entry(id="spaced", title="t", patterns=(r"NCCL\s{2,}WARN",), cause="c", confirm=("c",), fix=("f",),
                  sources=({"url": "https://example.com", "title": "example"},), samples=("NCCL   WARN",))
    assert [m.entry.id for m in diagnose_text("NCCL   WARN timeout", kb=[entry])] == ["spaced"]


def test_a_budget_stops_a_computation_at_its_next_checkpoint() -> None:
    budget = Budget(60)
    with limited(budget):
        checkpoint()
        budget.cancelled.set()
        with pytest.raises(TimeLimitExceeded, match="cancelled"):
            checkpoint()
    checkpoint()  # outside: no budget, no limit
    with limited(Budget(0.0)), pytest.raises(TimeLimitExceeded, match="limit"):
        api.recommend({"workloads": [{"model": "qwen2-7b"}]})


# ---------------------------------------------------------------- defects found by the adversarial review
def test_mpt_heads_are_validated(tmp_path: Path) -> None:
    """MPT calls its heads n_heads; a 0 there divided by zero (exit 1) before the check knew the key."""
    preset = Path(api.__file__).parents[1] / "workload" / "model" / "presets" / "mpt-7b.json"
    config = {k: v for k, v in json.loads(preset.read_text()).items() if k != "_preset"}
    for bad in (0, "x", [1], 0.5, False):
        path = tmp_path / "config.json"
        path.write_text(json.dumps({**config, "n_heads": bad}))
        code, _, err = run("estimate", str(path), "--gpu", "rtx-4090", "--json")
        assert code == 2 and "'n_heads' must be a whole number" in err, (bad, err)


def test_a_zero_default_power_limit_is_not_a_crash(tmp_path: Path) -> None:
    snapshot = json.loads((Path(__file__).parent / "fixtures" / "snapshots" / "healthy-h100-sxm.json").read_text())
    snapshot["gpus"][0]["power_default_limit_w"] = 0
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snapshot))
    code, out, _ = run("doctor", "--from", str(path), "--json")
    assert code in (0, 1) and any(c["id"] == "power_limit" and c["status"] == "N/A"
                                  for c in json.loads(out)["checks"])


def test_outputs_never_replace_links_devices_or_pipes(tmp_path: Path) -> None:
    """An atomic rename over /dev/null, a FIFO or a symlink would replace it with a plain file (it did, as root)."""
    target = tmp_path / "real.md"
    target.write_text("keep")
    link = tmp_path / "link.md"
    link.symlink_to(target)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (link, fifo, Path(os.devnull)):
        code, _, err = run("recommend", "llama-3.2-1b", "--report", str(path))
        assert code == 2 and "not a plain file" in err, (path, err)
    assert link.is_symlink() and target.read_text() == "keep" and fifo.is_fifo()
    assert Path(os.devnull).is_char_device()


def test_the_report_never_overwrites_its_scenario(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("workloads:\n  - model: llama-3.2-1b\n")
    code, _, err = run("recommend", "--scenario", str(scenario), "--report", str(scenario))
    assert code == 2 and "is the --scenario file" in err and scenario.read_text().startswith("workloads")


def test_serve_sim_spreads_the_load_over_replicas() -> None:
    """--count 8 of single-GPU replicas takes 8x the rate one replica takes at the same latency."""
    one = api.serve_sim("llama-3.1-8b", gpu="h100-sxm-80gb", qps=4.0, requests=200)
    eight = api.serve_sim("llama-3.1-8b", gpu="h100-sxm-80gb", qps=32.0, requests=200, count=8)
    assert eight.replicas == 8 and eight.planned_qps == pytest.approx(8 * one.planned_qps)
    assert eight.at_rate.e2e_ms[1] == pytest.approx(one.at_rate.e2e_ms[1], rel=0.05)
    capped = api.serve_sim("llama-3.1-8b", gpu="h100-sxm-80gb", qps=4.0, requests=200, max_num_seqs=4)
    assert capped.max_batch == 4


def test_scale_takes_model_parallel_degrees() -> None:
    code, out, err = run("scale", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--tp", "2", "--json")
    assert code == 0, err
    assert json.loads(out)[0]["count"] == 2
    code, out, _ = run("scale", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--tokens", "1e9", "--json")
    assert all(r["epoch_time_s"] == pytest.approx(1e9 / r["tokens_per_s"], rel=1e-3) for r in json.loads(out))


def test_an_estimate_lies_inside_its_band() -> None:
    for model, task in (("bert-base-uncased", "infer"), ("vit-b-16", "infer"), ("llama-3.1-8b", "train")):
        _, out, _ = run("estimate", model, "--gpu", "h100-sxm-80gb", "--task", task, "--json")
        block = json.loads(out)["perf"][task]
        for key, likely in block["band"].items():
            assert likely["low"] <= block[key] <= likely["high"], (model, key)


def test_a_bare_group_prints_its_help_and_exits_0() -> None:
    """`gpuwise`, `gpuwise catalog` and `gpuwise fleet` with nothing after them show their help, not "error: "."""
    import subprocess
    import sys

    for args in ([], ["catalog"], ["fleet"]):
        done = subprocess.run([sys.executable, "-m", "gpuwise.cli.main", *args], capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 0 and "Usage:" in done.stdout and "error" not in done.stderr, args
