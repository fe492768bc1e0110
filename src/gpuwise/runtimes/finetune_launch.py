"""How the fine-tuning tools are launched with the settings gpuwise assumed: each tool's key or override for each
setting, the values it takes, and the names it registers -- every one as the tool's own schema or registry defines it
at the commit cited (the tests check each emitted key against these sets)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from gpuwise.runtimes import DEFAULT_FRAMEWORK
from gpuwise.runtimes.launch import ToolKind

AXOLOTL_COMMIT = "axolotl-ai-cloud/axolotl@067b021c (v0.18.0)"
AXOLOTL_SOURCE = (AXOLOTL_COMMIT + " src/axolotl/utils/schemas/config.py AxolotlInputConfig (sequence_len, "
                  "gradient_checkpointing, bf16, fp16, attn_implementation, deepspeed, chunked_cross_entropy, "
                  "plugins), peft.py LoraConfig (adapter, load_in_4bit, lora_r, lora_alpha, lora_dropout, "
                  "lora_target_modules, lora_target_linear), training.py HyperparametersConfig (micro_batch_size, "
                  "gradient_accumulation_steps, optimizer, learning_rate, num_epochs), model.py (base_model, "
                  "output_dir, activation_offloading, fsdp_version, fsdp_config, tensor_parallel_size, dp_shard_size); "
                  "integrations/cut_cross_entropy/args.py (cut_cross_entropy)")
AXOLOTL_KEYS = frozenset({
    "base_model", "datasets", "output_dir", "learning_rate", "num_epochs", "sequence_len", "sample_packing",
    "micro_batch_size", "gradient_accumulation_steps", "gradient_checkpointing", "bf16", "fp16", "optimizer",
    "attn_implementation", "adapter", "load_in_4bit", "lora_r", "lora_alpha", "lora_dropout", "lora_target_modules",
    "lora_target_linear", "deepspeed", "chunked_cross_entropy", "plugins", "cut_cross_entropy", "activation_offloading",
    "fsdp_version", "fsdp_config", "tensor_parallel_size", "dp_shard_size"})
"""The keys gpuwise writes, each defined by axolotl's schema at AXOLOTL_COMMIT. axolotl drops an unknown key without
a word (pydantic's default 'ignore'), so this set is the only guard against a misspelled one."""
AXOLOTL_FSDP_KEYS = frozenset({"reshard_after_forward", "offload_params", "auto_wrap_policy", "state_dict_type",
                               "activation_checkpointing"})
"""fsdp_config's keys (src/axolotl/utils/schemas/fsdp.py FSDPConfig; docs/multi-gpu.qmd: FSDP2, ZeRO-2 as
reshard_after_forward false, ZeRO-3 true; docs/nd_parallelism.qmd: tensor_parallel_size and dp_shard_size)."""
AXOLOTL_FSDP2_OPTIMIZERS: Mapping[str, str] = {"adamw-8bit": "adamw_torch_8bit"}
"""validation.py: FSDP2 refuses adamw_bnb_8bit and names adamw_torch_8bit instead (8-bit states as well)."""
AXOLOTL_CUT_CROSS_ENTROPY = "axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin"
AXOLOTL_INSTALL = "pip install axolotl==0.18.0"

TRANSFORMERS_OPTIMIZERS: Mapping[str, str] = {
    "adamw": "adamw_torch", "adamw-8bit": "adamw_bnb_8bit", "paged-adamw-8bit": "paged_adamw_8bit",
    "paged-adamw": "paged_adamw_32bit", "sgd": "sgd", "adafactor": "adafactor"}
"""gpuwise's optimizer as transformers' ``TrainingArguments(optim=...)`` names it (transformers
src/transformers/training_args.py OptimizerNames); axolotl passes these names through to it."""

DEEPSPEED_SOURCE = ("deepspeed.ai/docs/config-json (zero_optimization.stage, offload_optimizer.device, "
                    "offload_param.device); 'auto' values as transformers' DeepSpeed integration fills them")

TORCHTUNE_COMMIT = "pytorch/torchtune@bd2a0fc7"
TORCHTUNE_SOURCE = (TORCHTUNE_COMMIT + " torchtune/_recipe_registry.py (recipes and configs), recipes/"
                    "configs/llama3_1/8B_lora_single_device.yaml and 8B_full.yaml (override keys), recipes/"
                    "full_finetune_distributed.py (tensor_parallel_dim, fsdp_cpu_offload, "
                    "fsdp_reshard_after_forward); torchtune/_cli/run.py (tune run [TORCHRUN-OPTIONS] <recipe> "
                    "--config <config> [key=value ...])")
TORCHTUNE_INSTALL = "pip install git+https://github.com/pytorch/torchtune@bd2a0fc7c31430972728494fa01aaeeb0ebf1ba1"
TORCHTUNE_NOTE = ("torchtune is no longer actively developed (its README at bd2a0fc7, issue "
                  "meta-pytorch/torchtune#2883); its last PyPI release, 0.6.1, lacks the qwen3 configs and "
                  "LinearCrossEntropyLoss, so install it from that commit")
TORCHTUNE_OVERRIDES = frozenset({
    "batch_size", "gradient_accumulation_steps", "enable_activation_checkpointing", "enable_activation_offloading",
    "dtype", "optimizer._component_", "~optimizer.fused", "optimizer_in_bwd", "model.lora_rank", "model.lora_alpha",
    "model.lora_attn_modules", "model.apply_lora_to_mlp", "model.quantize_base", "tokenizer.max_seq_len", "compile",
    "loss._component_", "fsdp_cpu_offload", "fsdp_reshard_after_forward", "tensor_parallel_dim",
    "checkpointer.checkpoint_dir", "tokenizer.path", "tokenizer.merges_file", "tokenizer.vocab_path",
    "tokenizer.merges_path"})
TORCHTUNE_MODEL_DIR = "/tmp/gpuwise-model"  # where `tune download HUB --output-dir` puts the checkpoint
TORCHTUNE_TOKENIZER_FILES: Mapping[str, Mapping[str, str]] = {
    "llama3_1": {"tokenizer.path": "original/tokenizer.model"},
    "llama3_2": {"tokenizer.path": "original/tokenizer.model"},
    "llama3_3": {"tokenizer.path": "original/tokenizer.model"},
    "qwen2_5": {"tokenizer.path": "vocab.json", "tokenizer.merges_file": "merges.txt"},
    "qwen3": {"tokenizer.path": "vocab.json", "tokenizer.merges_file": "merges.txt"},
    "gemma2": {"tokenizer.path": "tokenizer.model"}, "mistral": {"tokenizer.path": "tokenizer.model"},
    "phi3": {"tokenizer.path": "tokenizer.model"},
    "phi4": {"tokenizer.vocab_path": "vocab.json", "tokenizer.merges_path": "merges.txt"}}
"""Each family's tokenizer files inside the downloaded checkpoint, as its configs' tokenizer block names them
(recipes/configs/<family>/*_full.yaml at TORCHTUNE_COMMIT); the configs' own usage line overrides
checkpointer.checkpoint_dir=<YOUR_CHECKPOINT_DIR>."""
TORCHTUNE_OPTIMIZERS: Mapping[str, str] = {
    "adamw": "torch.optim.AdamW", "adamw-8bit": "bitsandbytes.optim.AdamW8bit",
    "paged-adamw-8bit": "bitsandbytes.optim.PagedAdamW8bit", "paged-adamw": "bitsandbytes.optim.PagedAdamW",
    "sgd": "torch.optim.SGD", "adafactor": "torch.optim.Adafactor"}
TORCHTUNE_LOSSES: Mapping[str, str] = {
    "standard": "torch.nn.CrossEntropyLoss",  # full_finetune_distributed.py: 'post process for third party loss'
    "chunked": "torchtune.modules.loss.LinearCrossEntropyLoss"}  # the output projection and loss chunk by chunk
TORCHTUNE_ATTENTION = "[q_proj,k_proj,v_proj,output_proj]"  # torchtune/modules/peft/_utils.py LORA_ATTN_MODULES

TORCHTUNE_MODELS: Mapping[str, tuple[str, str]] = {
    "llama-3.1-8b": ("llama3_1", "8B"), "llama-3.1-70b": ("llama3_1", "70B"), "llama-3.1-405b": ("llama3_1", "405B"),
    "llama-3.2-1b": ("llama3_2", "1B"), "llama-3.2-3b": ("llama3_2", "3B"), "llama-3.3-70b": ("llama3_3", "70B"),
    "qwen2.5-0.5b": ("qwen2_5", "0.5B"), "qwen2.5-1.5b": ("qwen2_5", "1.5B"), "qwen2.5-7b": ("qwen2_5", "7B"),
    "qwen2.5-14b": ("qwen2_5", "14B"), "qwen2.5-32b": ("qwen2_5", "32B"), "qwen2.5-72b": ("qwen2_5", "72B"),
    "qwen3-0.6b": ("qwen3", "0.6B"), "qwen3-1.7b": ("qwen3", "1.7B"), "qwen3-4b": ("qwen3", "4B"),
    "qwen3-8b": ("qwen3", "8B"), "qwen3-14b": ("qwen3", "14B"), "qwen3-32b": ("qwen3", "32B"),
    "gemma-2-2b": ("gemma2", "2B"), "gemma-2-9b": ("gemma2", "9B"), "gemma-2-27b": ("gemma2", "27B"),
    "mistral-7b": ("mistral", "7B"), "phi-3-mini": ("phi3", "mini"), "phi-4": ("phi4", "14B")}
"""The catalog presets torchtune has a model builder and configs for (recipes/configs/<family>/)."""

TORCHTUNE_CONFIGS: Mapping[str, frozenset[str]] = {
    "full_finetune_single_device": frozenset({
        "llama3_1/8B_full_single_device", "llama3_2/1B_full_single_device", "llama3_2/3B_full_single_device",
        "qwen2_5/0.5B_full_single_device", "qwen2_5/1.5B_full_single_device", "qwen2_5/3B_full_single_device",
        "qwen2_5/7B_full_single_device", "qwen3/0.6B_full_single_device", "qwen3/1.7B_full_single_device",
        "qwen3/4B_full_single_device", "qwen3/8B_full_single_device", "mistral/7B_full_low_memory",
        "phi3/mini_full_low_memory", "phi4/14B_full_low_memory"}),
    "full_finetune_distributed": frozenset({
        "llama3_1/8B_full", "llama3_1/70B_full", "llama3_2/1B_full", "llama3_2/3B_full", "llama3_3/70B_full",
        "llama3_3/70B_full_multinode", "qwen2_5/0.5B_full", "qwen2_5/1.5B_full", "qwen2_5/3B_full",
        "qwen2_5/7B_full", "qwen3/0.6B_full", "qwen3/1.7B_full", "qwen3/4B_full", "qwen3/8B_full", "gemma2/2B_full",
        "gemma2/9B_full", "gemma2/27B_full", "mistral/7B_full", "phi3/mini_full", "phi4/14B_full"}),
    "lora_finetune_single_device": frozenset({
        "llama3_1/8B_lora_single_device", "llama3_1/8B_qlora_single_device", "llama3_2/1B_lora_single_device",
        "llama3_2/3B_lora_single_device", "llama3_2/1B_qlora_single_device", "llama3_2/3B_qlora_single_device",
        "qwen2_5/0.5B_lora_single_device", "qwen2_5/1.5B_lora_single_device", "qwen2_5/3B_lora_single_device",
        "qwen2_5/7B_lora_single_device", "qwen2_5/14B_lora_single_device", "qwen3/0.6B_lora_single_device",
        "qwen3/1.7B_lora_single_device", "qwen3/4B_lora_single_device", "qwen3/8B_lora_single_device",
        "qwen3/14B_lora_single_device", "gemma2/2B_lora_single_device", "gemma2/2B_qlora_single_device",
        "gemma2/9B_lora_single_device", "gemma2/9B_qlora_single_device", "gemma2/27B_lora_single_device",
        "gemma2/27B_qlora_single_device", "mistral/7B_lora_single_device", "mistral/7B_qlora_single_device",
        "phi3/mini_lora_single_device", "phi3/mini_qlora_single_device", "phi4/14B_lora_single_device",
        "phi4/14B_qlora_single_device"}),
    "lora_finetune_distributed": frozenset({
        "llama3_1/8B_lora", "llama3_1/70B_lora", "llama3_1/405B_qlora", "llama3_2/1B_lora", "llama3_2/3B_lora",
        "llama3_3/70B_lora", "llama3_3/70B_qlora", "qwen2_5/0.5B_lora", "qwen2_5/1.5B_lora", "qwen2_5/3B_lora",
        "qwen2_5/7B_lora", "qwen2_5/32B_lora", "qwen2_5/72B_lora", "qwen3/0.6B_lora", "qwen3/1.7B_lora",
        "qwen3/4B_lora", "qwen3/8B_lora", "qwen3/32B_lora", "gemma2/2B_lora", "gemma2/9B_lora", "gemma2/27B_lora",
        "mistral/7B_lora", "phi3/mini_lora", "phi4/14B_lora"}),
}
"""Each recipe's registered configs at TORCHTUNE_COMMIT (torchtune/_recipe_registry.py). QLoRA runs under the LoRA
recipes; where no qlora config exists, a LoRA config with model.quantize_base=True (every lora_* builder takes it)."""
TORCHTUNE_TENSOR_PARALLEL = frozenset({"llama3_1/70B_full", "llama3_3/70B_full", "llama3_3/70B_full_multinode"})
"""The configs that carry a tensor_parallel_plan, without which tensor_parallel_dim has nothing to shard by."""

ShardingWrite = Literal["nothing", "zero_config", "fsdp_config"]
"""What a training tool's config writes to shard a job as the plan's data-parallel runtime does:
    nothing      no key: the tool's own DDP (or a runtime's stage 0, which that matches in memory)
    zero_config  a DeepSpeed ZeRO config (zero_optimization.stage, offload_optimizer, offload_param), inline
    fsdp_config  FSDP settings (reshard_after_forward at stage 3, offload_params, the wrap policy)"""


@dataclass(frozen=True)
class Sharded:
    """How a training tool's config expresses one data-parallel runtime of ``runtimes/sharding.py`` (a runtime it
    has no entry for, it cannot express): the ZeRO stages it runs it at, what it writes and under which key, the
    keys written beside it, and what else changes under it."""

    stages: frozenset[int]
    writes: ShardingWrite
    source: str
    key: str = ""  # the config file's key that holds what it writes ("" for nothing, or top-level overrides)
    beside: Mapping[str, object] = field(default_factory=dict)  # keys written with it (fsdp_version: 2)
    tensor_parallel: bool = False  # the tool runs tensor parallelism under this runtime (and only under such)
    checkpoints_activations: bool = False  # activation checkpointing is the runtime's own setting, not the model's
    optimizers: Mapping[str, str] = field(default_factory=dict)  # optimizer names it takes instead of transformers'


@dataclass(frozen=True)
class TrainingTool:
    """A fine-tuning tool gpuwise writes for: how it is configured (a config file it reads, or a registered config
    with key=value overrides on its command line), its install line, and the data-parallel runtimes its config
    can express (runtimes/sharding.py ids; stage 0 writes nothing)."""

    id: str
    name: str
    config: Literal["file", "command"]
    install: str
    shards: Mapping[str, Sharded]
    hybrid: bool = False  # expresses hybrid sharding (--hybrid-shard: sharded within a node, replicated across)
    kind: ToolKind = "training"


AXOLOTL = TrainingTool(
    id="axolotl", name="axolotl", config="file", install=AXOLOTL_INSTALL,
    shards={
        "ddp": Sharded(frozenset({0}), "nothing", "axolotl's bf16 DDP under torchrun (no sharding key)"),
        "deepspeed": Sharded(frozenset({0, 1, 2, 3}), "zero_config", AXOLOTL_COMMIT + " config.py deepspeed: a "
                             "path or a dict (DeepSpeed's config JSON); " + DEEPSPEED_SOURCE, key="deepspeed"),
        "fsdp2": Sharded(frozenset({0, 2, 3}), "fsdp_config", AXOLOTL_COMMIT + " docs/multi-gpu.qmd (FSDP2: "
                         "fsdp_version 2, ZeRO-2 as reshard_after_forward false, ZeRO-3 true), "
                         "src/axolotl/utils/schemas/fsdp.py FSDPConfig (activation_checkpointing), "
                         "docs/nd_parallelism.qmd (tensor_parallel_size under FSDP2), validation.py (FSDP2 "
                         "optimizers)", key="fsdp_config", beside={"fsdp_version": 2}, tensor_parallel=True,
                         checkpoints_activations=True, optimizers=AXOLOTL_FSDP2_OPTIMIZERS),
    })
"""axolotl: a YAML config file (AXOLOTL_KEYS); DDP, DeepSpeed ZeRO and FSDP2, not FSDP (version 1), Megatron or
hybrid sharding."""

TORCHTUNE = TrainingTool(
    id="torchtune", name="torchtune", config="command", install=TORCHTUNE_INSTALL,
    shards={"fsdp2": Sharded(frozenset({2, 3}), "fsdp_config", TORCHTUNE_SOURCE + ": the distributed recipes "
                             "shard with FSDP2, fsdp_reshard_after_forward True (ZeRO-3) or False (ZeRO-2)")})
"""torchtune: ``tune run RECIPE --config NAME key=value ...`` (TORCHTUNE_OVERRIDES); over several data-parallel GPUs
only FSDP2 at ZeRO-2 or ZeRO-3 (one GPU runs any runtime's single-device recipe)."""

TRAINING_TOOLS: Mapping[str, TrainingTool] = {t.id: t for t in (AXOLOTL, TORCHTUNE)}
"""The training tools --emit writes for, by id."""

TRAINING_LAUNCHERS: Mapping[str, str] = {"torchtune": "torchtune", "axolotl": "axolotl", "hf": "axolotl",
                                         "unsloth": "axolotl", "llama-factory": "axolotl", "deepspeed": "axolotl"}
"""Which tool a SkyPilot task starts for a job of each --framework (unset: axolotl, which runs the same transformers
and PEFT code as the hf estimate); torchtitan and Megatron jobs are not emitted."""


def training_launcher(framework: str | None) -> TrainingTool | None:
    """The tool a SkyPilot task starts for a job of ``--framework framework`` (unset: transformers' Trainer, which
    axolotl runs); None where gpuwise writes no launch for it."""
    found = TRAINING_LAUNCHERS.get(framework or DEFAULT_FRAMEWORK)
    return TRAINING_TOOLS[found] if found is not None else None
