"""`gpuwise mcp` driven by the MCP SDK's own client over stdio: it lists the tools, answers `estimate` with the JSON
the CLI prints, and answers a bad call with a tool error while it keeps serving; an agent reads no path or URL the
user did not allow when starting it (--allow-path, --allow-url)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
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


CONFIG = {"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
          "intermediate_size": 1024, "vocab_size": 1000}
SMALL = {"gpu": "t4", "precision": "fp16"}
SECRET = "not-for-agents-5f0c2e"


async def _calls(server_args: list[str], calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Each call's result from one `gpuwise mcp SERVER_ARGS` session."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "gpuwise.cli.main", "mcp", *server_args])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return [await session.call_tool(name, arguments) for name, arguments in calls]


def _error(result: Any) -> str:
    assert result.is_error, result.content[0].text[:300]
    return str(json.loads(result.content[0].text)["error"])


def test_an_agent_reads_no_path_or_url_by_default(tmp_path: Path) -> None:
    """What an agent (or a prompt injected into one) tried: /etc/hostname as weights, /etc and ./config.json as a
    model, catalog and calibration files, a recommend workload's model, the cloud metadata URL; a hub id still works."""
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    (tmp_path / "key.safetensors").write_text(SECRET)
    infer = {"model": "llama-3.1-8b", "gpu": "rtx-4090", "task": "infer"}
    calls = [("estimate", {**infer, "weights": "/etc/hostname"}),
             ("estimate", {**infer, "weights": str(tmp_path / "key.safetensors")}),
             ("estimate", {**infer, "weights": "http://169.254.169.254/latest/meta-data/"}),
             ("fit", {**infer, "weights": "file:///etc/hostname"}),
             ("estimate", {**SMALL, "model": "/etc"}),
             ("launch", {**SMALL, "model": str(tmp_path / "config.json"), "tool": "vllm"}),
             ("serve_sim", {**infer, "calibration": "/etc/hostname"}),
             ("tco", {"gpu": "rtx-4090", "catalog_files": ["/etc/hostname"]}),
             ("recommend", {"workloads": [{"model": "~/.ssh", "task": "infer"}]}),
             ("estimate", {"model": "meta-llama/Llama-3.1-8B", "gpu": "rtx-4090", "task": "infer"})]
    *refused, hub = anyio.run(_calls, [], calls)
    messages = [_error(r) for r in refused]
    assert [m.split(":")[0] for m in messages] == ["weights", "weights", "weights", "weights", "model", "model",
                                                   "calibration", "catalog_files", "workloads.model"]
    assert all("--allow-path DIR" in m or "--allow-url" in m for m in messages), messages
    assert not any(SECRET in m for m in messages)  # nothing of a file came back
    assert not hub.is_error and json.loads(hub.content[0].text)["workload"]["model"] == "llama-3.1-8b"  # its preset


def test_allowed_folders_and_urls_are_read_and_nothing_beside_them(tmp_path: Path) -> None:
    """--allow-path DIR: a config.json there answers as the CLI does; ../ and a symlink out of DIR are refused. A bare
    --allow-url allows public http(s) URLs only: the cloud metadata address stays refused."""
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "config.json").write_text(json.dumps(CONFIG))
    (tmp_path / "secret.json").write_text(json.dumps(CONFIG))
    (allowed / "escape.json").symlink_to(tmp_path / "secret.json")
    calls = [("estimate", {**SMALL, "model": str(allowed / "config.json")}),
             ("estimate", {**SMALL, "model": f"{allowed}/../secret.json"}),
             ("estimate", {**SMALL, "model": str(allowed / "escape.json")}),
             ("estimate", {"model": "llama-3.1-8b", "gpu": "rtx-4090", "task": "infer",
                           "weights": "http://169.254.169.254/latest/meta-data/"})]
    good, dotdot, link, metadata = anyio.run(_calls, ["--allow-url", "--allow-path", str(allowed)], calls)
    cli = runner.invoke(app, ["estimate", str(allowed / "config.json"), "--gpu", "t4", "--precision", "fp16", "--json"])
    assert not good.is_error and json.loads(good.content[0].text) == json.loads(cli.output)
    assert "is outside the folders this server may read" in _error(dotdot)
    assert "is outside the folders this server may read" in _error(link)
    assert "its host is not a public address" in _error(metadata)


def test_the_tools_say_which_files_they_take_and_a_bad_allow_list_stops_the_server(tmp_path: Path) -> None:
    from gpuwise.cli.mcp_server import TOOLS

    assert {"weights", "calibration", "catalog_files"} <= set(TOOLS["estimate"][1]()["properties"])
    assert {"qps", "seed", "calibration"} <= set(TOOLS["serve_sim"][1]()["properties"])
    assert "--allow-path DIR" in TOOLS["fit"][1]()["properties"]["weights"]["description"]
    bad = runner.invoke(app, ["mcp", "--allow-path", str(tmp_path / "nope")])
    assert bad.exit_code == 2 and "--allow-path" in bad.output and "no such folder" in bad.output
    bad = runner.invoke(app, ["mcp", "--allow-url", "ftp://example.com/"])
    assert bad.exit_code == 2 and "give an http(s)://HOST[/PATH] prefix" in bad.output
