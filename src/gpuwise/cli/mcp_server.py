"""`gpuwise mcp`: gpuwise's answers as MCP tools on stdio (the official ``mcp`` Python SDK, its low-level Server).

Each tool takes the typed models' own field names -- ``model``, ``gpu``, ``task`` and the job's flags as the job
models define them (their JSON schema is the tool's input schema) -- and returns the JSON the CLI prints with
``--json``. A gpuwise error comes back as a tool error (``isError``) with the CLI's one-line message; the server
keeps serving.

An agent is not the user: every argument the api would open (a model given as a path, ``weights``, ``calibration``,
``catalog_files``, a recommend workload's model) passes ``gpuwise.api.check_access`` under the policy the user
started the server with (``--allow-path DIR``, ``--allow-url [PREFIX]``); by default no path or URL is read, the same
as the web app.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import typer

from gpuwise import api
from gpuwise.api.shell import InferJob, LoadTest, Request, TrainJob
from gpuwise.errors import GpuwiseError, ProbeUnavailable

_MODEL_GPU = {"model": {"type": "string", "description": "preset id, hub id or config.json path (`gpuwise models`)"},
              "gpu": {"type": "string", "description": "catalog id or loose name of the GPU (`gpuwise catalog list`)"}}
_TASK = {"task": {"type": "string", "enum": ["train", "infer"], "default": "train"}}
_ALLOWED = "read only under the folders the server was started with (--allow-path DIR)"
_FILES: dict[str, dict[str, Any]] = {
    "weights": {"type": "string", "description": "a .safetensors or .gguf file or http(s) URL whose header gives the "
                                                 f"exact weight bytes (inference); {_ALLOWED} or URL prefixes "
                                                 "(--allow-url)"},
    "calibration": {"type": "string",
                    "description": f"a `gpuwise bench --save` or `validate --save` record; {_ALLOWED}"},
    "catalog_files": {"type": "array", "items": {"type": "string"},
                      "description": f"YAML files of GPU/offer records that patch the catalog; {_ALLOWED}"}}


def _job_schema(infer_only: bool = False, files: tuple[str, ...] = ("weights", "calibration", "catalog_files"),
                extra: tuple[type[Any], ...] = ()) -> dict[str, Any]:
    """model and gpu, then the training and inference jobs' own fields (their pydantic schemas), the ``extra`` models'
    fields and the files the api function takes (read only where the server's policy allows)."""
    models = (InferJob,) if infer_only else (TrainJob, InferJob)
    properties: dict[str, Any] = {**_MODEL_GPU, **({} if infer_only else _TASK)}
    defs: dict[str, Any] = {}
    for model in (*models, *extra):
        schema = model.model_json_schema()
        defs.update(schema.get("$defs", {}))
        for name, spec in schema["properties"].items():
            properties.setdefault(name, spec)
    properties.update({name: _FILES[name] for name in files})
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
    "fit": ("Will it fit: memory breakdown, the largest batch, and the changes that make it fit.",
            lambda: _job_schema(files=("weights", "catalog_files")), _fit),
    "launch": ("What starts the job with exactly the settings estimated: vllm/sglang/llamacpp command, axolotl "
               "config, torchtune command or SkyPilot task (`--emit`), as text.", _launch_schema, _launch),
    "serve_sim": ("Serving under load: latency percentiles at a rate (qps) or TTFT/TPOT at a concurrency.",
                  lambda: _job_schema(infer_only=True, files=("calibration", "catalog_files"), extra=(LoadTest,)),
                  _serve_sim),
    "recommend": ("Which GPU, how many, bought or rented where: ranked options with reasons (a scenario request).",
                  Request.model_json_schema, _recommend),
    "tco": ("Owning cards against renting them, year by year.",
            lambda: {"type": "object", "required": ["gpu"], "properties": {
                "gpu": _MODEL_GPU["gpu"], "count": {"type": "integer", "default": 1}, "price_usd": {"type": "number"},
                "hours_per_day": {"type": "number"}, "years": {"type": "number"},
                "catalog_files": _FILES["catalog_files"]}}, _tco),
    "diagnose": ("Why did a run fail: known error signatures in a log, with the fix.",
                 lambda: {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
                 _diagnose),
    "catalog": ("GPUs with datasheet figures, sources and dated prices: one (gpu) or a filtered list.",
                lambda: {"type": "object", "properties": {
                    "gpu": {"type": "string"}, "vendor": {"type": "string"}, "segment": {"type": "string"},
                    "min_memory_gb": {"type": "number"}, "features": {"type": "array", "items": {"type": "string"}},
                    "sort": {"type": "string"}}}, _catalog),
}


def answer(name: str, arguments: Mapping[str, Any], *, policy: api.AccessPolicy | None = None) -> tuple[str, bool]:
    """(the JSON text, whether it is an error) for one tool call, after every path and URL among its arguments passed
    ``policy`` (by default none is read): never raises."""
    tool = TOOLS.get(name)
    if tool is None:
        return json.dumps({"error": f"unknown tool {name[:60]!r}; tools: {', '.join(TOOLS)}"}), True
    try:
        checked = api.check_arguments(arguments, policy=policy or api.AccessPolicy())
        return json.dumps(tool[2](checked), default=str), False
    except GpuwiseError as exc:
        return json.dumps({"error": str(exc)}), True
    except Exception as exc:  # a tool error, not a dead server
        return json.dumps({"error": f"internal error ({type(exc).__name__}: {str(exc)[:300]})"}), True


def serve(policy: api.AccessPolicy | None = None) -> None:
    """Run the MCP server on stdio until the client closes it; ``policy``: the paths and URLs its tools may read."""
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
        text, failed = await anyio.to_thread.run_sync(lambda: answer(params.name, dict(params.arguments or {}),
                                                                     policy=policy))
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=failed)

    server = Server("gpuwise", version=getattr(api, "__version__", ""), on_list_tools=list_tools,
                    on_call_tool=call_tool)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)


class _Command(typer.core.TyperCommand):
    """`gpuwise mcp`'s options, where a bare ``--allow-url`` (no prefix after it) allows any public http(s) URL."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        spelled: list[str] = []
        for i, arg in enumerate(args):
            bare = arg == "--allow-url" and (i + 1 == len(args) or args[i + 1].startswith("-"))
            spelled += ["--allow-url", "http://", "--allow-url", "https://"] if bare else [arg]
        return list(super().parse_args(ctx, spelled))


def register(app: typer.Typer) -> None:
    """`gpuwise mcp [--allow-path DIR]... [--allow-url [PREFIX]]...`: the server and what its tools may read."""
    from gpuwise.cli.build import FLAG_OWNERS
    from gpuwise.cli.output import guard

    @app.command("mcp", cls=_Command, help="An MCP server on stdio: estimate, fit, launch, recommend, serve_sim, tco, "
                 "diagnose and catalog as tools for agents (needs the mcp extra). Agents read no path or URL unless "
                 "allowed here.")
    def mcp(allow_path: list[str] | None = typer.Option(
                None, "--allow-path", metavar="DIR", help="A folder whose files (config.json, weights, catalogs, "
                "calibrations) the tools may read, symlinks resolved (repeatable); none by default."),
            allow_url: list[str] | None = typer.Option(
                None, "--allow-url", metavar="[PREFIX]", help="An http(s) URL prefix the tools may read weights "
                "from (repeatable); alone, any http(s) URL to a public address; none by default.")) -> None:
        with guard(as_json=False):
            serve(api.AccessPolicy(allow_paths=tuple(allow_path or ()), allow_urls=tuple(allow_url or ())))

    for flag in ("--allow-path", "--allow-url"):
        FLAG_OWNERS.setdefault(flag, set()).add("mcp")
