"""--emit vllm|sglang|llamacpp: each emitted flag is one the engine's parser defines (runtimes/launch.py cites the
file at a commit; where vLLM is installed, its own `vllm serve` parser reads the command), each value is the setting
the estimate assumed, and a quantized format names a real pre-quantized repository (its model card cited here) or is
refused in one line."""

from __future__ import annotations

import argparse
import importlib
import json
import re
import shlex
import typing
import warnings
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.cli.main import app
from gpuwise.runtimes.launch import LAUNCHES
from gpuwise.workload.jobs.job import Quant
from gpuwise.workload.model.presets import presets
from gpuwise.workload.model.quantized import GGUF_TAGS, quantized_checkpoints

runner = CliRunner()
HF_REPO = re.compile(r"^[\w.-]+/[\w.-]+$")  # <user>/<model>, as the Hub spells a repository id


def _text(*args: str) -> str:
    result = runner.invoke(app, ["estimate", *args])
    assert result.exit_code == 0, result.output
    return result.output.strip()


def _command(text: str) -> list[str]:
    """The command line under the comment lines that explain it."""
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert len(lines) == 1, text
    return shlex.split(lines[0])


def _flags(words: list[str], program_words: int) -> dict[str, str]:
    rest = words[program_words:]
    return dict(zip(rest[::2], rest[1::2], strict=True))


def _refused(*args: str) -> str:
    result = runner.invoke(app, ["estimate", *args])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    return result.output


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_serving_engines_command_carries_only_its_documented_flags(engine: str) -> None:
    """FP8 of the base Llama 3.1 70B is Red Hat's compressed-tensors checkpoint
    (https://huggingface.co/RedHatAI/Meta-Llama-3.1-70B-FP8); the engine reads its format from config.json, so no
    --quantization is added (SGLang's quantization docs: 'do not add --quantization' for pre-quantized models)."""
    text = _text("meta-llama/Llama-3.1-70B", "--gpu", "h100-sxm-80gb", "--task", "infer", "--tp", "4", "--count",
                 "4", "--batch", "64", "--quant", "fp8", "--kv-dtype", "fp8", "--input-len", "1000", "--output-len",
                 "200", "--engine", engine, "--emit", engine)
    spec = LAUNCHES[engine]
    program = len(spec.program.split())
    words = _command(text)
    assert words[program - 1] == "RedHatAI/Meta-Llama-3.1-70B-FP8"
    flags = _flags(words, program)
    assert set(flags) <= spec.documented and spec.flags["quant"] not in flags
    tp, seqs, kv = spec.flags["tp"], spec.flags["max_num_seqs"], spec.flags["kv"]
    assert (flags[tp], flags[seqs], flags[spec.flags["context"]]) == ("4", "64", "1200")
    # vLLM's gpu_memory_utilization defaults to 0.9, SGLang's fp8 KV cache is fp8_e4m3
    assert flags[kv] == {"vllm": "fp8", "sglang": "fp8_e4m3"}[engine]
    assert "1,000-token prompt and 200 output tokens" in text  # the context says what it holds


def test_nvfp4_of_a_model_with_no_known_nvfp4_checkpoint_is_refused_not_served_in_bf16() -> None:
    """The issue's command: the bf16 repository (141 GB) onto two 32 GB cards. No NVFP4 quantization of Llama 3.1 70B
    is listed and vLLM cannot quantize to NVFP4 on load, so nothing is emitted; the line names what is listed."""
    output = _refused("llama-3.1-70b", "--gpu", "rtx-5090", "--count", "2", "--tp", "2", "--quant", "nvfp4",
                      "--task", "infer", "--emit", "vllm")
    assert "nvfp4" in output and "awq-int4" in output and "not emitted" in output


def test_nvfp4_serves_nvidias_modelopt_checkpoint_with_the_flag_vllm_documents() -> None:
    """https://huggingface.co/nvidia/Llama-3.3-70B-Instruct-FP4 (ModelOpt); vLLM's modelopt.md: 'NVFP4: ModelOpt NVFP4
    checkpoints (use quantization="modelopt_fp4")'."""
    words = _command(_text("llama-3.3-70b", "--gpu", "rtx-5090", "--count", "2", "--tp", "2", "--quant", "nvfp4",
                           "--task", "infer", "--emit", "vllm"))
    assert words[2] == "nvidia/Llama-3.3-70B-Instruct-FP4"
    assert _flags(words, 3)["--quantization"] == "modelopt_fp4" in LAUNCHES["vllm"].quant_values


def test_awq_serves_an_awq_repository_and_says_it_is_the_instruct_model() -> None:
    """--quantization awq on the bf16 repository is what vLLM rejects; the AWQ checkpoint is hugging-quants'
    (https://huggingface.co/hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4), of the Instruct model while the
    preset is the base: the comment says so."""
    text = _text("llama-3.1-70b", "--gpu", "h100-sxm-80gb", "--count", "2", "--tp", "2", "--quant", "awq-int4",
                 "--task", "infer", "--emit", "vllm")
    words = _command(text)
    assert words[2] == "hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4" and "--quantization" not in words
    assert "the instruct model, not meta-llama/Llama-3.1-70B" in text


def test_fp8_with_no_listed_checkpoint_is_quantized_on_load_only_where_the_16_bit_weights_load() -> None:
    """vLLM's fp8.md: '--quantization="fp8"' quantizes a BF16 model on load, and 'we load the model at original
    precision before quantizing ... you need enough memory to load the whole model': Qwen3-32B's 65.5 GB of bf16
    fit an 80 GB H100, but not half of them each on two 24 GB cards."""
    words = _command(_text("qwen3-32b", "--gpu", "h100-sxm-80gb", "--quant", "fp8", "--task", "infer", "--emit",
                           "vllm"))
    assert words[2] == "Qwen/Qwen3-32B" and _flags(words, 3)["--quantization"] == "fp8"
    output = _refused("qwen3-32b", "--gpu", "rtx-4090", "--count", "2", "--tp", "2", "--quant", "fp8", "--task",
                      "infer", "--emit", "vllm")
    assert "16-bit" in output and "fp8-block" in output  # Qwen's own FP8 release is listed as fp8-block


def test_llama_server_gets_a_gguf_repository_with_its_quant_tag() -> None:
    """llama.cpp common/arg.cpp: -hf <user>/<model>[:quant]; Qwen's GGUF card shows
    `llama-server -hf Qwen/Qwen3-32B-GGUF:Q4_K_M` (https://huggingface.co/Qwen/Qwen3-32B-GGUF)."""
    words = _command(_text("qwen3-32b", "--gpu", "rtx-4090", "--task", "infer", "--engine", "llamacpp", "--quant",
                           "gguf-q4_k_m", "--emit", "llamacpp"))
    assert words[:3] == ["llama-server", "-hf", "Qwen/Qwen3-32B-GGUF:Q4_K_M"]


def test_llama_server_without_a_listed_gguf_gets_a_path_to_fill_and_how_to_make_it() -> None:
    text = _text("qwen3-8b", "--gpu", "rtx-4090", "--task", "infer", "--engine", "llamacpp", "--quant", "gguf-q8_0",
                 "--emit", "llamacpp")
    words = _command(text)
    assert words[:2] == ["llama-server", "-m"] and words[2].endswith("-Q8_0.gguf") and "-hf" not in words
    assert "convert_hf_to_gguf.py" in text and words[2] in text.splitlines()[0]


def test_llama_server_sizes_its_context_for_every_slot() -> None:
    """llama-server's -c is the context all -np slots share (tools/server README: 'the context size is divided
    among the slots'): two slots of 1,280 tokens need -c 2560. gpt-oss's GGUF is ggml-org's
    (https://huggingface.co/ggml-org/gpt-oss-120b-GGUF), one MXFP4 quantization, so no tag."""
    words = _command(_text("openai/gpt-oss-120b", "--gpu", "rtx-5090", "--task", "infer", "--engine", "llamacpp",
                           "--n-cpu-moe", "24", "--batch", "2", "--kv-dtype", "q8_0", "--emit", "llamacpp"))
    assert words[:3] == ["llama-server", "-hf", "ggml-org/gpt-oss-120b-GGUF"]
    flags = _flags(words, 3)
    assert set(flags) <= LAUNCHES["llamacpp"].documented
    assert (flags["-np"], flags["-c"], flags["-ctk"], flags["--n-cpu-moe"]) == ("2", "2560", "q8_0", "24")


def test_serving_limits_come_from_the_request() -> None:
    """--max-model-len holds the prompt and output asked for; --max-num-seqs is the batch estimated."""
    text = _text("llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--task", "infer", "--input-len", "3000", "--output-len",
                 "500", "--batch", "16", "--emit", "vllm")
    flags = _flags(_command(text), 3)
    assert (flags["--max-model-len"], flags["--max-num-seqs"]) == ("3500", "16")
    assert int(flags["--max-num-batched-tokens"]) >= 16  # vLLM's SchedulerConfig: tokens per step >= sequences


def test_a_request_longer_than_the_models_positions_is_refused() -> None:
    output = _refused("llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--task", "infer", "--input-len", "200000",
                      "--emit", "vllm")
    assert "131,072 positions" in output  # config.json max_position_embeddings


def test_a_job_that_does_not_fit_is_not_emitted_and_the_error_names_fits_fix() -> None:
    args = ("qwen3-32b", "--gpu", "rtx-4090", "--task", "infer", "--engine", "llamacpp")
    fit = runner.invoke(app, ["fit", *args, "--json"])
    changes = json.loads(fit.output)["plan"]
    assert changes
    output = _refused(*args, "--emit", "llamacpp")
    assert "does not fit" in output and " ".join(changes) in output


def test_emit_needs_the_engine_it_launches() -> None:
    result = runner.invoke(app, ["estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--task", "infer", "--emit",
                                 "sglang"])
    assert result.exit_code == 2 and "--engine sglang" in result.output


def test_recommend_emits_each_serving_options_launch_at_its_planned_batch() -> None:
    """Each option's replica as vLLM starts it: its TP and format, and as many sequences as it was planned to batch
    under load -- the engine's cap on that card (vLLM: 1,024 on cards of 70 GiB or more, else 256) or the whole
    sequences its KV cache holds, where fewer (what `estimate` reports as 'room for N sequences')."""
    result = runner.invoke(app, ["recommend", "llama-3.1-8b", "--task", "infer", "--qps", "5", "--rent", "--top",
                                 "3", "--emit", "vllm", "--json"])
    assert result.exit_code == 0, result.output
    options = json.loads(result.output)["options"]
    assert options and all("launch" in o for o in options)
    for option in options:
        words = _command(option["launch"][0])
        assert words[:2] == ["vllm", "serve"] and HF_REPO.match(words[2])
        flags = _flags(words, 3)
        assert set(flags) <= LAUNCHES["vllm"].documented
        settings = option["settings"][0]
        room = _room(option["gpu"], settings)
        assert int(flags["--max-num-seqs"]) == min(room, _vllm_cap(option["gpu"])) > 1
        assert flags.get("--tensor-parallel-size", "1") == str(settings["tp"])


def _vllm_cap(gpu: str) -> int:
    """vllm/engine/arg_utils.py _set_default_args: 'if device_memory >= 70 * GiB_bytes and "a100" not in
    device_name' max_num_seqs 1024 for the OpenAI server, else 256."""
    card = api.load_catalog().gpu(gpu)
    return 1024 if card.usable_memory_bytes >= 70 * 2**30 and "a100" not in card.name.lower() else 256


def _room(gpu: str, settings: dict[str, Any]) -> int:
    estimate = runner.invoke(app, ["estimate", "llama-3.1-8b", "--gpu", gpu, "--task", "infer", "--quant",
                                   settings["quant"], "--tp", str(settings["tp"]), "--count", str(settings["tp"]),
                                   "--json"])
    return int(json.loads(estimate.output)["memory"]["max_concurrency"])


def test_every_listed_checkpoint_belongs_to_its_preset_and_an_engine_can_load_it() -> None:
    """The table against the presets and the engines: a preset that exists, a format --quant takes, a base model that
    is one of the preset's own repositories, a GGUF tag that is the format's, a method some engine reads."""
    methods = {m for spec in LAUNCHES.values() for m in spec.loads}
    formats = set(typing.get_args(Quant))
    for (preset, quant), listed in quantized_checkpoints().items():
        assert quant in formats and listed.method in methods, (preset, quant)
        assert listed.quantizes.lower() in {h.lower() for h in presets()[preset].hub_ids}, (preset, quant)
        assert HF_REPO.match(listed.repo) and listed.source.startswith("https://huggingface.co/")
        if quant in GGUF_TAGS:
            assert listed.tag == GGUF_TAGS[quant]


def _vllm_parser() -> tuple[Any, list[str], tuple[str, ...]]:
    """`vllm serve`'s own argument parser (vllm/entrypoints/cli/serve.py), on the CPU platform vLLM itself falls back
    to for `vllm bench` when no GPU is found (vllm/entrypoints/cli/main.py); and the --quantization and
    --kv-cache-dtype values its configs accept (the parser takes any string for these)."""
    pytest.importorskip("vllm", reason="vLLM not installed: its flags are checked against the set cited at a commit")
    with warnings.catch_warnings():  # its import warns of torch APIs it uses (DeprecationWarning): not ours to fix
        warnings.simplefilter("ignore", DeprecationWarning)
        cpu = importlib.import_module("vllm.platforms.cpu").CpuPlatform()
        setattr(importlib.import_module("vllm.platforms"), "_current_platform", cpu)  # noqa: B010
        cache = importlib.import_module("vllm.config.cache")
        serve = importlib.import_module("vllm.entrypoints.cli.serve")
        methods = importlib.import_module("vllm.model_executor.layers.quantization").QUANTIZATION_METHODS
        parser = importlib.import_module("vllm.utils.argparse_utils").FlexibleArgumentParser()
    serve.ServeSubcommand().subparser_init(parser.add_subparsers(dest="subparser"))
    return parser, list(methods), typing.get_args(cache.CacheDType)


def test_vllms_own_parser_reads_every_emitted_command() -> None:
    parser, methods, kv_dtypes = _vllm_parser()
    for args in (("llama-3.3-70b", "--gpu", "rtx-5090", "--count", "2", "--tp", "2", "--quant", "nvfp4"),
                 ("qwen3-32b", "--gpu", "h100-sxm-80gb", "--quant", "fp8", "--kv-dtype", "fp8", "--batch", "8"),
                 ("llama-3.1-70b", "--gpu", "h100-sxm-80gb", "--count", "2", "--tp", "2", "--quant", "awq-int4")):
        words = _command(_text(*args, "--task", "infer", "--emit", "vllm"))
        parsed = parser.parse_args(words[1:])
        flags = _flags(words, 3)
        assert parsed.model_tag == words[2] and parsed.max_model_len == int(flags["--max-model-len"])
        assert parsed.quantization == flags.get("--quantization") and parsed.quantization in (None, *methods)
        assert parsed.kv_cache_dtype in kv_dtypes


def test_sglangs_own_parser_reads_every_emitted_command() -> None:
    """SGLang's ServerArgs.add_cli_args (python/sglang/srt/server_args.py), whose --quantization and --kv-cache-dtype
    take only their listed choices."""
    pytest.importorskip("sglang", reason="SGLang not installed: its flags are checked against a set cited at a commit")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        server_args = importlib.import_module("sglang.srt.server_args")
    parser = argparse.ArgumentParser(exit_on_error=False)
    server_args.ServerArgs.add_cli_args(parser)
    for args in (("qwen3-32b", "--gpu", "h100-sxm-80gb", "--quant", "fp8", "--kv-dtype", "fp8", "--batch", "8"),
                 ("llama-3.3-70b", "--gpu", "rtx-5090", "--count", "2", "--tp", "2", "--quant", "nvfp4")):
        words = _command(_text(*args, "--task", "infer", "--engine", "sglang", "--emit", "sglang"))
        assert words[:3] == ["python", "-m", "sglang.launch_server"]
        parsed = parser.parse_args(words[3:])
        flags = _flags(words, 3)
        assert parsed.model_path == flags["--model-path"] and parsed.context_length == int(flags["--context-length"])
        assert parsed.quantization == flags.get("--quantization")
