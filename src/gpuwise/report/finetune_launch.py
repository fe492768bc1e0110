"""A training job as axolotl or torchtune runs it: the axolotl config, or the ``tune run`` command, with exactly the
settings gpuwise estimated; a setting the tool cannot express is a one-line error, not a silent approximation."""

from __future__ import annotations

import shlex

import yaml

from gpuwise.api import TrainJob
from gpuwise.api.launching import (
    AXOLOTL,
    AXOLOTL_COMMIT,
    AXOLOTL_CUT_CROSS_ENTROPY,
    TORCHTUNE,
    TORCHTUNE_ATTENTION,
    TORCHTUNE_COMMIT,
    TORCHTUNE_CONFIGS,
    TORCHTUNE_LOSSES,
    TORCHTUNE_MODEL_DIR,
    TORCHTUNE_MODELS,
    TORCHTUNE_NOTE,
    TORCHTUNE_OPTIMIZERS,
    TORCHTUNE_TENSOR_PARALLEL,
    TORCHTUNE_TOKENIZER_FILES,
    TRANSFORMERS_OPTIMIZERS,
    Sharded,
    accumulation_steps,
)
from gpuwise.api.shell import Sharding
from gpuwise.errors import ConfigError

AXOLOTL_FILE = "gpuwise-axolotl.yml"
_ATTENTION_PROJECTIONS = ["q_proj", "k_proj", "v_proj", "o_proj"]


def torchrun_flags(job: TrainJob, *, skypilot: bool = False) -> list[str]:
    """torchrun's placement flags for the job's GPUs: per node, and across nodes the rendezvous SkyPilot's
    environment gives (docs/source/running-jobs/distributed-jobs.rst) or that the user fills in."""
    per_node = job.count // job.nodes
    if job.nodes == 1:
        return [f"--nproc_per_node={per_node}"]
    if skypilot:
        return ["--nnodes=$SKYPILOT_NUM_NODES", "--nproc_per_node=$SKYPILOT_NUM_GPUS_PER_NODE",
                "--node_rank=$SKYPILOT_NODE_RANK", "--master_addr=$MASTER_ADDR", "--master_port=8008"]
    return [f"--nnodes={job.nodes}", f"--nproc_per_node={per_node}", "--node_rank=$NODE_RANK",
            "--master_addr=$MASTER_ADDR", "--master_port=29500"]


def axolotl_config(job: TrainJob, hub_id: str, sharding: Sharding) -> dict[str, object]:
    """The axolotl config (keys of runtimes.finetune_launch.AXOLOTL_KEYS) of ``job`` on ``hub_id``, sharded as the
    plan's data-parallel runtime (``sharding``) says."""
    _axolotl_expressible(job)
    sharded = _sharded(sharding)
    config: dict[str, object] = {
        "base_model": hub_id, "datasets": [{"path": "REPLACE-WITH-YOUR-DATASET", "type": "alpaca"}],
        "output_dir": "./outputs/gpuwise", "learning_rate": 2e-4 if job.trains_adapters else 1e-5, "num_epochs": 1,
        "sequence_len": job.seq, "sample_packing": job.packed, "micro_batch_size": job.batch,
        "gradient_accumulation_steps": accumulation_steps(job),
        "gradient_checkpointing": job.ckpt == "full" and not (sharded and sharded.checkpoints_activations),
        "activation_offloading": job.activation_offload,
        "bf16": job.precision == "bf16", "fp16": job.precision == "fp16",
        "optimizer": (sharded.optimizers if sharded else {}).get(job.optimizer, TRANSFORMERS_OPTIMIZERS[job.optimizer]),
        "attn_implementation": "flash_attention_2" if job.flash_attn else "eager"}
    if job.trains_adapters:
        config.update(adapter=job.method, lora_r=job.lora_rank, lora_alpha=2 * job.lora_rank, lora_dropout=0.05)
        config.update(lora_target_linear=True) if job.lora_targets == "all-linear" else config.update(
            lora_target_modules=_ATTENTION_PROJECTIONS)
    if job.method == "qlora":
        config["load_in_4bit"] = True
    if job.loss == "chunked":
        config["chunked_cross_entropy"] = True
    elif job.loss == "fused":
        config.update(plugins=[AXOLOTL_CUT_CROSS_ENTROPY], cut_cross_entropy=True)
    config.update(_sharding(job, sharding))
    return config


def _sharded(sharding: Sharding) -> Sharded | None:
    """How axolotl's config says the plan's data-parallel runtime shards (runtimes.finetune_launch AXOLOTL), where it
    shards at all: None at stage 0 (plain DDP, or a runtime's stage 0, which axolotl's bf16 DDP matches in memory)
    and for a runtime axolotl cannot express."""
    found = AXOLOTL.shards.get(sharding.profile.id)
    return found if found is not None and sharding.stage else None


def _sharding(job: TrainJob, sharding: Sharding) -> dict[str, object]:
    expressed, sharded = AXOLOTL.shards.get(sharding.profile.id), _sharded(sharding)
    if job.tp > 1 and not (sharded and sharded.tensor_parallel):
        raise ConfigError("axolotl runs tensor parallel under FSDP2 (docs/nd_parallelism.qmd): estimate with "
                          "--sharding fsdp2 --zero 2 or 3")
    if expressed is None or sharding.stage not in expressed.stages or (sharding.hybrid and not AXOLOTL.hybrid):
        raise ConfigError(f"the estimate shards with {sharding.name}; gpuwise writes axolotl's FSDP2 and DeepSpeed "
                          "configs: estimate with --sharding fsdp2 or deepspeed (no --hybrid-shard)")
    if sharded is None or sharded.writes == "nothing":
        return {}
    if sharded.writes == "zero_config":
        return {sharded.key: _deepspeed(job, sharding.stage)}
    fsdp: dict[str, object] = {"reshard_after_forward": sharding.stage == 3,
                               "offload_params": job.offload == "optimizer+params",
                               "auto_wrap_policy": "TRANSFORMER_BASED_WRAP", "state_dict_type": "FULL_STATE_DICT"}
    if job.ckpt == "full":
        fsdp["activation_checkpointing"] = True
    written: dict[str, object] = {**sharded.beside, sharded.key: fsdp}
    if job.tp > 1:
        written.update(tensor_parallel_size=job.tp, dp_shard_size=job.count // job.tp)
    return written


def axolotl_text(job: TrainJob, hub_id: str, sharding: Sharding) -> str:
    """The config as a file, headed by how to launch it."""
    launch = f"axolotl train {AXOLOTL_FILE}"
    if job.count > 1:
        launch += " --launcher torchrun -- " + " ".join(torchrun_flags(job))
    head = (f"# axolotl config for {hub_id}, {job.method}, on {job.count} GPU(s), as gpuwise estimated it "
            f"(keys as {AXOLOTL_COMMIT} defines them)\n# save as {AXOLOTL_FILE}, set datasets, then: {launch}\n")
    return head + yaml.safe_dump(axolotl_config(job, hub_id, sharding), sort_keys=False)


def _axolotl_expressible(job: TrainJob) -> None:
    refused = {"--precision pure-bf16 or fp8": job.precision in ("pure-bf16", "fp8"),
               "--ckpt selective": job.ckpt == "selective", "--compile": job.compile,
               "--optim-in-bwd": job.optimizer_in_backward, "--pp above 1": job.pp > 1}
    for flag, present in refused.items():
        if present:
            raise ConfigError(f"axolotl's config (at {AXOLOTL_COMMIT}) has no key for {flag}: estimate without it, "
                              "or emit torchtune")


def _deepspeed(job: TrainJob, stage: int) -> dict[str, object]:
    """DeepSpeed's ZeRO config inline (axolotl's deepspeed key takes a dict), 'auto' where transformers fills it."""
    zero: dict[str, object] = {"stage": stage}
    if job.offload != "none":
        zero["offload_optimizer"] = {"device": "cpu"}
    if job.offload == "optimizer+params":
        zero["offload_param"] = {"device": "cpu"}
    return {"zero_optimization": zero, "bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"},
            "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto"}


def torchtune_overrides(job: TrainJob, sharding: Sharding) -> list[str]:
    """The key=value overrides (TORCHTUNE_OVERRIDES keys) of ``job`` under torchtune."""
    if job.precision not in ("pure-bf16", "fp32"):
        raise ConfigError(f"torchtune trains without autocast (dtype bf16 or fp32), not --precision {job.precision}: "
                          "estimate with --precision pure-bf16, or --framework torchtune")
    if job.loss not in TORCHTUNE_LOSSES:
        raise ConfigError("torchtune has no fused linear cross-entropy kernel (its LinearCrossEntropyLoss is --loss "
                          "chunked): estimate with --loss chunked")
    expressed = TORCHTUNE.shards.get(sharding.profile.id)
    if job.data_parallel > 1 and (expressed is None or sharding.stage not in expressed.stages):
        raise ConfigError("torchtune's distributed recipes shard with FSDP2 (ZeRO-3, or ZeRO-2 without resharding "
                          f"after forward); the estimate's {sharding.name} over several GPUs has no recipe")
    values = [f"batch_size={job.batch}", f"gradient_accumulation_steps={accumulation_steps(job)}",
              f"enable_activation_checkpointing={job.ckpt != 'none'}",
              f"enable_activation_offloading={job.activation_offload}",
              f"dtype={'bf16' if job.precision == 'pure-bf16' else 'fp32'}",
              f"optimizer._component_={TORCHTUNE_OPTIMIZERS[job.optimizer]}", f"tokenizer.max_seq_len={job.seq}",
              f"compile={job.compile}", f"loss._component_={TORCHTUNE_LOSSES[job.loss]}"]
    if job.optimizer != "adamw":
        values.append("~optimizer.fused")  # the sample configs' torch AdamW(fused=True); other optimizers lack it
    if job.trains_adapters:
        values += [f"model.lora_rank={job.lora_rank}", f"model.lora_alpha={2 * job.lora_rank}",
                   f"model.lora_attn_modules={TORCHTUNE_ATTENTION}",
                   f"model.apply_lora_to_mlp={job.lora_targets == 'all-linear'}"]
    else:
        values.append(f"optimizer_in_bwd={job.optimizer_in_backward}")
    if job.count > 1:
        values += [f"fsdp_cpu_offload={job.offload != 'none'}", f"fsdp_reshard_after_forward={sharding.stage == 3}"]
    if job.tp > 1:
        values.append(f"tensor_parallel_dim={job.tp}")
    return values


def torchtune_command(job: TrainJob, preset: str, sharding: Sharding, *, skypilot: bool = False) -> str:
    """``tune run [torchrun flags] RECIPE --config FAMILY/NAME key=value ...`` for ``job`` on a catalog preset."""
    recipe, config, extra = _torchtune_config(job, preset)
    family = TORCHTUNE_MODELS[preset][0]
    extra += [f"checkpointer.checkpoint_dir={TORCHTUNE_MODEL_DIR}"] + [
        f"{key}={TORCHTUNE_MODEL_DIR}/{file}" for key, file in TORCHTUNE_TOKENIZER_FILES[family].items()]
    placement = torchrun_flags(job, skypilot=skypilot) if job.count > 1 else []
    words = ["tune", "run", *placement, recipe, "--config", config, *torchtune_overrides(job, sharding), *extra]
    return " ".join(w if "$" in w else shlex.quote(w) for w in words)


def _torchtune_config(job: TrainJob, preset: str) -> tuple[str, str, list[str]]:
    family = TORCHTUNE_MODELS.get(preset)
    if family is None:
        raise ConfigError(f"torchtune (at {TORCHTUNE_COMMIT}) has no configs for {preset[:60]!r}; it builds "
                          + ", ".join(sorted(TORCHTUNE_MODELS)[:8]) + " ... (emit axolotl for others)")
    kind = "lora" if job.trains_adapters else "full"
    recipe = f"{kind}_finetune_{'distributed' if job.count > 1 else 'single_device'}"
    registered = TORCHTUNE_CONFIGS[recipe]
    stem = f"{family[0]}/{family[1]}_"
    tails = {"full": ("full", "full_low_memory") if job.count == 1 else ("full",),
             "lora": (("qlora", "lora") if job.method == "qlora" else ("lora",))}[kind]
    suffix = "_single_device" if job.count == 1 else ""
    for tail in tails:
        name = stem + tail + (suffix if tail != "full_low_memory" else "")
        if name in registered:
            extra = ["model.quantize_base=True"] if job.method == "qlora" and tail == "lora" else []
            if job.tp > 1 and name not in TORCHTUNE_TENSOR_PARALLEL:
                raise ConfigError(f"{name} has no tensor_parallel_plan: torchtune shards it with FSDP only; "
                                  "estimate with --tp 1")
            return recipe, name, extra
    raise ConfigError(f"torchtune registers no {recipe} config for {preset} (at {TORCHTUNE_COMMIT}); "
                      f"its {family[0]} configs: " + ", ".join(sorted(n for n in registered if n.startswith(stem))))


def torchtune_text(job: TrainJob, preset: str, hub_id: str, sharding: Sharding) -> str:
    """The command, headed by where the weights go and why torchtune is installed from a commit."""
    return (f"# {TORCHTUNE_NOTE}\n# {torchtune_download(hub_id)} (and set the config's dataset), then:\n"
            f"{torchtune_command(job, preset, sharding)}\n")


def torchtune_download(hub_id: str) -> str:
    return f"tune download {hub_id} --output-dir {TORCHTUNE_MODEL_DIR}"
