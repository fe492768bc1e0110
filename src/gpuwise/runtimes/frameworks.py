"""One record per training framework: the job fields it sets unless the user did (``--framework``), and what it runs
differently from transformers' own modules, each fact with its source.

QLoRA under any of the PEFT-based stacks (hf, axolotl, llama-factory) upcasts the non-quantized parameters to fp32
(peft prepare_model_for_kbit_training): the memory model always counts that for --method qlora with mixed precision.
Adding a framework is adding a record here and a test in tests/test_runtimes.py that pins each field to its source.
"""

from __future__ import annotations

from dataclasses import replace

from gpuwise.runtimes.engines import HF as TRANSFORMERS
from gpuwise.runtimes.schema import FrameworkProfile, Fusions, Kernels, Sourced

TORCHTUNE_FULL = "pytorch/torchtune@59dc1f4f recipes/configs/llama3_1/8B_full_single_device.yaml"
TORCHTUNE_LORA = "pytorch/torchtune@2943c61e recipes/configs/llama3_1/8B_lora_single_device.yaml"
TORCHTITAN_TOML = "pytorch/torchtitan@f3534d77 torchtitan/models/llama3/train_configs/llama3_8b.toml"
TRAINER = "huggingface/transformers src/transformers/training_args.py TrainingArguments"
LIGER_COMMIT = "linkedin/Liger-Kernel@ead96b61"
LIGER = Fusions(
    norm=True, activation=True, rotary=True, loss="fused_linear", dispatches=5, library="Liger's",
    source=LIGER_COMMIT + " src/liger_kernel/transformers/monkey_patch.py apply_liger_kernel_to_llama (and each "
                          "model's apply_liger_kernel_to_*): rope, rms_norm, swiglu and fused_linear_cross_entropy on "
                          "by default; ops/rms_norm.py rms_norm_forward writes Y in X's dtype and RSTD per row, "
                          "LigerRMSNorm in_place=True writes dX over dY; ops/rope.py rope_forward rotates q and k in "
                          "place; ops/swiglu.py swiglu_forward writes c, swiglu_backward writes da and db over a and "
                          "b; ops/fused_linear_cross_entropy.py: logits_chunk = _input_chunk @ weight.t() one chunk at "
                          "a time, liger_cross_entropy_kernel (ops/cross_entropy.py) reads it twice and stores the "
                          "gradient in place, grad_input and grad_weight in the forward. Dispatched per module: "
                          "rms_norm_forward X.view, two torch.empty, the launch, Y.view; rope_forward two transposes, "
                          "the launch, two transposes (contiguous() of a contiguous tensor dispatches nothing); "
                          "swiglu_forward two views, empty_like, the launch, c.view: 5 each")
"""Liger's kernels on a transformers model, as its apply functions swap them in."""

TORCH_COMPILE = Fusions(
    norm=True, residual_in_norm=True, activation=True, rotary=True, library="torch.compile's",
    source="pytorch v2.13.0 torch/_inductor/scheduler.py Scheduler.fuse_nodes (can_fuse: a pointwise producer fuses "
           "into the reduction that consumes it) and config.py max_fusion_size 64: an RMSNorm's pow, mean, rsqrt and "
           "muls are one Triton kernel with the residual add before it as its prologue, writing the sum and the "
           "normed output; SiLU * up and the rotary's muls, negation and cat are one pointwise kernel each. The loss "
           "is not claimed: transformers' fp32 logits are kept")
"""What torch.compile (inductor) fuses in a transformer layer; a job's --compile adds it to its framework's."""

_SDPA = Sourced("PyTorch SDPA through transformers' attention interface", "transformers 5: sdpa is the default")
_HF_KERNELS = Kernels(attention=_SDPA, norm=Sourced("transformers RMSNorm module, op by op",
                                                    "transformers modeling_llama.py LlamaRMSNorm"),
                      loss=Sourced("transformers ForCausalLMLoss: fp32 logits", "transformers loss/loss_utils.py"))

HF = FrameworkProfile(
    id="hf", name="transformers Trainer",
    fills=Sourced({}, TRAINER + ": gradient_checkpointing False, transformers' cross-entropy; gpuwise's own defaults, "
                              "so nothing is filled"),
    kernels=_HF_KERNELS,
    host_ops=TRANSFORMERS.host_ops, launch_cost_s=TRANSFORMERS.launch_cost_s,
    fused_loss_fusions=replace(
        LIGER, source="huggingface/transformers v5.25.0 src/transformers/integrations/liger.py apply_liger_kernel: "
                      "TrainingArguments.use_liger_kernel calls liger's _apply_liger_kernel_to_instance with its "
                      "defaults (the only fused cross-entropy the Trainer offers); " + LIGER.source),
)

DEEPSPEED = FrameworkProfile(
    id="deepspeed", name="DeepSpeed",
    fills=Sourced({}, "deepspeedai/DeepSpeed@cbf3d661 deepspeed/runtime/zero/config.py: stage 0 unless the config "
                      "says; the model is transformers' own, so nothing is filled"),
    sharding=Sourced("deepspeed", "DeepSpeed's own ZeRO (runtimes/sharding.py)"),
    kernels=_HF_KERNELS,
    host_ops=TRANSFORMERS.host_ops, launch_cost_s=TRANSFORMERS.launch_cost_s,
)

TORCHTUNE = FrameworkProfile(
    id="torchtune", name="torchtune",
    fills=Sourced({"precision": "pure-bf16", "ckpt": "full", "loss": "chunked"},
                  TORCHTUNE_FULL + " and " + TORCHTUNE_LORA + ": dtype bf16 (no fp32 master copy), "
                  "enable_activation_checkpointing True; the full recipe's loss CEWithChunkedOutputLoss (the LoRA "
                  "recipe's LinearCrossEntropyLoss also upcasts the logits one chunk at a time; gpuwise counts it "
                  "as the chunked loss)"),
    fills_one_gpu_full=Sourced({"optimizer_in_backward": True, "optimizer": "paged-adamw-8bit"},
                               TORCHTUNE_FULL + ": optimizer_in_bwd True, bitsandbytes.optim.PagedAdamW8bit "
                               "(optimizer_in_bwd cannot accumulate gradients: a --global-batch above --batch keeps "
                               "the plain step)"),
    zero_when_data_parallel=Sourced(3, "pytorch/torchtune@1bf50ae2 recipes/full_finetune_distributed.py: FSDP2 with "
                                       "fsdp_reshard_after_forward True (ZeRO-3)"),
    sharding=Sourced("fsdp2", "pytorch/torchtune@0696355d torchtune/training/_distributed.py shard_model: "
                              "fully_shard (FSDP2) on each layer and the root"),
    fp32_residual_under_autocast=Sourced(False, TORCHTUNE_FULL + ": dtype bf16 -- the model runs in bf16, without "
                                                                 "autocast"),
    adapter_bytes=Sourced((2.0, 12.0, 10.0, 6.0),
                          "pytorch/torchtune@2943c61e torchtune/modules/peft/lora.py LoRALinear.forward: adapters in "
                          "the model's bf16, no casts: lora_a reads x (2 per input element); lora_b's output, "
                          "* scaling and out + lora_out (12 per output element); backward: lora_a's input gradient "
                          "and its add into x's (10 per input), the output side's reads (6 per output)"),
    adapter_kernels=4,
    merges_fused_experts=Sourced(False, "torchtune's LoRALinear wraps nn.Linear modules; it has no adapter on fused "
                                        "expert parameters"),
    kernels=Kernels(attention=Sourced("PyTorch SDPA", "torchtune modules/attention.py"),
                    norm=Sourced("torchtune RMSNorm module, op by op", "torchtune modules/rms_norm.py"),
                    loss=Sourced("CEWithChunkedOutputLoss, 8 chunks", TORCHTUNE_FULL)),
)

UNSLOTH = FrameworkProfile(
    id="unsloth", name="Unsloth",
    fills=Sourced({"loss": "fused"}, "unslothai/unsloth README: its fused cross-entropy kernel "
                                     "(unsloth/kernels/cross_entropy_loss.py)"),
    fills_while_checkpointing=Sourced({"ckpt": "full", "activation_offload": True},
                                      "unslothai/unsloth@9fbe0b6d unsloth/models/llama.py get_peft_model: "
                                      "use_gradient_checkpointing='unsloth' offloads the checkpoints to system RAM"),
    fused_kernels=Sourced(True, "unsloth/kernels: Triton RMSNorm, RoPE and SwiGLU kernels"),
    fusions=Fusions(
        norm=True, activation=True, rotary=True, loss="in_place", library="Unsloth's",
        source="unslothai/unsloth@015bdef0 unsloth/kernels: rms_layernorm.py Fast_RMS_Layernorm (forward reads X, "
               "writes Y and r; backward writes dX over dY), rope_embedding.py (_rope_embedding stores Q in place, "
               "forward and backward), swiglu.py (_fg_kernel writes h; _DWf_DW_dfg_kernel reads DW, e, g and "
               "stores three results over them), cross_entropy_loss.py (_cross_entropy_forward reads each logit "
               "once and stores loss and logsumexp per row; _cross_entropy_backward reads the logits and stores "
               "the gradient over them)"),
    adapter_bytes=Sourced((2.0, 4.0, 6.0, 4.0),
                          "unslothai/unsloth unsloth/kernels/utils.py matmul_lora: out = X @ W, then "
                          "out.addmm_(X @ A, B, alpha=s) in the base dtype: X @ A reads x (2 per input element), "
                          "addmm_ reads and writes out (4 per output); LoRA_MLP/LoRA_QKV backward likewise fused"),
    adapter_kernels=2,
    merges_fused_experts=Sourced(False, "Unsloth's fused LoRA kernels (matmul_lora) keep the factors apart"),
    kernels=Kernels(attention=Sourced("FlashAttention / xformers", "unsloth README"),
                    norm=Sourced("Triton fused RMSNorm", "unsloth/kernels/rms_layernorm.py"),
                    loss=Sourced("Triton fused cross-entropy", "unsloth/kernels/cross_entropy_loss.py")),
)

TORCHTITAN = FrameworkProfile(
    id="torchtitan", name="torchtitan",
    fills=Sourced({"ckpt": "selective", "precision": "bf16"},
                  TORCHTITAN_TOML + ": activation_checkpoint.mode 'selective'; pytorch/torchtitan@6404b932 "
                  "torchtitan/config/job_config.py: mixed_precision_param bf16 over fp32 sharded parameters"),
    zero_when_data_parallel=Sourced(3, "pytorch/torchtitan@6404b932 torchtitan/config/job_config.py: "
                                       "fsdp_reshard_after_forward 'default' (ZeRO-3; kept gathered under pipeline "
                                       "parallelism)"),
    sharding=Sourced("fsdp2", "pytorch/torchtitan@018740b7 torchtitan/models/llama3/infra/parallelize.py apply_fsdp: "
                              "fully_shard with MixedPrecisionPolicy(param_dtype bf16, reduce_dtype fp32)"),
    fused_kernels=Sourced(True, "torchtitan models/llama3: torch fused RMSNorm and compiled rotary"),
    fusions=Fusions(
        norm=True, library="PyTorch's",
        source="pytorch/torchtitan@b5bcd76c torchtitan/models/common/nn_modules.py: class RMSNorm(nn.RMSNorm), which "
               "pytorch v2.13.0 runs as one kernel (aten::_fused_rms_norm); the rotary and SwiGLU run as the model's "
               "own ops unless --compile"),
    tensor_parallel=Sourced(True, "pytorch/torchtitan README: FSDP2 with tensor parallel, pipeline parallel and "
                                  "context parallel (parallelism.tensor_parallel_degree)"),
    kernels=Kernels(attention=Sourced("PyTorch SDPA / FlexAttention", "torchtitan models/attention.py"),
                    norm=Sourced("torch.nn.RMSNorm (fused)", "torchtitan models/norms.py")),
)

AXOLOTL = FrameworkProfile(
    id="axolotl", name="axolotl",
    fills=Sourced({"ckpt": "full", "packed": True},
                  "axolotl-ai-cloud/axolotl@9f824ef7 examples/llama-3/lora-8b.yml: gradient_checkpointing true, "
                  "sample_packing true"),
    kernels=_HF_KERNELS,
    host_ops=TRANSFORMERS.host_ops, launch_cost_s=TRANSFORMERS.launch_cost_s,
)

LLAMA_FACTORY = FrameworkProfile(
    id="llama-factory", name="LLaMA-Factory",
    fills=Sourced({"ckpt": "full"}, "hiyouga/LLaMA-Factory@cc22c045 src/llamafactory/hparams/model_args.py: "
                                    "disable_gradient_checkpointing False (checkpointing on)"),
    kernels=_HF_KERNELS,
    host_ops=TRANSFORMERS.host_ops, launch_cost_s=TRANSFORMERS.launch_cost_s,
    fused_loss_fusions=replace(
        LIGER, source="hiyouga/LLaMA-Factory@6706b327 src/llamafactory/model/model_utils/liger_kernel.py "
                      "apply_liger_kernel: enable_liger_kernel calls liger's apply_liger_kernel_to_<model>() with its "
                      "defaults; " + LIGER.source),
)

MEGATRON = FrameworkProfile(
    id="megatron", name="Megatron-LM",
    fills=Sourced({}, "NVIDIA/Megatron-LM: a pre-training stack whose parallel layout the flags give"),
    zero_when_data_parallel=Sourced(0, "NVIDIA/Megatron-LM@22e030e9 megatron/core/distributed/"
                                       "distributed_data_parallel_config.py: use_distributed_optimizer False"),
    sharding=Sourced("megatron", "NVIDIA/Megatron-LM: its own DDP and distributed optimizer (--use-distributed-"
                                 "optimizer is --zero 1)"),
    fused_kernels=Sourced(True, "Megatron-LM / Transformer Engine: fused layer norm and rotary kernels"),
    adapter_bytes=Sourced(
        (2.0, 12.0, 10.0, 6.0),
        "NVIDIA/NeMo@a9a2b2ea nemo/collections/llm/peft/lora.py LoRALinear.forward (LoRA on Megatron core layers): "
        "linear_output + adapter(layernorm_output); NVIDIA/NeMo@f85c9e53 nemo/collections/nlp/modules/common/megatron/"
        "adapters/parallel_adapters.py ParallelLinearAdapter: bf16 parameters (self.bfloat16() under "
        "model_parallel_config.bf16); forward linear_in(x) reads x (2 per input element), linear_out's output, "
        "x * (alpha / dim) and the add into the base output (12 per output element); backward as torchtune's adapter "
        "of the same shape: linear_in's input gradient and its add into x's (10 per input), the output side's reads "
        "(6 per output)"),
    adapter_kernels=4,
    merges_fused_experts=Sourced(False, "NVIDIA/NeMo@a9a2b2ea nemo/collections/llm/peft/lora.py LoRA.transform: a "
                                        "ParallelLinearAdapter beside each expert linear (is_expert), no merged "
                                        "weight"),
    fusions=Fusions(
        norm=True, activation=True, rotary=True, library="Transformer Engine's and Megatron's",
        source="NVIDIA/Megatron-LM@d98e8a64 megatron/core/models/gpt/gpt_layer_specs.py: linear_qkv is "
               "backend.column_parallel_layer_norm_linear() (Transformer Engine's LayerNormLinear: one norm kernel "
               "writes ln_out for the GEMM), the MLP's fc1 likewise (pre_mlp_layernorm IdentityOp); the residual "
               "adds are get_bias_dropout_add, apart from the norm; megatron/training/arguments.py --no-bias-swiglu-"
               "fusion and --no-rope-fusion: the fused SwiGLU (core/fusions/fused_bias_swiglu.py) and fused RoPE run "
               "unless turned off; the loss is vocab_parallel_cross_entropy over fp32 logits "
               "(model_parallel_config.py cross_entropy_loss_fusion False)"),
    tensor_parallel=Sourced(True, "NVIDIA/Megatron-LM: --tensor-model-parallel-size, the layout it was built for"),
    persistent_gradients=Sourced(True, "NVIDIA/Megatron-LM@293e1041 megatron/core/distributed/"
                                       "distributed_data_parallel.py: gradients accumulate into a persistent main_grad "
                                       "buffer (fp32: --bf16 sets accumulate_allreduce_grads_in_fp32)"),
    kernels=Kernels(attention=Sourced("Transformer Engine fused attention", "Megatron-LM core/transformer"),
                    norm=Sourced("Transformer Engine fused RMSNorm", "Megatron-LM core/fusions")),
)

FRAMEWORKS: dict[str, FrameworkProfile] = {p.id: p for p in (HF, TORCHTUNE, UNSLOTH, AXOLOTL, LLAMA_FACTORY, DEEPSPEED,
                                                            TORCHTITAN, MEGATRON)}
"""The training frameworks --framework names; a job without one runs as transformers' Trainer (hf)."""
