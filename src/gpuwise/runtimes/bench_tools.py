"""One record per benchmark tool whose export ``gpuwise calibrate --from`` reads (workload/exports.py attaches the
record to each run it reads): the engine its runs measured, whether a run is a single-stream test or a serving load,
and how the file names the devices and the model -- each fact from the tool's own output format.
"""

from __future__ import annotations

from gpuwise.runtimes.schema import BenchTool, Sourced

VLLM_SERVE = "vllm-project/vllm vllm/benchmarks/serve.py"
SGLANG_SERVING = "sgl-project/sglang python/sglang/bench_serving.py"
LLAMA_BENCH_JSON = "ggml-org/llama.cpp tools/llama-bench/llama-bench.cpp json_printer"
AIPERF_EXPORT = "ai-dynamo/aiperf profile_export_aiperf.json"
SERVING_LOAD = Sourced(False, "a serving load: many requests at a rate or a concurrency, latencies per request")
NO_DEVICE_LIST = Sourced(False, "names one card at most; the server's tensor-parallel size says how many it used")
OPENAI_ENDPOINT = Sourced("vllm", "gpuwise: the tool measures any OpenAI-compatible endpoint and does not name the "
                                  "engine behind it; vLLM unless --engine says")

VLLM_BENCH = BenchTool(
    id="vllm bench serve",
    engine=Sourced("vllm", VLLM_SERVE + ": vLLM's own serving benchmark (--save-result)"),
    single_stream=SERVING_LOAD, lists_devices=NO_DEVICE_LIST,
    names_model=Sourced(True, VLLM_SERVE + " save_to_pytorch_benchmark_format: model_id, the served model"),
)
SGLANG_BENCH = BenchTool(
    id="sglang bench_serving",
    engine=Sourced("sglang", SGLANG_SERVING + ": SGLang's own serving benchmark (--output-file)"),
    single_stream=SERVING_LOAD, lists_devices=NO_DEVICE_LIST,
    names_model=Sourced(True, SGLANG_SERVING + ": model_id, and server_info.model_path"),
    backends=frozenset({"sglang"}),
)
LLAMA_BENCH = BenchTool(
    id="llama-bench",
    engine=Sourced("llamacpp", LLAMA_BENCH_JSON + ": llama.cpp's own benchmark"),
    single_stream=Sourced(True, LLAMA_BENCH_JSON + ": one object per test, n_prompt tokens of prompt (pp) or n_gen "
                                                   "generated tokens (tg) of one sequence, avg_ts tokens/s"),
    lists_devices=Sourced(True, LLAMA_BENCH_JSON + ": gpu_info, the description of every device the test ran on, "
                                                   "joined by ', '"),
    names_model=Sourced(False, LLAMA_BENCH_JSON + ": model_type, the GGUF's architecture, size and format "
                                                  "('qwen2 14B Q3_K - Large'), not a model id"),
)
AIPERF = BenchTool(
    id="aiperf", engine=OPENAI_ENDPOINT, single_stream=SERVING_LOAD,
    lists_devices=Sourced(False, AIPERF_EXPORT + ": telemetry_data gpu_name, one device's name"),
    names_model=Sourced(True, AIPERF_EXPORT + ": input_config model_names"),
)
GENAI_PERF = BenchTool(
    id="genai-perf", engine=OPENAI_ENDPOINT, single_stream=SERVING_LOAD, lists_devices=NO_DEVICE_LIST,
    names_model=Sourced(True, "triton-inference-server/perf_analyzer genai-perf profile_export_genai_perf.json: "
                              "input_config model_names"),
)

BENCH_TOOLS: dict[str, BenchTool] = {t.id: t for t in (VLLM_BENCH, SGLANG_BENCH, LLAMA_BENCH, AIPERF, GENAI_PERF)}
"""The benchmark tools whose exports gpuwise reads, by the name the calibration record gives them."""


def serving_tool(backend: object) -> BenchTool:
    """The serving benchmark a vLLM-shaped result came from (the two share their key names), by its ``backend``
    value: SGLang's bench_serving writes its own name there; anything else is read as ``vllm bench serve``."""
    return next((t for t in (SGLANG_BENCH,) if isinstance(backend, str) and backend in t.backends), VLLM_BENCH)
