"""`gpuwise estimate`, `fit` and `models` as a user runs them: the contract, the errors, the settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuwise.cli.main import app

runner = CliRunner()
CONTRACT_MEMORY_KEYS = {"weights", "gradients", "optimizer", "activations", "kv_cache", "logits",
                        "framework_overhead"}


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_estimate_json_follows_the_contract() -> None:
    code, out, _ = run("estimate", "meta-llama/Llama-3.1-8B", "--gpu", "H100 SXM", "--task", "train",
                       "--method", "qlora", "--batch", "2", "--seq", "2048", "--json")
    doc = json.loads(out)
    assert code == 0
    assert doc["workload"]["model"] == "llama-3.1-8b" and doc["workload"]["params"] == 8_030_261_248
    assert doc["workload"]["task"] == "train"
    assert doc["hardware"] == {"gpu": "h100-sxm-80gb", "count": 1, "nodes": 1, "interconnect": "nvlink4",
                               "network": None}
    memory = doc["memory"]
    assert set(memory["breakdown_gb"]) >= CONTRACT_MEMORY_KEYS
    assert memory["per_gpu_gb"] == pytest.approx(sum(memory["breakdown_gb"].values()), abs=0.01)
    assert memory["capacity_gb"] == pytest.approx(80 * 2**30 / 1e9, rel=1e-3)
    assert memory["fits"] is True and memory["headroom_gb"] > 0
    train = doc["perf"]["train"]
    assert {"step_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "samples_per_s", "mfu"} <= set(train)
    assert "infer" not in doc["perf"] and "epoch_time_s" not in train  # absent keys are omitted, never zero
    assert train["tokens_per_s"] == pytest.approx(2 * 2048 / train["step_time_s"], rel=1e-3)
    assert doc["perf"]["bound"] in ("compute", "memory", "communication")
    cost = doc["cost"]  # the cheapest H100 SXM offer of the catalog, one GPU
    assert cost["usd_per_hour"] > 0 and cost["basis"].startswith("rent")
    assert "usd_per_job" not in cost  # no --tokens given
    assert doc["assumptions"]


def test_inference_json_reports_engine_reserve_and_concurrency() -> None:
    code, out, _ = run("estimate", "llama-3.1-70b", "--gpu", "h100-sxm-80gb", "--count", "4", "--tp", "4",
                       "--task", "infer", "--quant", "fp8", "--kv-dtype", "fp8", "--batch", "32",
                       "--input-len", "2048", "--output-len", "512", "--engine", "vllm", "--json")
    memory = json.loads(out)["memory"]
    assert code == 0 and memory["fits"]
    assert memory["engine_reserved_gb"] >= memory["per_gpu_gb"]
    assert memory["max_concurrency"] >= 32
    # fp8 KV with 4-way TP: 2 x 80 layers x (8/4) heads x 128 dims x 1 byte per token
    assert memory["kv_cache_mb_per_token"] == pytest.approx(2 * 80 * 2 * 128 / 1e6)
    infer = json.loads(out)["perf"]["infer"]
    assert {"ttft_ms", "tpot_ms", "decode_tokens_per_s", "output_tokens_per_s", "e2e_latency_ms"} <= set(infer)
    assert "samples_per_s" not in infer


def test_fit_table_and_changes() -> None:
    code, out, _ = run("fit", "llama-3.1-8b", "--gpu", "rtx-4090", "--seq", "4096")
    # a full fine-tune of 8B needs ~16 bytes per parameter of states alone: only adapters bring it under 24 GB
    assert code == 0 and "does not fit" in out
    assert "fits with: --method lora" in out or "fits with: --method qlora" in out


def test_fit_json_gives_largest_batch_and_accumulation() -> None:
    code, out, _ = run("fit", "qwen2.5-1.5b", "--gpu", "rtx-4090", "--method", "lora", "--seq", "1024",
                       "--global-batch", "64", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["largest_batch"] >= 1
    assert doc["gradient_accumulation"] * min(doc["largest_batch"], 1) >= 64


def test_emit_hf_prints_matching_settings() -> None:
    code, out, _ = run("fit", "qwen2-7b", "--gpu", "rtx-4070-ti-super", "--method", "qlora", "--grad-ckpt",
                       "--optimizer", "paged-adamw-8bit", "--lora-rank", "64", "--emit", "hf")
    assert code == 0
    for needle in ("BitsAndBytesConfig(", 'bnb_4bit_quant_type="nf4"', "bnb_4bit_use_double_quant=True",
                   "r=64", 'optim="paged_adamw_8bit"', "gradient_checkpointing=True"):
        assert needle in out
    compile(out, "<emitted>", "exec")  # it is valid Python


def test_models_lists_presets() -> None:
    code, out, _ = run("models", "--json")
    rows = json.loads(out)
    assert code == 0 and len(rows) >= 41
    assert {r["id"] for r in rows} >= {"llama-3.1-8b", "mixtral-8x7b", "sdxl", "flux.1-dev", "gromacs", "hpl"}


def test_local_config_json(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 4,
                                  "num_attention_heads": 8, "intermediate_size": 1024, "vocab_size": 1000}))
    code, out, _ = run("estimate", str(config), "--gpu", "t4", "--precision", "fp16", "--json")
    assert code == 0 and json.loads(out)["workload"]["params"] == 2 * 1000 * 512 + 4 * (
        4 * 512 * 512 + 3 * 512 * 1024 + 2 * 512) + 512


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("estimate", "llama-3.1-8", "--gpu", "rtx-4090"), "unknown model 'llama-3.1-8'; did you mean llama-3.1-8b"),
        (("estimate", "llama-3.1-8b", "--gpu", "rtx-4909"), "unknown GPU 'rtx-4909'; did you mean rtx-4090"),
        (("estimate", "llama-3.1-8b", "--gpu", "h100"), "ambiguous"),
        (("estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--batch", "0"), "--batch: Input should be greater"),
        (("estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--seq", "-5"), "--seq: Input should be greater"),
        (("estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--method", "dora"),
         "--method 'dora' is not accepted; use one of: full, lora, qlora"),
        (("estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--task", "infer", "--quant", "int3"),
         "--quant 'int3' is not accepted; use one of: fp32, bf16"),
        (("estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--task", "serve"), "--task 'serve' is not accepted"),
        (("estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--count", "3", "--tp", "2"), "not a multiple of --tp"),
        (("estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--offload", "optimizer"), "needs --zero 1, 2 or 3"),
        (("estimate", "/nonexistent/config.json", "--gpu", "rtx-4090"), "no such file"),
        (("serve-sim", "sdxl-unet", "--gpu", "rtx-4090"), "in Python gpuwise.api.image_estimate"),
        (("estimate", "sdxl", "--gpu", "rtx-4090", "--input-len", "64"), "--input-len does not apply to an image"),
        (("estimate", "sdxl", "--gpu", "rtx-4090", "--task", "train"), "modelled for generation: use --task infer"),
        (("estimate", "sdxl", "--gpu", "rtx-4090", "--resolution", "1000"), "--resolution: Input should be a multi"),
        (("estimate", "sdxl", "--gpu", "rtx-4090", "--offload", "optimizer"), "--offload 'optimizer' is not acc"),
        (("estimate", "qwen3-8b", "--gpu", "rtx-4090", "--steps", "20"), "--steps applies to image pipelines"),
        (("estimate", "llama-3.2-1b", "--gpu", "rtx-4090", "--decoder-seq", "4"), "--decoder-seq is an encoder-dec"),
        (("estimate", "llama-3.2-1b", "--gpu", "rtx-4090", "--task", "infer", "--loss", "fused"),
         "--loss applies to training"),
        (("estimate", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--task", "infer", "--count", "3", "--tp", "3"),
         "--tp 3 does not divide llama-3.1-8b's 32 attention heads"),  # 32 heads (config.json)
        (("estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--catalog", "/"), "is a folder; give a YAML file"),
        (("serve-sim", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--count", "3", "--tp", "3"), "does not divide"),
        (("estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--tokens", "inf"), "--tokens: Input should be a finite"),
        # a NaN rate once hung the simulator; an unbounded request count ran for ever
        (("serve-sim", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--qps", "nan"), "--qps: Input should be a finite"),
        (("serve-sim", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--qps", "0"), "--qps: Input should be greater"),
        (("serve-sim", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--requests", "100000000"),
         "--requests: Input should be less than or equal to 100000"),
        (("serve-sim", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--p99-ms", "inf"), "--p99-ms: Input should be"),
        # llama.cpp reads GGUF only (its docs/models.md); transformers dequantizes GGUF on a GPU (its GGUF docs)
        (("estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--task", "infer", "--engine", "llamacpp", "--quant",
          "awq-int4"), "llama.cpp runs GGUF files only"),
        (("estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--task", "infer", "--engine", "hf", "--quant",
          "gguf-q4_k_m"), "transformers dequantizes a GGUF checkpoint"),
        # a DES of 100,000 requests x 100,000 tokens would run for days: refused before it starts
        (("serve-sim", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--requests", "100000", "--output-len", "100000"),
         "more than the 1,000,000 tokens serve-sim simulates"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: tuple[str, ...], needle: str) -> None:
    code, out, err = run(*args)
    assert code == 2, (out, err)
    assert needle in err
    assert err.strip().count("\n") == 0 and "Traceback" not in err + out


def test_malformed_config_json_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "llama", "hidden_size": 4096,')
    code, _, err = run("estimate", str(bad), "--gpu", "rtx-4090")
    assert code == 2 and "not valid JSON" in err and bad.read_text().endswith(",")  # file untouched


@pytest.mark.parametrize(
    ("args", "warning"),
    [
        (("llama-2-7b", "--gpu", "h100-sxm-80gb", "--seq", "8192"), "exceeds llama-2-7b's 4096 positions"),
        (("llama-3.1-8b", "--gpu", "gaudi2", "--method", "qlora"), None),
        (("llama-3.1-8b", "--gpu", "v100-sxm2-32gb", "--method", "qlora"), "no BF16 tensor math"),
        (("llama-3.1-8b", "--gpu", "mi300x", "--precision", "fp8", "--method", "lora"), None),
        (("llama-3.1-8b", "--gpu", "a100-sxm-80gb", "--precision", "fp8"), "no FP8 tensor cores"),
    ],
)
def test_questionable_combinations_warn_but_answer(args: tuple[str, ...], warning: str | None) -> None:
    code, out, _ = run("estimate", *args, "--json")
    assert code == 0
    warnings = json.loads(out)["warnings"]
    if warning:
        assert any(warning in w for w in warnings), warnings


def test_qlora_on_a_card_without_bitsandbytes_warns(tmp_path: Path) -> None:
    patch = tmp_path / "stack.yaml"
    patch.write_text("gpus:\n  - id: mi250x\n    software: {bitsandbytes: false}\n")
    code, out, _ = run("estimate", "llama-3.1-8b", "--gpu", "mi250x", "--method", "qlora", "--precision", "fp16",
                       "--catalog", str(patch), "--json")
    assert code == 0
    assert any("QLoRA needs bitsandbytes, which has no rocm build for mi250x" in w for w in json.loads(out)["warnings"])


def test_scale_and_serve_sim_commands() -> None:
    code, out, _ = run("scale", "llama-3.2-1b", "--gpu", "a100-sxm-80gb", "--batch", "4", "--json")
    rows = json.loads(out)
    assert code == 0 and [r["count"] for r in rows] == [1, 2, 4, 8, 16, 32, 64]
    assert rows[0]["efficiency"] == pytest.approx(1.0)
    # one GPU runs plain PyTorch under autocast, several FSDP2 in bf16 (no per-layer casts, a bf16 residual stream):
    # the runtime change is said, and within one runtime more GPUs never raise a GPU's speed by more than sharding
    # the optimizer step gives (the step divides by the ranks)
    assert rows[0]["runtime"].startswith("PyTorch under torch.amp") and rows[1]["runtime"].startswith("FSDP2")
    assert all(r["efficiency"] <= rows[1]["efficiency"] * 1.05 for r in rows[1:])
    code, out, _ = run("serve-sim", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--qps", "5", "--p99-ms", "4000",
                       "--input-len", "512", "--output-len", "128", "--requests", "200", "--json")
    report = json.loads(out)
    assert code == 0 and report["max_qps"] > 5
    assert report["at_rate"]["e2e_ms"]["p99"] >= report["at_rate"]["e2e_ms"]["p50"]
    again = json.loads(run("serve-sim", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--qps", "5", "--p99-ms", "4000",
                           "--input-len", "512", "--output-len", "128", "--requests", "200", "--json")[1])
    assert again == report  # deterministic under the default seed


def test_cost_per_job_follows_the_epoch_time() -> None:
    _, out, _ = run("estimate", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--method", "lora", "--tokens", "1e8",
                    "--json")
    doc = json.loads(out)
    hours = doc["perf"]["train"]["epoch_time_s"] / 3600
    assert doc["cost"]["usd_per_job"] == pytest.approx(doc["cost"]["usd_per_hour"] * hours, rel=1e-3)


def test_serving_cost_per_million_tokens_counts_every_replica() -> None:
    # four 1-GPU replicas cost 4x one and make 4x the tokens: the price per token is the same
    one, four = (json.loads(run("estimate", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--task", "infer",
                                "--count", n, "--json")[1])["cost"] for n in ("1", "4"))
    assert four["usd_per_hour"] == pytest.approx(4 * one["usd_per_hour"], rel=0.35)  # 4-GPU offers may differ
    assert four["usd_per_million_tokens"] == pytest.approx(
        one["usd_per_million_tokens"] * (four["usd_per_hour"] / 4) / one["usd_per_hour"], rel=1e-3)
    assert "on-demand" in one["basis"] or "marketplace" in one["basis"] or "community" in one["basis"] \
        or "secure" in one["basis"]  # the offer's tier is named


def test_inference_refuses_flags_that_would_not_change_its_answer() -> None:
    """A replica's latency does not depend on how many machines hold the other replicas: --nodes and --network are
    refused for inference (and for fit, which answers memory), not silently ignored."""
    for command in (("estimate", "--task", "infer"), ("serve-sim", "--qps", "1"), ("fit",)):
        code, _, err = run(*command[:1], "llama-3.1-8b", "--gpu", "h100-sxm-80gb", *command[1:], "--count", "2",
                           "--nodes", "2")
        assert code == 2 and "--nodes:" in err and "leave it out" in err, (command, err)
    code, _, err = run("fit", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--tokens", "1e9")
    assert code == 2 and "--tokens" in err


def test_inference_replicas_are_reported() -> None:
    code, out, _ = run("estimate", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--task", "infer", "--count", "4",
                       "--tp", "2", "--json")
    assert code == 0 and json.loads(out)["perf"]["infer"]["replicas"] == 2


def test_fit_gives_no_accumulation_when_no_micro_batch_fits() -> None:
    # 70B parameters of mixed-precision full fine-tuning need over a terabyte: nothing fits on 12 GB
    code, out, _ = run("fit", "llama-3.1-70b", "--gpu", "rtx-3060-12gb", "--global-batch", "64", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["largest_batch"] == 0 and doc["gradient_accumulation"] is None
    code, out, _ = run("fit", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--method", "qlora", "--global-batch", "64",
                       "--json")
    doc = json.loads(out)
    assert doc["largest_batch"] >= 1 and doc["gradient_accumulation"] == 64  # --batch 1 per step: 64 steps


@pytest.mark.parametrize(("args", "needle"), [
    # a command has no option for another command's flag; the error says which commands take it
    (("fit", "llama-3.1-8b", "--gpu", "rtx-4090", "--qps", "5"),
     "No such option: --qps; it applies to gpuwise recommend, gpuwise serve-sim"),
    (("estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--quant", "awq-int4"), "add --task infer"),
    (("serve-sim", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--method", "qlora"), "No such option: --method"),
    (("scale", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--budget-usd", "5000"), "applies to gpuwise recommend"),
    (("fit", "llama-3.1-8b", "--gpu", "rtx-4090", "--calibration", "cal.json"), "No such option: --calibration"),
    (("scale", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--count", "4"), "No such option: --count"),
    (("recommend", "llama-3.1-8b", "--gpu", "rtx-4090"), "No such option: --gpu"),
    (("recommend", "llama-3.1-8b", "--task", "infer", "--tp", "2"), "leave --tp out"),
    (("serve-sim", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--task", "train"), "No such option: --task"),
    (("fit", "llama-3.1-8b", "--gpu", "rtx-4090", "--task", "infer", "--emit", "hf"), "applies to --task train"),
])
def test_a_flag_the_command_would_ignore_is_refused(args: tuple[str, ...], needle: str) -> None:
    code, out, err = run(*args)
    assert code == 2 and needle in err, err
    assert err.strip().count("\n") == 0 and "Traceback" not in err + out


def test_flags_a_command_uses_are_accepted() -> None:
    # the other side of the refusal: serve-sim is inference, so --quant is fine
    code, _, err = run("serve-sim", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--quant", "fp8",
                       "--requests", "40", "--json")
    assert code == 0, err
    code, _, err = run("scale", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--method", "lora", "--json")
    assert code == 0, err


def test_a_job_that_does_not_fit_gives_its_speed_only_as_if_it_fit() -> None:
    """issue 36: "189 tok/s" beside "does not fit". An 8B LoRA at seq 2048 holds its 16-bit base alone
    (8.03e9 x 2 bytes = 14.96 GiB) plus activations and logits past a 24 GiB card; on an 80 GiB card it fits."""
    code, out, _ = run("estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--method", "lora", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["memory"]["fits"] is False and doc["perf"]["if_it_fit"] is True
    text = runner.invoke(app, ["estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--method", "lora"],
                         env={"COLUMNS": "200"}).stdout
    speed = [line for line in text.splitlines() if "tokens/s" in line and "step" in line]
    assert speed and all(line.startswith("speed if it fit (it does not") for line in speed)
    fits = json.loads(run("estimate", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--method", "lora", "--json")[1])
    assert fits["memory"]["fits"] is True and "if_it_fit" not in fits["perf"]


def test_an_apple_estimate_has_no_cuda_context() -> None:
    """Metal makes no CUDA context: the same llama.cpp job holds exactly 357 MiB (HF 'Model training anatomy')
    + 32 MiB (PyTorch's cuBLAS workspace) less than on an RTX 4090, and neither the table nor the notes name CUDA;
    DGX Spark shares its memory too but runs CUDA, and keeps the row."""
    job = ("--task", "infer", "--engine", "llamacpp", "--json")
    mac = json.loads(run("estimate", "llama-3.1-8b", "--gpu", "apple-m4-max-128gb", *job)[1])["memory"]
    nvidia = json.loads(run("estimate", "llama-3.1-8b", "--gpu", "rtx-4090", *job)[1])["memory"]
    spark = json.loads(run("estimate", "llama-3.1-8b", "--gpu", "dgx-spark-128gb", *job)[1])["memory"]
    assert nvidia["per_gpu_gib"] - mac["per_gpu_gib"] == pytest.approx((357 + 32) / 1024, abs=1e-3)
    assert mac["breakdown_gib"]["framework_overhead"] == 0 and "cuda_context_gb" not in mac
    assert spark["breakdown_gib"]["framework_overhead"] == pytest.approx((357 + 32) / 1024, abs=1e-3)
    for args in (("--task", "train", "--method", "lora"), ("--task", "infer")):
        text = runner.invoke(app, ["estimate", "llama-3.1-8b", "--gpu", "apple-m4-max-128gb", *args]).stdout
        said = [line for line in text.splitlines() if "CUDA context" in line]
        assert said and all("no CUDA context" in line for line in said)  # the note saying so, no row, no MiB
    image = runner.invoke(app, ["estimate", "sdxl", "--gpu", "apple-m4-max-128gb"]).stdout
    assert "CUDA context, workspaces" not in image


def test_the_defaults_a_cost_rests_on_are_said_first() -> None:
    """What the user left free and the figures rest on opens the answer: lengths and batch, the missing --tokens,
    and the price's basis (an owned Mac: the TCO's 8 h/day over 3 years)."""
    infer = runner.invoke(app, ["estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--task", "infer", "--input-len",
                                "2000"], env={"COLUMNS": "200"}).stdout
    first = infer.splitlines()[0]
    assert first.startswith("defaults you left:") and "--output-len 256" in first and "--batch 1" in first
    assert "--input-len" not in first and "cheapest rented offer" in first
    train = runner.invoke(app, ["estimate", "llama-3.1-8b", "--gpu", "apple-m4-max-128gb", "--method", "lora"],
                          env={"COLUMNS": "200"}).stdout.splitlines()[0]
    assert "--seq 2048" in train and "no --tokens" in train and "8 h/day" in train
    doc = json.loads(run("estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--tokens", "1e9", "--seq", "4096",
                         "--json")[1])
    assert doc["defaults"] == {"batch": 1}


@pytest.mark.parametrize("args", [("llama-3.1-8b", "--gpu", "rtx-4090", "--method", "lora"),
                                  ("llama-3.1-70b", "--gpu", "h100-sxm-80gb", "--count", "4", "--tp", "4",
                                   "--task", "infer", "--quant", "fp8")])
def test_an_estimate_fits_80_columns_without_cutting_a_figure(args: tuple[str, ...]) -> None:
    text = runner.invoke(app, ["estimate", *args], env={"COLUMNS": "80"}).stdout
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
