"""How each serving engine is launched with the settings gpuwise assumed: its program, the flag for each setting,
and the values it takes for weight and KV-cache formats; every flag as the engine's own argument parser defines it,
at the commit cited (the tests check each emitted flag against DOCUMENTED)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuwise.runtimes.engines import LLAMACPP_ARGS, VLLM_ARGS


@dataclass(frozen=True)
class Launch:
    program: str  # with {model}
    flags: Mapping[str, str]  # gpuwise setting -> the engine's flag
    quant: Mapping[str, str]  # gpuwise weight format -> the engine's value ("" where the checkpoint says it)
    kv: Mapping[str, str]  # gpuwise KV format -> the engine's value
    documented: frozenset[str]  # the flags its parser defines that gpuwise emits
    source: str
    context_is_total: bool = False  # the context flag sizes every slot's context together (llama-server -c)
    hub_program: str | None = None  # when the model is a hub repo id rather than a local file (llama-server -hf)
    gpu_layers: int | None = None  # layers to place on the GPU: all of them (llama.cpp -ngl)
    install: str = ""  # the setup line of a SkyPilot task ("" where gpuwise writes no task for it)
    port: int = 8000  # the port it serves on, given with flags["port"] in a task


SGLANG_ARGS = "sgl-project/sglang@a82da8da python/sglang/srt/server_args.py ServerArgs.add_cli_args"

LAUNCHES: dict[str, Launch] = {
    "vllm": Launch(
        program="vllm serve {model}",
        flags={"tp": "--tensor-parallel-size", "max_num_seqs": "--max-num-seqs",
               "memory_fraction": "--gpu-memory-utilization", "kv": "--kv-cache-dtype",
               "context": "--max-model-len", "max_batched_tokens": "--max-num-batched-tokens",
               "quant": "--quantization", "dp": "--data-parallel-size", "host": "--host", "port": "--port"},
        quant={"fp8": "fp8", "awq-int4": "awq", "gptq-int4": "gptq"},
        kv={"fp16": "auto", "bf16": "auto", "fp8": "fp8"},
        documented=frozenset({"--tensor-parallel-size", "--max-num-seqs", "--gpu-memory-utilization",
                              "--kv-cache-dtype", "--max-model-len", "--max-num-batched-tokens", "--quantization",
                              "--data-parallel-size", "--host", "--port"}),
        install="pip install vllm",
        source=VLLM_ARGS.replace("_set_default_args", "add_cli_args") + " (--data-parallel-size); "
               "vllm/entrypoints/openai/cli_args.py (--host, --port)"),
    "sglang": Launch(
        program="python -m sglang.launch_server --model-path {model}",
        flags={"tp": "--tp-size", "max_num_seqs": "--max-running-requests",
               "memory_fraction": "--mem-fraction-static", "kv": "--kv-cache-dtype", "context": "--context-length",
               "max_batched_tokens": "--chunked-prefill-size", "quant": "--quantization", "dp": "--dp-size",
               "host": "--host", "port": "--port"},
        quant={"fp8": "fp8", "awq-int4": "awq", "gptq-int4": "gptq"},
        kv={"fp16": "auto", "bf16": "auto", "fp8": "fp8_e4m3"},
        documented=frozenset({"--tp-size", "--max-running-requests", "--mem-fraction-static", "--kv-cache-dtype",
                              "--context-length", "--chunked-prefill-size", "--quantization", "--dp-size", "--host",
                              "--port"}),
        install='pip install "sglang[all]"', port=30000,
        source=SGLANG_ARGS),
    "llamacpp": Launch(
        program="llama-server -m {model}", hub_program="llama-server -hf {model}",
        flags={"gpu_layers": "-ngl", "context": "-c", "max_num_seqs": "-np", "kv_k": "-ctk", "kv_v": "-ctv",
               "cpu_moe": "--n-cpu-moe"},
        quant={},
        kv={"fp16": "f16", "bf16": "bf16", "q8_0": "q8_0", "q4_0": "q4_0"},
        documented=frozenset({"-ngl", "-c", "-np", "-ctk", "-ctv", "--n-cpu-moe"}), context_is_total=True,
        gpu_layers=999,
        source=LLAMACPP_ARGS + " (-ngl/--n-gpu-layers, -c/--ctx-size: all slots' context together, "
                               "-np/--parallel, -ctk/-ctv/--cache-type-k/-v, --n-cpu-moe, -hf/--hf-repo "
                               "<user>/<model>[:quant])"),
}
