"""One record per data-parallel runtime: how DDP, DeepSpeed ZeRO, PyTorch FSDP (FULL_SHARD, SHARD_GRAD_OP,
HYBRID_SHARD), FSDP2 (``fully_shard``) and Megatron-LM's distributed optimizer hold a model's states, each fact from
the runtime's code at a release.

Bytes per parameter under bf16 mixed precision with AdamW, Psi the parameters one GPU's model shard holds (after TP
and PP) and N the sharding ranks, as the records below add up (estimate/memory/model_states.py):

    runtime    stage  16-bit weights      fp32 master  gradients          AdamW   the runtime's own count
    DDP        0      autocast's casts    4 (params)   4 + 4 (buckets)    8
    DeepSpeed  0-3    2, 2/N at 3         4, 4/N       2, 2/N at 2-3      8, 8/N  2 + 2 + 12 (ZeRO paper sec. 5)
    FSDP/FSDP2 2, 3   2 whole at 2;       4/N          4/N                8/N     16/N + gathered
                      gathered at 3
    Megatron   0, 1   2                   4, 4/N       4 (main_grad)      8, 8/N  18; 6 + 12/N (its docs)
"""

from __future__ import annotations

from gpuwise.runtimes.schema import ShardingProfile, Sourced

TORCH = "pytorch/pytorch v2.13.0"
DEEPSPEED = "deepspeedai/DeepSpeed v0.19.8"
FSDP2_DOC = (f"{TORCH} torch/distributed/fsdp/_fully_shard/_fully_shard.py fully_shard: reshard_after_forward True "
             "reshards after forward and re-all-gathers in backward, False keeps the unsharded parameters until "
             "backward; None is True for non-root modules and False for the root")
FSDP2_GRADS = (f"{TORCH} torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py foreach_reduce: the reduce-scatter "
               "output is cast back to the parameter's original dtype (fp32 under MixedPrecisionPolicy(param_dtype="
               "bf16)), so the sharded gradient is 4 bytes per element")
FSDP2_BUFFERS = (f"{TORCH} _fsdp_collectives.py foreach_reduce: the unit's unsharded gradients are copied into a "
                 "reduce-scatter input of the unit's size in reduce_dtype (torchtitan: fp32) while backward runs")

DDP = ShardingProfile(
    id="ddp", name="PyTorch", one_rank_name="PyTorch under torch.amp autocast (one GPU)",
    stages=Sourced({0: "DDP under torch.amp autocast"}, f"{TORCH} torch/nn/parallel/distributed.py: every rank holds "
                                                        "the whole model, its gradients and optimizer states"),
    compute_params=Sourced("fp32_autocast", f"{TORCH} torch/amp/autocast_mode.py: fp32 parameters cast to bf16 per "
                                            "operator, the casts kept for backward"),
    gradient_bytes=Sourced(4, "the fp32 parameters' .grad"),
    buckets_copy_gradients=Sourced(True, f"{TORCH} torch/nn/parallel/distributed.py DistributedDataParallel: "
                                         "gradient_as_bucket_view=False (the default) keeps the gradients and a "
                                         "copy of them in the all-reduce buckets; True 'saves the total gradients "
                                         "size'"),
    buckets_kept=Sourced(frozenset({0}), f"{TORCH} torch/nn/parallel/distributed.py: the reducer's buckets are "
                                         "allocated when DDP wraps the model and kept"),
)

DEEPSPEED_ZERO = ShardingProfile(
    id="deepspeed", name="DeepSpeed",
    stages=Sourced({0: "ZeRO disabled (bf16 optimizer)", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"},
                   f"{DEEPSPEED} deepspeed/runtime/zero/config.py ZeroStageEnum"),
    compute_params=Sourced("16bit", f"{DEEPSPEED} deepspeed/runtime/engine.py _configure_distributed_model: the "
                                    "module's parameters cast to bf16 (_cast_module_mixed_precision); "
                                    "zero/stage_1_and_2.py keeps them whole in bit16_groups_flat, stage3.py "
                                    "partitions them"),
    gradient_bytes=Sourced(2, f"{DEEPSPEED} engine.py get_data_types: grad_accum_dtype defaults to the model's "
                              "bf16; stage_1_and_2.py grads_in_partition and stage3.py grad_partitions_flat_buffer "
                              "take that dtype"),
    step_fp32_gradients=Sourced(True, f"{DEEPSPEED} stage_1_and_2.py step (single_grad_partition) and stage3.py "
                                      "_prepare_fp32_grad_for_sub_group: an fp32 copy of the gradient partition "
                                      "for the optimizer; its estimate_zero2/3_model_states_mem_needs counts 4 B "
                                      "per parameter / N for it"),
    step_group_elements=Sourced(1_000_000_000, f"{DEEPSPEED} zero/config.py sub_group_size 1e9: ZeRO-3 steps its "
                                               "partition one sub-group at a time (stage3.py step)"),
    reduce_bucket_elements=Sourced(500_000_000, f"{DEEPSPEED} zero/config.py reduce_bucket_size 5e8 elements, "
                                                "contiguous_gradients True: stage_1_and_2.py setup_buckets and "
                                                "stage3.py allocate one bucket of that size in the gradients' "
                                                "dtype (a second with overlap_comm, default False at stages 1-2)"),
    gathered_layers=Sourced(2, f"{DEEPSPEED} stage3.py estimate_zero3_model_states_mem_needs: 4 bytes x the "
                               "largest layer's parameters (a module running and one prefetched, 16-bit)"),
    gather_unit=Sourced("module", f"{DEEPSPEED} zero/partitioned_param_coordinator.py fetch_sub_module gathers "
                                  "each submodule's own parameters before it runs; stage3.py model_to_params takes "
                                  "the largest module's direct parameters (an embedding, a linear, fused experts)"),
    gradients_kept=Sourced(frozenset({3}), f"{DEEPSPEED} stage3.py __init__ allocates grad_partitions_flat_buffer "
                                           "once; stage_1_and_2.py makes its gradient partition in each backward "
                                           "(_release_ipg_buffers drops it)"),
    buckets_kept=Sourced(frozenset({3}), f"{DEEPSPEED} stage3.py __init__ allocates the reduce bucket once; "
                                         "stage_1_and_2.py setup_buckets allocates it per backward and "
                                         "_release_ipg_buffers frees it in the backward's epilogue"),
    offloads=Sourced(frozenset({"optimizer", "optimizer+params"}),
                     f"{DEEPSPEED} zero/offload_config.py: offload_optimizer (ZeRO-Offload, stages 1-3) and "
                     "offload_param (stage 3)"),
    pipeline_below_stage=Sourced(2, f"{DEEPSPEED} deepspeed/runtime/pipe/engine.py: 'ZeRO-2 and ZeRO-3 are "
                                    "incompatible with pipeline parallelism'"),
)

FSDP = ShardingProfile(
    id="fsdp", name="FSDP",
    stages=Sourced({0: "NO_SHARD", 2: "SHARD_GRAD_OP", 3: "FULL_SHARD"},
                   f"{TORCH} torch/distributed/fsdp/api.py ShardingStrategy (HYBRID_SHARD: FULL_SHARD within a "
                   "node, _HYBRID_SHARD_ZERO2: SHARD_GRAD_OP within a node)"),
    compute_params=Sourced("16bit", f"{TORCH} torch/distributed/fsdp/api.py MixedPrecision(param_dtype=bf16): the "
                                    "fp32 flat parameter stays sharded, the unsharded bf16 copy is what runs"),
    gradient_bytes=Sourced(4, f"{TORCH} torch/distributed/fsdp/api.py MixedPrecision keep_low_precision_grads=False: "
                              "the sharded gradient is upcast to the parameter's fp32"),
    shard_is_master=Sourced(True, f"{TORCH} torch/distributed/fsdp/_flat_param.py: the sharded flat parameter keeps "
                                  "the fp32 values the optimizer steps; the bf16 one exists only unsharded"),
    stays_gathered=Sourced("embedding+head", f"{TORCH} torch/distributed/fsdp/_runtime_utils.py "
                                             "_post_forward_reshard: the root's flat parameter (transformers' "
                                             "embedding, final norm and head under an auto-wrap policy by layer) is "
                                             "not resharded after forward"),
    reduce_scatter_layer=Sourced(True, f"{TORCH} _runtime_utils.py _post_backward_hook: a unit's unsharded gradient "
                                       "is reduce-scattered into a new sharded one"),
    hybrid=Sourced(True, f"{TORCH} torch/distributed/fsdp/api.py ShardingStrategy.HYBRID_SHARD"),
    offloads=Sourced(frozenset({"optimizer+params"}),
                     f"{TORCH} torch/distributed/fsdp/api.py CPUOffload(offload_params=True): parameters, gradients "
                     "and optimizer states together"),
)

FSDP2 = ShardingProfile(
    id="fsdp2", name="FSDP2 (fully_shard)",
    stages=Sourced({0: "no sharding (replicate)", 2: "reshard_after_forward=False", 3: "reshard_after_forward=True"},
                   FSDP2_DOC),
    compute_params=Sourced("16bit", f"{TORCH} _fully_shard/_fsdp_api.py MixedPrecisionPolicy(param_dtype=bf16): "
                                    "fp32 sharded parameters, bf16 unsharded ones all-gathered for compute"),
    gradient_bytes=Sourced(4, FSDP2_GRADS),
    shard_is_master=Sourced(True, f"{TORCH} _fully_shard/_fsdp_param.py FSDPParam: the sharded DTensor keeps the "
                                  "fp32 parameter; the all-gather casts to param_dtype"),
    stays_gathered=Sourced("embedding+head", FSDP2_DOC + "; fully_shard on each layer and the root (torchtune "
                                             "training/_distributed.py shard_model) leaves the embedding and head "
                                             "in the root (torchtitan@018740b7 apply_fsdp shards the embedding "
                                             "alone and keeps [norm, output] gathered: the head only)"),
    gathered_layers=Sourced(2, f"{TORCH} _fully_shard/_fsdp_collectives.py foreach_all_gather: a layer's "
                               "unsharded parameters beside the all-gather output they are copied out of (or the next "
                               "layer's, prefetched); traced under a fake process group (tests/test_sharding.py)"),
    reduce_scatter_layer=Sourced(True, FSDP2_BUFFERS),
    hybrid=Sourced(True, f"{TORCH} fully_shard: a 2-D mesh (Replicate(), Shard(0)) is HSDP"),
    offloads=Sourced(frozenset({"optimizer+params"}), f"{TORCH} _fully_shard/_fsdp_api.py CPUOffloadPolicy: "
                                                      "parameters, gradients and optimizer states together"),
)

MEGATRON = ShardingProfile(
    id="megatron", name="Megatron-LM",
    stages=Sourced({0: "Float16OptimizerWithFloat16Params", 1: "distributed optimizer"},
                   "NVIDIA/Megatron-LM@50b073cc docs/source/api-guide/dist_optimizer.md: the distributed optimizer "
                   "shards the optimizer states and fp32 main parameters, not the gradients or the parameters"),
    compute_params=Sourced("16bit", "NVIDIA/Megatron-LM --bf16: the model's parameters in bf16"),
    gradient_bytes=Sourced(4, "NVIDIA/Megatron-LM@50b073cc docs/source/api-guide/dist_optimizer.md: bf16 params with "
                              "fp32 grads, 18 bytes per parameter (6 + 12/d distributed); the contiguous grad buffer "
                              "is also its communication buffer"),
    gradients_kept=Sourced(frozenset({0, 1}), "NVIDIA/Megatron-LM@293e1041 megatron/core/distributed/"
                                              "distributed_data_parallel.py: gradients accumulate into a persistent "
                                              "main_grad buffer"),
)

SHARDERS: dict[str, ShardingProfile] = {p.id: p for p in (DDP, DEEPSPEED_ZERO, FSDP, FSDP2, MEGATRON)}
"""The data-parallel runtimes --sharding names."""

UNSHARDED = DDP
"""What a framework whose runtime has no stage 0 runs without sharding (FSDP's NO_SHARD aside): plain DDP."""

_NOT_FSDP = "gpuwise default: FSDP has no optimizer-only sharding or offload"
_AS_RECIPES = "gpuwise default, as torchtune's and torchtitan's recipes shard"
DEFAULT_BY_STAGE: dict[int, tuple[ShardingProfile, str]] = {
    0: (DDP, ""), 1: (DEEPSPEED_ZERO, _NOT_FSDP), 2: (FSDP2, _AS_RECIPES), 3: (FSDP2, _AS_RECIPES)}
"""The runtime gpuwise runs each ZeRO stage with when neither --sharding nor --framework names one, and why."""
OFFLOADS_OPTIMIZER = (DEEPSPEED_ZERO, _NOT_FSDP)
"""The runtime gpuwise picks for --offload optimizer when none is named (DeepSpeed's ZeRO-Offload), and why."""
