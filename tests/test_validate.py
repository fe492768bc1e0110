"""`gpuwise validate` on the CPU with tiny configs (a dense model, an MoE, LoRA): it really runs the model's own
transformers code, and its measured peak is checked against independent truths -- the bytes a full AdamW step must
hold (4 + 4 + 8 per fp32 parameter), the fake-tensor trace of the same step (PyTorch's MemTracker), bf16 weights
for generation -- and its record is what `estimate --calibration` reads."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("transformers")

from gpuwise import api
from gpuwise.api.validation import calibration_from
from gpuwise.catalog import load_catalog
from gpuwise.cli.main import app
from gpuwise.errors import ConfigError, ProbeUnavailable
from gpuwise.estimate.roofline import machine
from gpuwise.workload.jobs.job import TrainJob
from gpuwise.workload.trace.steps import trace_training

runner = CliRunner()
TINY = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000,
        "max_position_embeddings": 512}
TINY_MOE = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
            "intermediate_size": 256, "moe_intermediate_size": 64, "num_experts": 8, "num_experts_per_tok": 2,
            "vocab_size": 1000, "max_position_embeddings": 512}
QUICK = {"device": "cpu", "steps": 1, "warmup": 0}


def _config(tmp_path: Path, config: dict[str, object]) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return str(path)


def test_a_full_training_step_holds_at_least_weights_gradients_and_adam_states(tmp_path: Path) -> None:
    done = api.validate(_config(tmp_path, TINY), run=QUICK, batch=2, seq=64)
    params = api.model(_config(tmp_path, TINY)).total_params
    measured = done.run.peak_allocated_bytes
    assert measured >= 16 * params  # fp32 weights, gradients, AdamW's two moments
    traced = trace_training(TINY, TrainJob(batch=2, seq=64)).peak_allocated_bytes
    assert measured == pytest.approx(traced, rel=0.05)  # the same step on fake tensors
    assert set(done.measured) == set(done.predicted) and done.measured["step_s"]
    assert done.errors["peak_allocated_gib"] is not None and abs(done.errors["peak_allocated_gib"]) < 0.25
    parts = done.record()["terms"]["memory_parts_gib"]  # the peak by kind, measured and predicted
    assert parts["measured"]["optimizer"] == pytest.approx(8 * params / 2**30, rel=0.01)  # AdamW's two fp32 moments
    assert parts["predicted"]["optimizer"] == pytest.approx(parts["measured"]["optimizer"], rel=0.01)


def test_an_moe_and_lora_run_too(tmp_path: Path) -> None:
    # pure bf16: the fake-tensor trace of grouped expert matmuls takes bf16 inputs only
    moe = api.validate(_config(tmp_path, TINY_MOE), run=QUICK, batch=2, seq=32, precision="pure-bf16")
    traced = trace_training(TINY_MOE, TrainJob(batch=2, seq=32, precision="pure-bf16")).peak_allocated_bytes
    assert moe.run.peak_allocated_bytes == pytest.approx(traced, rel=0.05)
    lora = api.validate(_config(tmp_path, TINY), run=QUICK, method="lora", lora_rank=8, batch=2, seq=64)
    params = api.model(_config(tmp_path, TINY)).total_params
    assert 2 * params <= lora.run.peak_allocated_bytes < 16 * params  # a bf16 base, no states for it


TINY_VIT = {"model_type": "vit", "architectures": ["ViTForImageClassification"], "hidden_size": 64,
            "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128, "image_size": 64,
            "patch_size": 16, "num_channels": 3, "num_labels": 10}


def test_a_vision_model_trains_on_images(tmp_path: Path) -> None:
    done = api.validate(_config(tmp_path, TINY_VIT), run=QUICK, batch=4)
    params = api.model(_config(tmp_path, TINY_VIT)).total_params
    assert done.run.peak_allocated_bytes >= 16 * params  # fp32 weights, gradients and AdamW's two moments
    assert set(done.measured) == {"peak_allocated_gib", "peak_reserved_gib", "step_s", "samples_per_s"}
    assert done.measured["samples_per_s"] == pytest.approx(4 / done.run.step_s)


def test_generate_is_timed_as_prefill_and_decode(tmp_path: Path) -> None:
    done = api.validate(_config(tmp_path, TINY), task="infer", run=QUICK, batch=2, input_len=32, output_len=4)
    params = api.model(_config(tmp_path, TINY)).total_params
    assert done.run.peak_allocated_bytes >= 2 * params  # bf16 weights
    prefill, whole, per_token = (done.measured[k] for k in ("prefill_s", "generate_s", "decode_s_per_token"))
    assert prefill and whole and prefill > 0 and whole > 0
    # the decode is what the whole generate took beyond its first token, per further token (arithmetic on the two
    # timings, never a comparison of them: a loaded machine may time the whole no slower than one token, and then
    # there is no decode time rather than a negative one)
    if per_token is None:
        assert whole <= prefill
    else:
        assert per_token > 0 and per_token == pytest.approx((whole - prefill) / 3)
    assert done.job.engine == "hf"  # type: ignore[union-attr]


def test_the_cli_prints_both_and_saves_a_record(tmp_path: Path) -> None:
    record = tmp_path / "run.json"
    result = runner.invoke(app, ["validate", _config(tmp_path, TINY), "--device", "cpu", "--steps", "1", "--warmup",
                                 "0", "--batch", "2", "--seq", "64", "--save", str(record), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert set(doc["measured"]) == set(doc["predicted"]) == set(doc["error"])
    saved = json.loads(record.read_text())
    assert saved["kind"] == "gpuwise-validate" and saved["gpu"] == "host-cpu"
    assert saved["runtime"]["torch"] and saved["job_class"] == "train-full"
    table = runner.invoke(app, ["validate", _config(tmp_path, TINY), "--device", "cpu", "--steps", "1", "--warmup",
                                "0", "--batch", "2", "--seq", "64"])
    assert table.exit_code == 0 and "measured" in table.output and "predicted" in table.output


def test_a_record_recalibrates_the_mechanism_that_bounds_the_step(tmp_path: Path) -> None:
    """Each bound recalibrates its own mechanism by predicted / measured: the achieved matmul rate (compute), the
    achieved bandwidth (memory), the host's seconds per dispatched operator (an eager runtime's floor)."""
    catalog = load_catalog()
    h100, l4 = catalog.gpus["h100-sxm-80gb"], catalog.gpus["l4"]
    compute = api.estimate("llama-3.2-1b", gpu="h100-sxm-80gb", method="full", batch=8, seq=2048)
    memory = api.estimate("llama-3.1-8b", gpu="l4", method="lora", batch=4, seq=1024)
    host = api.estimate("llama-3.1-8b", gpu="h100-sxm-80gb", task="infer", engine="hf", batch=1, quant="bf16")
    assert [e.perf.bound for e in (compute, memory, host)] == ["compute", "memory", "host"]  # type: ignore[union-attr]
    m = machine(h100, "bf16")
    found = calibration_from(compute, measured_s=2.0, predicted_s=1.0)
    assert found["gemm_tflops"]["bf16"] == pytest.approx(m.peak_flops * m.gemm_efficiency * m.shape_fraction / 2e12)
    assert calibration_from(memory, measured_s=2.0, predicted_s=1.0)["memory_gb_s"] == pytest.approx(
        machine(l4, "bf16").memory_bytes_per_s / 2e9)
    assert calibration_from(host, measured_s=2.0, predicted_s=1.0)["host_op_s"] == pytest.approx(2 * 30e-6)
    record = {"kind": "gpuwise-validate", "gpu": "l4", "job_class": "train-lora", "taken_at": "now",
              "calibration": {"bound": "memory", "predicted_over_measured": 0.5,
                              **calibration_from(memory, measured_s=2.0, predicted_s=1.0)}}
    path = tmp_path / "l4.json"
    path.write_text(json.dumps(record))
    slower = api.estimate("llama-3.1-8b", gpu="l4", method="lora", batch=8, seq=1024, calibration=path)
    plain = api.estimate("llama-3.1-8b", gpu="l4", method="lora", batch=8, seq=1024)
    assert slower.perf.tokens_per_s < plain.perf.tokens_per_s  # type: ignore[union-attr]
    assert any("calibrated by validate run l4.json" in a for a in slower.perf.assumptions)  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="measured on l4"):
        api.estimate("llama-3.1-8b", gpu="rtx-4090", method="lora", calibration=path)


def test_it_refuses_before_allocating_and_names_what_is_missing(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    big = runner.invoke(app, ["validate", "llama-3.1-405b", "--device", "cpu", "--batch", "8", "--seq", "4096"])
    assert big.exit_code == 2 and "not run" in big.output
    cuda = runner.invoke(app, ["validate", _config(tmp_path, TINY), "--device", "cuda:0", "--json"])
    assert cuda.exit_code != 0 and json.loads(cuda.output.splitlines()[0])["error"]
    monkeypatch.setitem(sys.modules, "peft", None)
    with pytest.raises(ProbeUnavailable, match="PEFT"):
        api.validate(_config(tmp_path, TINY), run=QUICK, method="lora")


def test_fleet_report_finds_the_node_whose_validated_step_is_slow(tmp_path: Path) -> None:
    """Three nodes ran the same validate job on the same card; one took 1.5x the others' step: 33 % fewer steps per
    second than the median, a FAIL (a fifth below), with its step time and the median's in the detail."""
    base = api.validate(_config(tmp_path, TINY), run=QUICK, batch=2, seq=64).record()
    for node, step in (("a", 0.10), ("b", 0.11), ("c", 0.15)):
        folder = tmp_path / "fleet" / node
        folder.mkdir(parents=True)
        record = {**base, "gpu": "h100-sxm-80gb", "measured": {**base["measured"], "step_s": step}}
        (folder / "validate-tiny.json").write_text(json.dumps(record))
    report = api.fleet_report(tmp_path / "fleet")
    verdicts = {n.name: n.verdict for n in report.nodes}
    assert verdicts == {"a": "PASS", "b": "PASS", "c": "FAIL"}
    slow = next(o for n in report.nodes if n.name == "c" for o in n.outliers)
    assert "0.150 s" in slow.detail and "0.110 s" in slow.detail


H200_RUNS = Path(__file__).parent.parent / "benchmarks" / "results" / "h200-2026-11-29" / "training.jsonl"


def _h200(batch: int, seq: int, ckpt: str) -> float:
    """The median step of a real run recorded on an H200 (benchmarks/measure_training.py: fp32 weights under bf16
    autocast, fused AdamW, SDPA -- gpuwise's default training job)."""
    for line in H200_RUNS.read_text().splitlines():
        run = json.loads(line)
        if (run["preset"], run["batch"], run["seq"], run["ckpt"]) == ("llama-3.2-1b", batch, seq, ckpt):
            return float(run["step_s_median"])
    raise LookupError(f"no recorded llama-3.2-1b run at batch {batch}, seq {seq}, ckpt {ckpt}")


@pytest.mark.parametrize(("batch", "seq", "ckpt"), [(16, 1024, "none"), (8, 2048, "full")])
def test_a_record_at_one_batch_brings_the_prediction_at_another_closer(tmp_path: Path, batch: int, seq: int,
                                                                        ckpt: str) -> None:
    """A validate record made from the H200's measured step at batch 4 recalibrates the mechanism that bound the
    predicted step; the prediction for another recorded run of the same model (batch 16 at seq 1024, or batch 8
    with full checkpointing) made with it lands nearer that run's measured step than the plain prediction. Recorded
    measurements, so nothing here is timed on the CI machine (the timed version: benchmarks/validate_recalibration.py).
    """
    seen = _h200(4, 2048, "none")
    at_four = api.estimate("llama-3.2-1b", gpu="h200-sxm-141gb", batch=4, seq=2048)
    mechanism = calibration_from(at_four, measured_s=seen, predicted_s=at_four.perf.step_time_s)  # type: ignore[union-attr]
    record = tmp_path / "b4.json"
    record.write_text(json.dumps({"kind": "gpuwise-validate", "gpu": "h200-sxm-141gb", "job_class": "train-full",
                                  "taken_at": "2026-11-29", "calibration": mechanism}))
    plain = api.estimate("llama-3.2-1b", gpu="h200-sxm-141gb", batch=batch, seq=seq, ckpt=ckpt)
    calibrated = api.estimate("llama-3.2-1b", gpu="h200-sxm-141gb", batch=batch, seq=seq, ckpt=ckpt,
                              calibration=record)
    measured = _h200(batch, seq, ckpt)

    def off(result: Any) -> float:  # how many times off, either way
        return abs(math.log(result.perf.step_time_s / measured))

    assert off(calibrated) < off(plain)


def test_help_lists_only_the_flags_a_run_on_one_device_uses() -> None:
    """issue 36: validate --help listed --nodes, --network and --n-cpu-moe; the run is one device's transformers
    step or generate, so cluster, parallelism, sharding, offload and engine flags are not offered, and typing one
    is a one-line error (exit 2) naming the commands that take it."""
    text = runner.invoke(app, ["validate", "--help"], env={"COLUMNS": "200"}).output
    offered = set(re.findall(r"(--[a-z][a-z0-9-]+)", text))
    assert {"--batch", "--seq", "--method", "--precision", "--lora-rank", "--input-len", "--output-len", "--device",
            "--save"} <= offered
    unused = {"--nodes", "--network", "--n-cpu-moe", "--count", "--tp", "--pp", "--zero", "--offload", "--engine",
              "--kv-dtype", "--mem-fraction", "--spec-tokens", "--slot-link", "--compile"}
    assert not offered & unused
    refused = runner.invoke(app, ["validate", "llama-3.2-1b", "--nodes", "2", "--json"])
    assert refused.exit_code == 2 and "--nodes" in json.loads(refused.stdout)["error"]


def test_inference_runs_without_naming_an_engine(tmp_path: Path) -> None:
    """The run is transformers' generate; `--task infer` alone was refused until --engine hf was typed."""
    done = runner.invoke(app, ["validate", _config(tmp_path, TINY), "--task", "infer", "--device", "cpu", "--steps",
                               "1", "--warmup", "0", "--input-len", "16", "--output-len", "2", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["job"]["engine"] == "hf"
