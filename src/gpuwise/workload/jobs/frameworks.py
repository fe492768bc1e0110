"""What each fine-tuning framework does unless told otherwise: the job fields ``--framework`` fills when the user
left them out (an explicit flag always wins), each with the file it comes from.

torchtune   recipes/configs/llama3_1/8B_full_single_device.yaml and 8B_lora_single_device.yaml (torchtune
            59dc1f4 / 2943c61): dtype bf16 with no fp32 master copy, enable_activation_checkpointing True, a
            chunked cross-entropy; the single-device full fine-tune adds optimizer_in_bwd True and PagedAdamW8bit;
            the distributed recipes shard with FSDP2, fsdp_reshard_after_forward True (ZeRO-3)
unsloth     unsloth README / FastLanguageModel.get_peft_model(use_gradient_checkpointing="unsloth"): checkpoints
            offloaded to system RAM, and its fused cross-entropy that never builds the logits
torchtitan  torchtitan/models/llama3/train_configs/*.toml: activation_checkpoint.mode "selective", FSDP2 mixed
            precision (bf16 compute, fp32 sharded parameters), reshard_after_forward "default" (ZeRO-3; kept
            gathered under pipeline parallelism, which the memory model already does)
axolotl     examples/llama-3/*.yml: gradient_checkpointing true, sample_packing true
llama-factory
            hparams/model_args.py: disable_gradient_checkpointing False (checkpointing on)
megatron    megatron/core/distributed: gradients accumulate into a persistent fp32 main_grad buffer; no ZeRO unless
            --use-distributed-optimizer (ZeRO-1)
hf, deepspeed
            transformers Trainer defaults (TrainingArguments: gradient_checkpointing False, bf16 autocast with fp32
            weights, transformers' cross-entropy): gpuwise's own defaults, so nothing is filled
QLoRA under any of the PEFT-based stacks (hf, axolotl, llama-factory) upcasts the non-quantized parameters to fp32
(peft prepare_model_for_kbit_training): the memory model always counts that for --method qlora with mixed
precision (estimate/memory/training.py, estimate/memory/activations.py residual_bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

Framework = Literal["hf", "torchtune", "unsloth", "axolotl", "llama-factory", "deepspeed", "torchtitan", "megatron"]

_TORCHTUNE = {"precision": "pure-bf16", "ckpt": "full", "loss": "chunked"}
_TORCHTUNE_FULL_ONE_GPU = {**_TORCHTUNE, "optimizer_in_backward": True, "optimizer": "paged-adamw-8bit"}
_UNSLOTH = {"ckpt": "full", "activation_offload": True, "loss": "fused"}
_TORCHTITAN = {"ckpt": "selective", "precision": "bf16"}


_AXOLOTL = {"ckpt": "full", "packed": True}
_LLAMA_FACTORY = {"ckpt": "full"}


def framework_defaults(framework: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The fields ``framework`` sets for a job given as ``values`` (the user's flags)."""
    several = _whole(values.get("count", 1)) > _whole(values.get("tp", 1)) * _whole(values.get("pp", 1))
    sharded = {"zero": 3} if several and framework in ("torchtune", "torchtitan") else {}
    if framework == "megatron":
        return {"zero": 0} if several else {}
    if framework == "axolotl":
        return dict(_AXOLOTL)
    if framework == "llama-factory":
        return dict(_LLAMA_FACTORY)
    return {**_framework_recipe(framework, values), **sharded}


def _framework_recipe(framework: str, values: Mapping[str, Any]) -> dict[str, Any]:
    if framework == "torchtune":
        one_gpu_full = values.get("method", "full") == "full" and _whole(values.get("count", 1)) == 1
        # optimizer_in_bwd cannot accumulate gradients: a --global-batch above --batch keeps torchtune's plain step
        accumulates = _whole(values.get("global_batch") or 0) > _whole(values.get("batch", 1))
        return dict(_TORCHTUNE_FULL_ONE_GPU if one_gpu_full and not accumulates else _TORCHTUNE)
    if framework == "unsloth":
        checkpointing = values.get("ckpt", "full") != "none" and values.get("grad_ckpt") is not False
        return {k: v for k, v in _UNSLOTH.items() if checkpointing or k == "loss"}
    if framework == "torchtitan":
        return dict(_TORCHTITAN)
    return {}


def _whole(value: object) -> int:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 1


def apply_framework(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the framework's defaults for the fields the user left out, and ``framework_filled`` naming them.
    The grad-ckpt shorthand counts as setting ckpt."""
    framework = data.get("framework")
    if not isinstance(framework, str):
        return data
    given = set(data) | ({"ckpt"} if data.get("grad_ckpt") is not None else set())
    filled = {k: v for k, v in framework_defaults(framework, data).items() if k not in given}
    return {**data, **filled, "framework_filled": tuple(sorted(filled))}
