"""How each serving engine is launched with the settings gpuwise assumed: its program, the flag for each setting,
and the values it takes for weight and KV-cache formats; every flag as the engine's own argument parser defines it,
at the commit cited (the tests check each emitted flag against DOCUMENTED)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from gpuwise.runtimes.engines import LLAMACPP_ARGS, VLLM_ARGS

ToolKind = Literal["serving", "training", "cluster"]
"""What an ``--emit`` tool starts: a serving engine's server (its command, ``LAUNCHES`` here), a fine-tuning tool's
run (its config file or command, ``runtimes/finetune_launch.py``), or a cluster task that runs either on rented
machines (``runtimes/skypilot.py``)."""


@dataclass(frozen=True)
class Launch:
    program: str  # with {model}
    flags: Mapping[str, str]  # gpuwise setting -> the engine's flag
    loads: Mapping[str, str]  # a pre-quantized checkpoint's method -> the --quantization value it needs ("" = none)
    quantize_on_load: Mapping[str, str]  # gpuwise weight format -> the value that quantizes a 16-bit repo on load
    quant_values: frozenset[str]  # the --quantization values its parser accepts that gpuwise emits
    kv: Mapping[str, str]  # gpuwise KV format -> the engine's value
    documented: frozenset[str]  # the flags its parser defines that gpuwise emits
    source: str
    quant_source: str = ""  # where ``loads``, ``quantize_on_load`` and ``quant_values`` come from
    context_is_total: bool = False  # the context flag sizes every slot's context together (llama-server -c)
    hub_program: str | None = None  # when the model is a hub repo id rather than a local file (llama-server -hf)
    gpu_layers: int | None = None  # layers to place on the GPU: all of them (llama.cpp -ngl)
    install: str = ""  # the setup line of a SkyPilot task ("" where gpuwise writes no task for it)
    port: int = 8000  # the port it serves on, given with flags["port"] in a task
    kind: ToolKind = "serving"


VLLM_QUANT = ("vllm-project/vllm@0034007d vllm/model_executor/layers/quantization/__init__.py QuantizationMethods "
              "(fp8, modelopt_fp4, awq, gptq, compressed-tensors ...); a checkpoint's quantization_config "
              "(config.json) or ModelOpt's hf_quant_config.json is detected, docs/features/quantization/modelopt.md: "
              "'NVFP4: ModelOpt NVFP4 checkpoints (use quantization=\"modelopt_fp4\")'; "
              "docs/features/quantization/fp8.md 'Online Dynamic Quantization': '--quantization=\"fp8\"' on a "
              "BF16/FP16 model, and 'we load the model at original precision before quantizing down to 8-bits, so you "
              "need enough memory to load the whole model'")
SGLANG_QUANT = ("sgl-project/sglang python/sglang/srt/server_args.py QUANTIZATION_CHOICES ('fp8', # MOE + linear "
                "online quantization; 'modelopt_fp4' ...); docs/advanced_features/quantization.md: 'If you use a "
                "pre-quantized model, do not add --quantization'; online quantization uses high memory during "
                "quantization (16-bit weights loaded first)")
PRE_QUANTIZED: Mapping[str, str] = {"compressed-tensors": "", "awq": "", "gptq": "", "fp8": ""}
"""Checkpoints whose config.json quantization_config the serving engines read themselves (no flag)."""

SGLANG_ARGS = "sgl-project/sglang@a82da8da python/sglang/srt/server_args.py ServerArgs.add_cli_args"

LAUNCHES: dict[str, Launch] = {
    "vllm": Launch(
        program="vllm serve {model}",
        flags={"tp": "--tensor-parallel-size", "max_num_seqs": "--max-num-seqs",
               "memory_fraction": "--gpu-memory-utilization", "kv": "--kv-cache-dtype",
               "context": "--max-model-len", "max_batched_tokens": "--max-num-batched-tokens",
               "quant": "--quantization", "dp": "--data-parallel-size", "host": "--host", "port": "--port"},
        loads={**PRE_QUANTIZED, "modelopt_fp4": "modelopt_fp4"}, quantize_on_load={"fp8": "fp8"},
        quant_values=frozenset({"fp8", "modelopt_fp4"}), quant_source=VLLM_QUANT,
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
        loads={**PRE_QUANTIZED, "modelopt_fp4": ""}, quantize_on_load={"fp8": "fp8"},
        quant_values=frozenset({"fp8"}), quant_source=SGLANG_QUANT,
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
        loads={"gguf": ""}, quantize_on_load={}, quant_values=frozenset(),
        quant_source=LLAMACPP_ARGS + " (-hf <user>/<model>[:quant]: a GGUF repository, its quant tag optional)",
        kv={"fp16": "f16", "bf16": "bf16", "q8_0": "q8_0", "q4_0": "q4_0"},
        documented=frozenset({"-ngl", "-c", "-np", "-ctk", "-ctv", "--n-cpu-moe"}), context_is_total=True,
        gpu_layers=999,
        source=LLAMACPP_ARGS + " (-ngl/--n-gpu-layers, -c/--ctx-size: all slots' context together, "
                               "-np/--parallel, -ctk/-ctv/--cache-type-k/-v, --n-cpu-moe, -hf/--hf-repo "
                               "<user>/<model>[:quant])"),
}
