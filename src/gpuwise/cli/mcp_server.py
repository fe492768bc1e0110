"""`gpuwise mcp`: gpuwise's answers as MCP tools on stdio (the official ``mcp`` Python SDK, its low-level Server).

Each tool takes the typed models' own field names -- ``model``, ``gpu``, ``task`` and the job's flags as the job
models define them (their JSON schema is the tool's input schema) -- and returns the JSON the CLI prints with
``--json``. A gpuwise error comes back as a tool error (``isError``) with the CLI's one-line message; the server
keeps serving.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from gpuwise import api
from gpuwise.api.shell import InferJob, Request, TrainJob
from gpuwise.errors import GpuwiseError, ProbeUnavailable

_MODEL_GPU = {"model": {"type": "string", "description": "preset id, hub id or config.json path (`gpuwise models`)"},
              "gpu": {"type": "string", "description": "catalog id or loose name of the GPU (`gpuwise catalog list`)"}}
_TASK = {"task": {"type": "string", "enum": ["train", "infer"], "default": "train"}}


def _job_schema(infer_only: bool = False) -> dict[str, Any]:
    """model and gpu, then the training and inference jobs' own fields (their pydantic schemas)."""
    models = (InferJob,) if infer_only else (TrainJob, InferJob)
    properties: dict[str, Any] = {**_MODEL_GPU, **({} if infer_only else _TASK)}
    defs: dict[str, Any] = {}
    for model in models:
        schema = model.model_json_schema()
        defs.update(schema.get("$defs", {}))
        for name, spec in schema["properties"].items():
            properties.setdefault(name, spec)
    return {"type": "object", "properties": properties, "required": ["model", "gpu"], "$defs": defs}


def _job_options(arguments: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    rest = {k: v for k, v in arguments.items() if k not in ("model", "gpu")}
    return str(arguments.get("model", "")), str(arguments.get("gpu", "")), rest


def _estimate(arguments: Mapping[str, Any]) -> Any:
    from gpuwise.report.estimate import estimate_json

    model, gpu, options = _job_options(arguments)
    return estimate_json(api.estimate(model, gpu=gpu, **options))


def _fit(arguments: Mapping[str, Any]) -> Any:
    from gpuwise.report.estimate import fit_json

    model, gpu, options = _job_options(arguments)
    return fit_json(api.fit(model, gpu=gpu, **options))


def _serve_sim(arguments: Mapping[str, Any]) -> Any:
    from gpuwise.report.perf import serving_json

    model, gpu, options = _job_options(arguments)
    return serving_json(api.serve_sim(model, gpu=gpu, **options))


def _launch(arguments: Mapping[str, Any]) -> Any:
    from gpuwise.report.emit import emit_estimate

    model, gpu, options = _job_options(arguments)
    tool = str(options.pop("tool", ""))
    return {"tool": tool, "text": emit_estimate(api.estimate(model, gpu=gpu, **options), model, tool)}


def _launch_schema() -> dict[str, Any]:
    from gpuwise.report.emit import TOOLS as EMITTED

    schema = _job_schema()
    return schema | {"required": ["model", "gpu", "tool"], "properties": {
        **schema["properties"], "tool": {"type": "string", "enum": list(EMITTED),
                                         "description": "what to write: a serving command, a training config or "
                                                        "command, or a SkyPilot task (`--emit`)"}}}


def _recommend(arguments: Mapping[str, Any]) -> Any:
    from gpuwise.report.recommend import recommendation_json

    return recommendation_json(api.recommend(dict(arguments)))


def _tco(arguments: Mapping[str, Any]) -> Any:
    from gpuwise.report.recommend import tco_json

    options = dict(arguments)
    return tco_json(api.tco(str(options.pop("gpu", "")), **options))


def _diagnose(arguments: Mapping[str, Any]) -> Any:
    from gpuwise.report.diagnose import diagnosis_json

    return diagnosis_json(api.diagnose(str(arguments.get("text", ""))))


def _catalog(arguments: Mapping[str, Any]) -> Any:
    from gpuwise.report.catalog import gpu_json

    if arguments.get("gpu"):
        catalog = api.load_catalog()
        card = catalog.gpu(str(arguments["gpu"]))
        return {**gpu_json(card), "offers": [o.model_dump(mode="json") for o in catalog.offers_for(card.id)]}
    filters = {k: v for k, v in arguments.items() if k in ("vendor", "segment", "min_memory_gb", "features", "sort")}
    return [gpu_json(g) for g in api.list_gpus(**filters)]


TOOLS: dict[str, tuple[str, Callable[[], dict[str, Any]], Callable[[Mapping[str, Any]], Any]]] = {
    "estimate": ("Per-GPU memory, speed and cost of a training or inference job (the estimate contract).",
                 _job_schema, _estimate),
    "fit": ("Will it fit: memory breakdown, the largest batch, and the changes that make it fit.", _job_schema, _fit),
    "launch": ("What starts the job with exactly the settings estimated: vllm/sglang/llamacpp command, axolotl "
               "config, torchtune command or SkyPilot task (`--emit`), as text.", _launch_schema, _launch),
    "serve_sim": ("Serving under load: latency percentiles at a rate (qps) or TTFT/TPOT at a concurrency.",
                  lambda: _job_schema(infer_only=True) | {"properties": {
                      **_job_schema(infer_only=True)["properties"], "qps": {"type": "number"},
                      "concurrency": {"type": "integer"}, "p99_ms": {"type": "number"}}}, _serve_sim),
    "recommend": ("Which GPU, how many, bought or rented where: ranked options with reasons (a scenario request).",
                  Request.model_json_schema, _recommend),
    "tco": ("Owning cards against renting them, year by year.",
            lambda: {"type": "object", "required": ["gpu"], "properties": {
                "gpu": _MODEL_GPU["gpu"], "count": {"type": "integer", "default": 1}, "price_usd": {"type": "number"},
                "hours_per_day": {"type": "number"}, "years": {"type": "number"}}}, _tco),
    "diagnose": ("Why did a run fail: known error signatures in a log, with the fix.",
                 lambda: {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
                 _diagnose),
    "catalog": ("GPUs with datasheet figures, sources and dated prices: one (gpu) or a filtered list.",
                lambda: {"type": "object", "properties": {
                    "gpu": {"type": "string"}, "vendor": {"type": "string"}, "segment": {"type": "string"},
                    "min_memory_gb": {"type": "number"}, "features": {"type": "array", "items": {"type": "string"}},
                    "sort": {"type": "string"}}}, _catalog),
}


def answer(name: str, arguments: Mapping[str, Any]) -> tuple[str, bool]:
    """(the JSON text, whether it is an error) for one tool call: never raises."""
    tool = TOOLS.get(name)
    if tool is None:
        return json.dumps({"error": f"unknown tool {name[:60]!r}; tools: {', '.join(TOOLS)}"}), True
    try:
        return json.dumps(tool[2](arguments), default=str), False
    except GpuwiseError as exc:
        return json.dumps({"error": str(exc)}), True
    except Exception as exc:  # a tool error, not a dead server
        return json.dumps({"error": f"internal error ({type(exc).__name__}: {str(exc)[:300]})"}), True


def serve() -> None:
    """Run the MCP server on stdio until the client closes it."""
    try:
        import anyio
        import mcp.types as types
        from mcp.server.lowlevel import Server
        from mcp.server.stdio import stdio_server
    except ImportError:
        raise ProbeUnavailable("gpuwise mcp needs the MCP SDK: pip install 'gpuwise[mcp]'") from None

    async def list_tools(_context: Any, _params: Any) -> Any:
        return types.ListToolsResult(tools=[types.Tool(name=n, description=d, inputSchema=schema())
                                            for n, (d, schema, _) in TOOLS.items()])

    async def call_tool(_context: Any, params: Any) -> Any:
        text, failed = await anyio.to_thread.run_sync(answer, params.name, dict(params.arguments or {}))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=failed)

    server = Server("gpuwise", version=getattr(api, "__version__", ""), on_list_tools=list_tools,
                    on_call_tool=call_tool)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
