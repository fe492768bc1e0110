"""--emit vllm|sglang|llamacpp: each emitted flag is one the engine's parser defines (runtimes/launch.py cites the
file at a commit), and each value is the setting the estimate assumed."""

from __future__ import annotations

import shlex

import pytest
from typer.testing import CliRunner

from gpuwise.cli.main import app
from gpuwise.runtimes.launch import LAUNCHES

runner = CliRunner()


def _emit(*args: str) -> list[str]:
    result = runner.invoke(app, ["estimate", *args])
    assert result.exit_code == 0, result.output
    return shlex.split(result.output.strip())


def _flags(words: list[str], program_words: int) -> dict[str, str]:
    rest = words[program_words:]
    return dict(zip(rest[::2], rest[1::2], strict=True))


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_serving_engines_command_carries_only_its_documented_flags(engine: str) -> None:
    words = _emit("meta-llama/Llama-3.1-70B", "--gpu", "h100-sxm-80gb", "--task", "infer", "--tp", "4", "--count",
                  "4", "--batch", "64", "--quant", "fp8", "--kv-dtype", "fp8", "--input-len", "1000", "--output-len",
                  "200", "--engine", engine, "--emit", engine)
    spec = LAUNCHES[engine]
    program = len(spec.program.split())
    flags = _flags(words, program)
    assert set(flags) <= spec.documented
    tp, seqs, kv = spec.flags["tp"], spec.flags["max_num_seqs"], spec.flags["kv"]
    assert (flags[tp], flags[seqs], flags[spec.flags["context"]]) == ("4", "64", "1200")
    # vLLM's gpu_memory_utilization defaults to 0.9, SGLang's fp8 KV cache is fp8_e4m3
    assert flags[kv] == {"vllm": "fp8", "sglang": "fp8_e4m3"}[engine]
    if engine == "vllm":
        assert flags["--gpu-memory-utilization"] == "0.9" and flags["--quantization"] == "fp8"


def test_llama_server_sizes_its_context_for_every_slot() -> None:
    """llama-server's -c is the context all -np slots share (tools/server README: 'the context size is divided
    among the slots'): two slots of 1,280 tokens need -c 2560."""
    words = _emit("openai/gpt-oss-120b", "--gpu", "rtx-5090", "--task", "infer", "--engine", "llamacpp",
                  "--n-cpu-moe", "24", "--batch", "2", "--kv-dtype", "q8_0", "--emit", "llamacpp")
    flags = _flags(words, 3)  # llama-server -hf REPO
    assert set(flags) <= LAUNCHES["llamacpp"].documented
    assert (flags["-np"], flags["-c"], flags["-ctk"], flags["--n-cpu-moe"]) == ("2", "2560", "q8_0", "24")


def test_emit_needs_the_engine_it_launches() -> None:
    result = runner.invoke(app, ["estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--task", "infer", "--emit",
                                 "sglang"])
    assert result.exit_code == 2 and "--engine sglang" in result.output


def test_recommend_emits_each_serving_options_launch() -> None:
    """Each option's replica as vLLM starts it: its TP and format, the engine's own sequence cap on that card
    (vLLM: 1,024 on cards of 70 GiB or more, else 256), and the preset's hub id."""
    import json

    result = runner.invoke(app, ["recommend", "llama-3.1-8b", "--task", "infer", "--qps", "5", "--rent", "--top",
                                 "3", "--emit", "vllm", "--json"])
    assert result.exit_code == 0, result.output
    options = json.loads(result.output)["options"]
    assert options and all("launch" in o for o in options)
    for option in options:
        words = shlex.split(option["launch"][0])
        assert words[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-8B"]
        flags = _flags(words, 3)
        assert set(flags) <= LAUNCHES["vllm"].documented
        assert flags["--max-num-seqs"] in ("256", "1024")
        tp = str(option["settings"][0]["tp"])
        assert flags.get("--tensor-parallel-size", "1") == tp
