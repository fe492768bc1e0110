"""report/ formats what gpuwise.api returns and reaches nothing of the core past it (issue 38): the names it reads are
the api's (``gpuwise.api``, ``gpuwise.api.reporting``, ``gpuwise.api.launching``, ``gpuwise.api.shell``), and the
launch writers decide what a tool can start from the tool's record, not its name."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import gpuwise
from gpuwise.api import launching, reporting
from gpuwise.cli.main import app
from gpuwise.report import emit
from gpuwise.runtimes.finetune_launch import TRAINING_LAUNCHERS
from gpuwise.runtimes.sharding import SHARDERS

SRC = Path(gpuwise.__file__).parent
CORE = ("estimate", "workload", "recommend", "catalog", "probe", "troubleshoot", "runtimes")
runner = CliRunner()


def _imported(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of every import in ``tree``, at module level, in a function or under TYPE_CHECKING."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module))
            if node.module == "gpuwise":  # from gpuwise import estimate: a subpackage by name
                found += [(node.lineno, f"gpuwise.{alias.name}") for alias in node.names]
    return found


def test_report_imports_nothing_of_the_core() -> None:
    """What lint-imports' protected contract says, kept in the test suite too."""
    offenders = [f"report/{path.name}:{line}: {module}" for path in sorted((SRC / "report").glob("*.py"))
                 for line, module in _imported(ast.parse(path.read_text(encoding="utf-8")))
                 if module.split(".")[:2] in (["gpuwise", c] for c in CORE)]
    assert not offenders, "\n".join(offenders)


def _type_checked(path: Path) -> dict[str, tuple[str, str]]:
    """name -> (module, attribute) of what type checkers see under ``if TYPE_CHECKING:``: the names imported as
    themselves (``X as X``), and those given another name (``Y = X``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    imported = {alias.asname or alias.name: (node.module or "", alias.name)
                for node in block.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    renamed = {target.id: imported.pop(value.id) for node in block.body if isinstance(node, ast.Assign)
               for target, value in [(node.targets[0], node.value)]
               if isinstance(target, ast.Name) and isinstance(value, ast.Name)}
    return {**imported, **renamed}


def test_the_reporting_names_are_the_ones_type_checkers_see() -> None:
    """Each lazily imported name comes from where its TYPE_CHECKING import says, and is that object."""
    assert _type_checked(SRC / "api" / "reporting.py") == reporting._FROM
    for name, (module, attribute) in reporting._FROM.items():
        assert getattr(reporting, name) is getattr(importlib.import_module(module), attribute), name
    assert not set(reporting.__all__) & set(gpuwise.api.__all__)  # the public types stay in gpuwise.api alone
    with pytest.raises(AttributeError):
        reporting.__getattr__("estimate")


def test_every_emit_tool_says_its_kind() -> None:
    """The serving engines' launches, the fine-tuning tools, then SkyPilot: --emit's order and the MCP enum's."""
    assert emit.TOOLS == ("vllm", "sglang", "llamacpp", "axolotl", "torchtune", "skypilot")
    kinds = {tool: launching.tool_kind(tool) for tool in emit.TOOLS}
    assert {t for t, k in kinds.items() if k == "serving"} == set(launching.LAUNCHES)
    assert {t for t, k in kinds.items() if k == "training"} == set(launching.TRAINING_TOOLS)
    assert [t for t, k in kinds.items() if k == "cluster"] == [launching.SKYPILOT.id]


def test_a_training_tool_shards_only_as_its_runtimes_run() -> None:
    """A tool's sharding entries name data-parallel runtimes, at stages those run; what a config file holds for one
    sits under a key of its own (torchtune's overrides are top-level words of its command)."""
    for tool in launching.TRAINING_TOOLS.values():
        assert tool.kind == "training" and tool.shards
        for runtime, sharded in tool.shards.items():
            assert sharded.stages <= set(SHARDERS[runtime].stages.value), (tool.id, runtime)
            if tool.config == "file":
                assert bool(sharded.key) == (sharded.writes != "nothing"), (tool.id, runtime)
            assert sharded.source
    assert set(TRAINING_LAUNCHERS.values()) <= set(launching.TRAINING_TOOLS)
    assert launching.training_launcher(None) is launching.AXOLOTL  # transformers' Trainer, as axolotl runs it
    assert launching.training_launcher("torchtune") is launching.TORCHTUNE
    assert launching.training_launcher("torchtitan") is None


def _emitted(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["estimate", *args])
    return result.exit_code, result.output


@pytest.mark.parametrize("args", [("--count", "8", "--sharding", "fsdp", "--zero", "3"),
                                  ("--count", "8", "--sharding", "megatron", "--zero", "1"),
                                  ("--count", "16", "--nodes", "2", "--sharding", "fsdp2", "--zero", "3",
                                   "--hybrid-shard")])
def test_axolotl_refuses_a_runtime_its_record_does_not_express(args: tuple[str, ...]) -> None:
    code, output = _emitted("llama-3.1-8b", "--gpu", "h100-sxm-80gb", *args, "--emit", "axolotl")
    assert code == 2 and "gpuwise writes axolotl's FSDP2 and DeepSpeed configs" in output


def test_axolotl_runs_tensor_parallel_only_under_the_runtime_that_carries_it() -> None:
    code, output = _emitted("llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--count", "8", "--tp", "2", "--sharding",
                            "fsdp2", "--zero", "3", "--emit", "axolotl")
    config = yaml.safe_load(output)
    assert code == 0 and (config["fsdp_version"], config["tensor_parallel_size"], config["dp_shard_size"]) == (2, 2, 4)
    assert config["fsdp_config"]["reshard_after_forward"] is True and "deepspeed" not in config
    refused = _emitted("llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--count", "8", "--tp", "2", "--zero", "1",
                       "--emit", "axolotl")
    assert refused[0] == 2 and "tensor parallel under FSDP2" in refused[1]


@pytest.mark.parametrize("runtime", ["fsdp2", "deepspeed"])
def test_stage_0_writes_no_sharding_key(runtime: str) -> None:
    code, output = _emitted("qwen2.5-0.5b", "--gpu", "h100-sxm-80gb", "--count", "2", "--sharding", runtime,
                            "--zero", "0", "--emit", "axolotl")
    config = yaml.safe_load(output)
    assert code == 0 and not {"deepspeed", "fsdp_version", "fsdp_config"} & set(config)
    assert config["gradient_checkpointing"] is False and config["optimizer"] == "adamw_torch"


def test_torchtune_over_several_gpus_needs_the_runtime_its_recipes_shard_with() -> None:
    code, output = _emitted("qwen2.5-0.5b", "--gpu", "h100-sxm-80gb", "--count", "2", "--sharding", "deepspeed",
                            "--zero", "3", "--framework", "torchtune", "--emit", "torchtune")
    assert code == 2 and "the estimate's DeepSpeed ZeRO-3 over several GPUs has no recipe" in output
    code, output = _emitted("qwen2.5-0.5b", "--gpu", "h100-sxm-80gb", "--count", "2", "--zero", "2", "--framework",
                            "torchtune", "--emit", "torchtune")
    assert code == 0 and "fsdp_reshard_after_forward=False" in output


def test_a_framework_without_a_launch_is_refused_for_skypilot() -> None:
    code, output = _emitted("qwen2.5-0.5b", "--gpu", "h100-sxm-80gb", "--count", "2", "--zero", "2", "--framework",
                            "torchtitan", "--emit", "skypilot")
    assert code == 2 and "no launch for --framework torchtitan" in output
