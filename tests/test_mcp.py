"""`gpuwise mcp` driven by the MCP SDK's own client over stdio: it lists the tools, answers `estimate` with the JSON
the CLI prints, and answers a bad call with a tool error while it keeps serving."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuwise.cli.main import app

pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")
runner = CliRunner()
ESTIMATE = {"model": "llama-3.1-8b", "gpu": "rtx-4090", "method": "qlora", "batch": 2, "seq": 1024}


async def _session_calls() -> list[Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "gpuwise.cli.main", "mcp"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        good = await session.call_tool("estimate", ESTIMATE)
        bad = await session.call_tool("estimate", {"model": "no-such-model-xyz", "gpu": "rtx-4090"})
        after = await session.call_tool("catalog", {"gpu": "rtx-4090"})
        launch = await session.call_tool("launch", {**ESTIMATE, "ckpt": "full", "tool": "axolotl"})  # fits 24 GB
        return [listed, good, bad, after, launch]


def test_an_mcp_client_lists_the_tools_and_gets_the_clis_json() -> None:
    listed, good, bad, after, launch = anyio.run(_session_calls)
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == {"estimate", "fit", "serve_sim", "recommend", "tco", "diagnose", "catalog", "launch"}
    schema = tools["estimate"].input_schema
    assert {"model", "gpu", "task", "method", "batch", "seq", "quant", "engine"} <= set(schema["properties"])
    cli = runner.invoke(app, ["estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--method", "qlora", "--batch", "2",
                              "--seq", "1024", "--json"])
    assert not good.is_error and json.loads(good.content[0].text) == json.loads(cli.output)
    assert bad.is_error and "no-such-model-xyz" in json.loads(bad.content[0].text)["error"]
    assert not after.is_error and json.loads(after.content[0].text)["id"] == "rtx-4090"
    emitted = runner.invoke(app, ["estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--method", "qlora", "--batch", "2",
                                  "--seq", "1024", "--ckpt", "full", "--emit", "axolotl"])
    assert not launch.is_error and json.loads(launch.content[0].text)["text"].strip() == emitted.output.strip()
