"""--emit axolotl|torchtune|skypilot: every key or override written is one the tool's own schema or registry defines
(runtimes/finetune_launch.py and runtimes/skypilot.py cite each file at a commit), and each value is the setting
gpuwise estimated, worked by hand here (accumulation = global batch / (micro-batch x data-parallel ranks))."""

from __future__ import annotations

import ast
import copy
import importlib
import importlib.util
import json
import shlex
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.cli.main import app
from gpuwise.runtimes.finetune_launch import (
    AXOLOTL_FSDP_KEYS,
    AXOLOTL_KEYS,
    TORCHTUNE_CONFIGS,
    TORCHTUNE_OVERRIDES,
)
from gpuwise.runtimes.launch import LAUNCHES
from gpuwise.runtimes.skypilot import RESOURCES_KEYS, SERVICE_KEYS, TASK_KEYS

runner = CliRunner()
AXOLOTL_REQUIRED = {"base_model", "learning_rate", "datasets"}  # schemas/model.py, training.py; validation.py:81


def _estimate(*args: str) -> str:
    result = runner.invoke(app, ["estimate", *args])
    assert result.exit_code == 0, result.output
    return result.output


def _axolotl(*args: str) -> dict[str, Any]:
    config = yaml.safe_load(_estimate(*args, "--emit", "axolotl"))
    assert set(config) <= AXOLOTL_KEYS and set(config) >= AXOLOTL_REQUIRED
    return dict(config)


def test_an_axolotl_qlora_config_carries_the_estimated_settings() -> None:
    config = _axolotl("llama-3.1-8b", "--gpu", "rtx-4090", "--method", "qlora", "--batch", "2", "--global-batch", "16",
                      "--loss", "fused", "--lora-targets", "attn", "--ckpt", "full")
    assert config["base_model"] == "meta-llama/Llama-3.1-8B"
    assert (config["adapter"], config["load_in_4bit"], config["lora_r"]) == ("qlora", True, 16)  # qlora needs 4-bit
    assert (config["micro_batch_size"], config["gradient_accumulation_steps"]) == (2, 8)  # 16 / (2 x 1 GPU)
    assert config["lora_target_modules"] == ["q_proj", "k_proj", "v_proj", "o_proj"]
    assert config["plugins"] == ["axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin"]
    assert config["gradient_checkpointing"] is True and config["bf16"] is True
    assert "deepspeed" not in config and "fsdp_version" not in config  # one GPU: nothing to shard


def test_axolotl_shards_zero_2_and_3_with_fsdp2_and_zero_1_with_deepspeed() -> None:
    zero2 = _axolotl("llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--count", "4", "--zero", "2", "--batch", "4",
                     "--global-batch", "64", "--optimizer", "adamw-8bit", "--ckpt", "full")
    assert zero2["fsdp_version"] == 2 and set(zero2["fsdp_config"]) <= AXOLOTL_FSDP_KEYS
    assert zero2["fsdp_config"]["reshard_after_forward"] is False  # ZeRO-2: weights stay whole after forward
    assert zero2["gradient_accumulation_steps"] == 4  # 64 / (4 x 4 ranks)
    assert zero2["optimizer"] == "adamw_torch_8bit"  # FSDP2 refuses adamw_bnb_8bit (validation.py)
    assert zero2["fsdp_config"]["activation_checkpointing"] is True  # FSDP2 checkpoints through its own key
    zero1 = _axolotl("llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--count", "4", "--zero", "1", "--ckpt", "full")
    assert zero1["deepspeed"]["zero_optimization"] == {"stage": 1} and "fsdp_version" not in zero1


def test_what_axolotl_cannot_express_is_one_line() -> None:
    result = runner.invoke(app, ["estimate", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--precision", "pure-bf16",
                                 "--emit", "axolotl"])
    assert result.exit_code == 2 and "pure-bf16" in result.output and len(result.output.strip().splitlines()) == 1
    serving = runner.invoke(app, ["estimate", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--task", "infer", "--emit",
                                  "axolotl"])
    assert serving.exit_code == 2 and "--task train" in serving.output


def _tune(*args: str) -> tuple[list[str], dict[str, str]]:
    command = [line for line in _estimate(*args, "--emit", "torchtune").splitlines() if line.startswith("tune run")]
    words = shlex.split(command[0])
    recipe_at = next(i for i, w in enumerate(words) if w.endswith(("_single_device", "_distributed")))
    overrides = dict(w.split("=", 1) if "=" in w else (w, "") for w in words[recipe_at + 3:])
    assert words[recipe_at + 1] == "--config" and words[recipe_at + 2] in TORCHTUNE_CONFIGS[words[recipe_at]]
    assert set(overrides) <= TORCHTUNE_OVERRIDES
    return words, overrides


def test_torchtune_runs_the_registered_config_with_the_estimated_overrides() -> None:
    words, overrides = _tune("llama-3.1-8b", "--gpu", "rtx-4090", "--method", "qlora", "--batch", "2",
                             "--framework", "torchtune")
    assert words[2:5] == ["lora_finetune_single_device", "--config", "llama3_1/8B_qlora_single_device"]
    assert (overrides["batch_size"], overrides["dtype"], overrides["model.lora_rank"]) == ("2", "bf16", "16")
    assert overrides["enable_activation_checkpointing"] == "True"  # torchtune's own default, filled by --framework
    _, qwen = _tune("qwen2.5-7b", "--gpu", "rtx-4090", "--method", "qlora", "--framework", "torchtune")
    assert qwen["model.quantize_base"] == "True"  # no qwen2_5 qlora config: the LoRA one with a 4-bit base


def test_torchtune_on_several_gpus_is_the_distributed_recipe_under_torchrun() -> None:
    words, overrides = _tune("llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--count", "4", "--framework", "torchtune",
                             "--precision", "pure-bf16")
    assert words[:4] == ["tune", "run", "--nproc_per_node=4", "full_finetune_distributed"]
    assert words[5] == "llama3_1/8B_full" and overrides["fsdp_reshard_after_forward"] == "True"  # FSDP2 = ZeRO-3


def test_torchtune_refuses_what_it_cannot_run() -> None:
    for args, words in ((("mixtral-8x7b", "--gpu", "h100-sxm-80gb", "--framework", "torchtune"), "no configs"),
                        (("llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--precision", "bf16"), "autocast")):
        result = runner.invoke(app, ["estimate", *args, "--emit", "torchtune"])
        assert result.exit_code == 2 and words in result.output


def _task(text: str) -> dict[str, Any]:
    task = yaml.safe_load(text)
    assert set(task) <= TASK_KEYS and set(task["resources"]) <= RESOURCES_KEYS
    assert set(task.get("service", {})) <= SERVICE_KEYS
    return dict(task)


def test_a_skypilot_task_serves_each_machine_as_data_parallel_replicas() -> None:
    task = _task(_estimate("llama-3.1-70b", "--gpu", "h100-sxm-80gb", "--task", "infer", "--tp", "4", "--count", "8",
                           "--quant", "fp8", "--emit", "skypilot"))
    assert task["resources"]["accelerators"] == "H100:8" and task["resources"]["ports"] == 8000
    words = shlex.split(task["run"], comments=True)  # the lines above the command say where its settings come from
    assert words[2] == "RedHatAI/Meta-Llama-3.1-70B-FP8"  # https://huggingface.co/RedHatAI/Meta-Llama-3.1-70B-FP8
    flags = dict(zip(words[3::2], words[4::2], strict=True))
    assert set(flags) <= LAUNCHES["vllm"].documented
    assert (flags["--tensor-parallel-size"], flags["--data-parallel-size"], flags["--host"]) == ("4", "2", "0.0.0.0")


def test_a_skypilot_training_task_spans_its_nodes_with_torchrun() -> None:
    task = _task(_estimate("llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--count", "16", "--nodes", "2", "--network",
                           "ib-ndr", "--ckpt", "full", "--emit", "skypilot"))
    assert task["num_nodes"] == 2 and task["resources"]["accelerators"] == "H100:8"
    assert 'MASTER_ADDR=$(echo "$SKYPILOT_NODE_IPS" | head -n1)' in task["run"]  # SkyPilot's distributed-jobs.rst
    assert "--node_rank=$SKYPILOT_NODE_RANK" in task["run"]
    config = yaml.safe_load(task["setup"].split("<<'EOF'\n", 1)[1].split("EOF", 1)[0])
    assert set(config) <= AXOLOTL_KEYS and config["fsdp_config"]["reshard_after_forward"] is True


def _aws_spot(root: Path) -> Path:
    """One row of skypilot-catalog catalogs/v8/aws/vms.csv (@00148f2a): p5.48xlarge in us-east-1."""
    (root / "aws").mkdir(parents=True)
    info = ("\"{'Gpus': [{'Name': 'H100', 'Manufacturer': 'NVIDIA', 'Count': 8.0, "
            "'MemoryInfo': {'SizeInMiB': 81920}}]}\"")
    (root / "aws" / "vms.csv").write_text(
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,"
        f"AvailabilityZone,Arch\np5.48xlarge,H100,8.0,192.0,2048.0,{info},55.04,19.2531,us-east-1,use1-az2,x86_64\n")
    return root


def test_recommend_writes_a_task_for_the_rented_spot_offer_it_ranked(tmp_path: Path) -> None:
    synced = tmp_path / "synced.yaml"
    api.sync_offers(_aws_spot(tmp_path / "sky"), target=synced)
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump({
        "workloads": [{"model": "llama-3.1-70b", "task": "infer", "qps": 2}], "acquisitions": ["rent"],
        "spot": True, "gpus": ["h100-sxm-80gb"], "providers": ["aws"], "top": 1}))
    result = runner.invoke(app, ["recommend", "--scenario", str(scenario), "--catalog", str(synced), "--emit",
                                 "skypilot", "--json"])
    assert result.exit_code == 0, result.output
    option = json.loads(result.output)["options"][0]
    assert ":spot:" in option["acquisition"]
    task = _task(option["launch"][0])
    assert task["resources"]["infra"] == "aws/us-east-1" and task["resources"]["use_spot"] is True
    assert task["resources"]["accelerators"] == "H100:8"


@pytest.mark.parametrize("tool", ["torchtune", "skypilot"])
def test_an_option_a_tool_cannot_start_says_why(tool: str) -> None:
    result = runner.invoke(app, ["recommend", "llama-3.1-8b", "--task", "train", "--method", "qlora", "--buy",
                                 "--top", "1", "--emit", tool, "--json"])
    assert result.exit_code == 0, result.output
    launch = json.loads(result.output)["options"][0]["launch"][0]
    assert launch.startswith("# llama-3.1-8b: not emitted:")


@pytest.mark.parametrize("args", [("--task", "hpc", "--app", "gromacs"), ("sdxl", "--task", "infer")])
def test_emit_on_a_job_it_cannot_start_is_refused_not_ignored(args: tuple[str, ...]) -> None:
    result = runner.invoke(app, ["estimate", *args, "--gpu", "h100-sxm-80gb", "--emit", "vllm"])
    assert result.exit_code == 2 and "--emit" in result.output


def test_the_readme_axolotl_example_is_refused_with_the_fix_fit_suggests() -> None:
    """The issue's case: `gradient_checkpointing: false` for a job the estimate says needs 32.3 of 24 GiB. `gpuwise fit`
    names the change that fits it; emit refuses in one line naming it, and the job with it emits the knob."""
    args = ("llama-3.1-8b", "--gpu", "rtx-4090", "--method", "qlora", "--global-batch", "16")
    changes = json.loads(runner.invoke(app, ["fit", *args, "--json"]).output)["plan"]
    refused = runner.invoke(app, ["estimate", *args, "--emit", "axolotl"])
    assert refused.exit_code == 2 and len(refused.output.strip().splitlines()) == 1
    assert changes == ["--ckpt full"] and "--ckpt full" in refused.output
    config = _axolotl(*args, *changes[0].split())
    assert config["gradient_checkpointing"] is True


AXOLOTL_JOBS = [
    ("llama-3.1-8b", "--gpu", "rtx-4090", "--method", "qlora", "--batch", "2", "--global-batch", "16", "--loss",
     "fused", "--lora-targets", "attn", "--ckpt", "full"),
    ("llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--count", "4", "--zero", "2", "--batch", "4", "--global-batch", "64",
     "--optimizer", "adamw-8bit", "--ckpt", "full"),
    ("llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--count", "4", "--zero", "1", "--ckpt", "full"),
    ("qwen2.5-14b", "--gpu", "h100-sxm-80gb", "--count", "8", "--tp", "2", "--zero", "3", "--ckpt", "full",
     "--loss", "chunked"),
]


def _axolotl_schema() -> Any:
    """axolotl's own pydantic config schema (src/axolotl/utils/schemas/config.py AxolotlInputConfig). It installs
    without a GPU: `pip install --no-deps axolotl==0.18.0 pillow` beside this project's torch, transformers and PEFT
    (docs/commands.md, "Checking --emit with the tools' own parsers")."""
    pytest.importorskip("axolotl", reason="axolotl not installed: keys checked against its schema at a cited commit")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return importlib.import_module("axolotl.utils.schemas.config").AxolotlInputConfig


def _plugin_keys(module: str) -> set[str]:
    """The fields a plugin's args class declares, read from its installed source: importing it pulls in axolotl's
    whole training stack (its Trainer, wandb ...), which the schema alone does not need."""
    spec = importlib.util.find_spec("axolotl")
    assert spec is not None and spec.submodule_search_locations
    path = Path(spec.submodule_search_locations[0], *module.split(".")[1:]).with_suffix(".py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.target.id for cls in tree.body if isinstance(cls, ast.ClassDef) for node in cls.body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}


@pytest.mark.parametrize("args", AXOLOTL_JOBS)
def test_axolotls_own_schema_validates_each_emitted_config(args: tuple[str, ...]) -> None:
    schema = _axolotl_schema()
    config = _axolotl(*args)
    plugins = _plugin_keys("axolotl.integrations.cut_cross_entropy.args") if config.get("plugins") else set()
    assert set(config) <= set(schema.model_fields) | plugins  # axolotl ignores an unknown key without a word
    config = {k: v for k, v in config.items() if k not in plugins}  # the plugin's args join the schema at load
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        validated = schema(**config)
    assert validated.micro_batch_size == config["micro_batch_size"]
    assert validated.gradient_accumulation_steps == config["gradient_accumulation_steps"]


def _skypilot() -> Any:
    """SkyPilot's own task loader (sky/task.py Task.from_yaml_config, which validates against
    sky/utils/schemas.py get_task_schema). It installs without a GPU or a cloud account."""
    pytest.importorskip("sky", reason="SkyPilot not installed: keys checked against its schema at a cited commit")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return importlib.import_module("sky")


@pytest.mark.parametrize("args", [
    ("llama-3.1-70b", "--gpu", "h100-sxm-80gb", "--task", "infer", "--tp", "4", "--count", "8", "--quant", "fp8"),
    ("llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--count", "16", "--nodes", "2", "--network", "ib-ndr", "--ckpt",
     "full"),
    ("qwen3-8b", "--gpu", "h100-sxm-80gb", "--count", "8", "--framework", "torchtune"),
])
def test_skypilots_own_loader_reads_each_emitted_task(args: tuple[str, ...]) -> None:
    sky = _skypilot()
    config = yaml.safe_load(_estimate(*args, "--emit", "skypilot"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        task = sky.Task.from_yaml_config(copy.deepcopy(config))  # it pops the keys it reads
    (resources,) = task.resources
    assert task.num_nodes == config.get("num_nodes", 1)
    assert resources.accelerators == {"H100": int(config["resources"]["accelerators"].split(":")[1])}
