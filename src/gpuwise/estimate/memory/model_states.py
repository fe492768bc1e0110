"""Model states of one GPU under its data-parallel runtime: what is whole, what is sharded over the ranks, what is
gathered and for how long, and the communication buffers -- each runtime as its code holds them
(runtimes/sharding.py).

Symbols: Psi the parameters of this GPU's model shard (the model / (TP x PP)), N the sharding ranks, K the optimizer's
bytes per trainable parameter (AdamW: 8 in fp32). Under bf16 mixed precision with AdamW:

    DeepSpeed ZeRO-k   weights 2 Psi (/N at 3) + master 4 Psi/N + gradients 2 Psi (/N from 2) + K Psi/N: the ZeRO
                       paper's (2 + 2 + K) Psi sharded as P_os, P_os+g, P_os+g+p say (arXiv 1910.02054, sec. 5); its
                       reduce bucket beside them, and an fp32 copy of the gradient partition at the step
    FSDP / FSDP2       the fp32 shard is the master (4 Psi/N), gradients 4 Psi/N, K Psi/N; the bf16 weights gathered:
                       whole from forward to backward at stage 2 (SHARD_GRAD_OP, reshard_after_forward=False), two
                       layers and the root or head at stage 3
    Megatron-LM        2 Psi + 4 Psi of fp32 main_grad + (4 + K) Psi, /N with the distributed optimizer
    DDP + autocast     fp32 parameters 4 Psi (the master), fp32 gradients 4 Psi and DDP's bucket copy of them, K Psi;
                       the bf16 weights are autocast's casts, kept per layer for backward
Worked example: Llama 3.1 70B (70.55e9 parameters) at TP 2 under ZeRO-2 holds 2 x 35.28e9 = 65.7 GiB of bf16 weights
on every GPU, whatever the data-parallel degree.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.estimate import constants as C
from gpuwise.estimate.dtypes import bytes_per_element
from gpuwise.estimate.plan import TrainPlan
from gpuwise.workload.jobs.job import TrainJob
from gpuwise.workload.model.architecture import Architecture

FP32 = 4


@dataclass(frozen=True)
class ModelStates:
    """One GPU's model states in bytes. ``weights`` is what the forward reads and keeps through backward (whole, the
    stage-3 shard, or autocast's casts); ``gathered`` what a ZeRO-3 runtime unshards beside it while a layer runs;
    ``released`` the part of ``weights`` a SHARD_GRAD_OP runtime has resharded by the end of backward."""

    weights: float
    master: float
    gradients: float
    optimizer: float
    gathered: float = 0.0  # ZeRO-3: the running and prefetched layers, and what stays gathered from forward to backward
    buffers: float = 0.0  # communication buffers alive through backward
    step: float = 0.0  # what the optimizer step adds: DeepSpeed's fp32 copy of the gradient partition
    released: float = 0.0  # SHARD_GRAD_OP: unsharded weights freed layer by layer in backward
    weights_at_step: float = 0.0  # the 16-bit weights alive at the optimizer step (autocast's casts and FSDP's
    # gathered copies are gone; a 16-bit model is not)
    buffers_at_step: float = 0.0  # the buffers allocated for good (DeepSpeed's bucket, DDP's), not FSDP's per-unit ones

    @property
    def parts(self) -> dict[str, float]:
        """The four components as the memory breakdown names them."""
        return {"weights": self.weights, "master_weights": self.master, "gradients": self.gradients,
                "optimizer": self.optimizer}

    @property
    def persistent(self) -> float:
        """Weights, master copy, gradients and optimizer states: the ZeRO paper's model states."""
        return self.weights + self.master + self.gradients + self.optimizer


def model_states(plan: TrainPlan) -> ModelStates:
    """This GPU's model states, sharded as the plan's runtime and stage say (TP and PP divide first; --ep spreads
    the routed experts; offload moves states to host memory)."""
    if plan.job.trains_adapters:
        return _adapter_states(plan)
    return _offloaded(plan, _full_states(plan))


def _full_states(plan: TrainPlan) -> ModelStates:
    arch, job, sharding = plan.arch, plan.job, plan.sharding
    psi = arch.total_params / plan.model_parallel
    mixed = job.precision in ("bf16", "fp16", "fp8")
    n, stage, held = sharding.ranks, sharding.stage, plan.expert_share_held
    pipelined = job.pp > 1 and stage >= 2  # FSDP2 keeps weights and gradients whole across micro-batches
    # under mixed precision FSDP's shard is the fp32 master itself: its 16-bit weights exist only gathered
    gathered_only = mixed and sharding.profile.shard_is_master.value
    weights = psi * plan.weight_bytes * held
    if stage == 3 and not pipelined:
        weights = 0.0 if gathered_only else psi * plan.weight_bytes / n  # DeepSpeed partitions its bf16 model
    master = psi * FP32 / (n if stage >= 1 else 1) if mixed else 0.0
    grad_bytes = sharding.profile.gradient_bytes.value if mixed else plan.state_bytes
    gradients = psi * grad_bytes * (held if stage < 2 or pipelined else 1.0 / n)
    if job.optimizer_in_backward:
        gradients = _largest_parameter(arch) / plan.model_parallel * grad_bytes
    optimizer = _optimizer_bytes(plan, plan.trainable_params / plan.model_parallel)
    optimizer = optimizer / n if stage >= 1 else optimizer * held
    if stage < 1:
        master *= held
    buffers = _buffers(plan, gradients, grad_bytes)
    casts_only = mixed and (sharding.autocast_params or gathered_only)
    return ModelStates(weights=weights, master=master, gradients=gradients, optimizer=optimizer,
                       gathered=_gathered(plan, pipelined), buffers=buffers, step=_step_copy(plan, psi, mixed),
                       released=_released(plan, weights, pipelined), weights_at_step=0.0 if casts_only else weights,
                       buffers_at_step=buffers if stage in sharding.profile.buckets_kept.value else 0.0)


def _gathered(plan: TrainPlan, pipelined: bool) -> float:
    """ZeRO-3: the 16-bit layers unsharded at once (the running one and the prefetched; DeepSpeed's own estimate
    counts 2 x 2 bytes x its largest layer), and what the runtime keeps gathered from forward to backward (FSDP's
    root, torchtitan's head)."""
    sharding, job, arch = plan.sharding, plan.job, plan.arch
    if sharding.stage != 3 or pipelined:
        return 0.0
    element = plan.weight_bytes  # 16-bit, fp32 for --precision fp32
    unit = _layer_params(plan) if sharding.profile.gather_unit.value == "layer" else _largest_module(plan)
    layer = unit * element
    kept = sharding.profile.stays_gathered.value
    # a tied head is the embedding's own parameter (arch.params.head counts an untied one only)
    head = (arch.params.head or arch.params.embedding) / job.tp * element if arch.lm_head else 0.0
    embedding = arch.params.embedding / job.tp * element
    edges = {"none": 0.0, "head": head,
             "embedding+head": embedding + (arch.params.head / job.tp * element if arch.lm_head else 0.0)}[kept]
    whole = arch.total_params / plan.model_parallel * element
    return min(whole, sharding.profile.gathered_layers.value * layer + edges)


def _layer_params(plan: TrainPlan) -> float:
    """The parameters of one transformer layer on this GPU (the linears and norms, whole model's / layers)."""
    arch = plan.arch
    body = arch.total_params - arch.params.embedding - arch.params.head
    return body / max(arch.layers, 1) / plan.job.tp


def _largest_module(plan: TrainPlan) -> float:
    """The most parameters one module holds directly on this GPU: the embedding, an untied head, the widest linear
    or a layer's fused routed experts (transformers 5 stores them as one 3-D parameter per projection)."""
    arch = plan.arch
    linears = max((x.count * x.d_in * x.d_out for x in arch.params.linears), default=0)
    return float(max(arch.params.embedding, arch.params.head, linears)) / plan.job.tp


def _buffers(plan: TrainPlan, gradients: float, grad_bytes: int) -> float:
    """Communication buffers alive through backward: DeepSpeed's reduce bucket (reduce_bucket_size elements in the
    gradients' dtype, allocated whatever the model's size), DDP's bucket copy of every gradient, FSDP's unsharded
    gradients of one unit and its reduce-scatter input."""
    sharding, job = plan.sharding, plan.job
    profile = sharding.profile
    if job.data_parallel <= 1 and sharding.stage == 0:
        return 0.0
    if profile.reduce_bucket_elements is not None and sharding.stage >= 1:
        return profile.reduce_bucket_elements.value * grad_bytes
    if profile.buckets_copy_gradients.value and job.data_parallel > 1:
        return gradients
    if profile.reduce_scatter_layer.value and sharding.stage >= 2:
        return _layer_params(plan) * (2 + grad_bytes)
    return 0.0


def _step_copy(plan: TrainPlan, psi: float, mixed: bool) -> float:
    """DeepSpeed steps on an fp32 copy of its (16-bit) gradient partition; ZeRO-3 one sub-group at a time."""
    profile, stage = plan.sharding.profile, plan.sharding.stage
    if not (mixed and profile.step_fp32_gradients.value) or plan.job.offload != "none":
        return 0.0
    elements = psi / (plan.sharding.ranks if stage >= 1 else 1)
    if stage == 3 and profile.step_group_elements is not None:
        elements = min(elements, profile.step_group_elements.value)
    return elements * FP32


def _released(plan: TrainPlan, weights: float, pipelined: bool) -> float:
    """A runtime that gathers 16-bit weights at stage 2 (SHARD_GRAD_OP, reshard_after_forward=False) frees each
    unit after its backward: by the end of backward all but the first layers are gone."""
    sharding = plan.sharding
    if sharding.stage != 2 or pipelined or not sharding.profile.reduce_scatter_layer.value:
        return 0.0
    return max(0.0, weights - 2 * weights / max(plan.layers_per_stage, 1))


def _offloaded(plan: TrainPlan, states: ModelStates) -> ModelStates:
    """ZeRO-Offload moves the optimizer states and master weights to host memory; with the parameters offloaded
    too the GPU holds the gathered current and prefetched layer."""
    job = plan.job
    if job.offload == "none":
        return states
    weights, gathered = states.weights, states.gathered
    if job.offload == "optimizer+params":
        layer = plan.arch.total_params / plan.model_parallel * 2 / max(plan.layers_per_stage, 1)
        weights, gathered = 2 * layer, 0.0
    return ModelStates(weights=weights, master=0.0, gradients=states.gradients, optimizer=0.0, gathered=gathered,
                       buffers=states.buffers, weights_at_step=weights, buffers_at_step=states.buffers_at_step)


def _adapter_states(plan: TrainPlan) -> ModelStates:
    """LoRA/QLoRA: a frozen base (NF4 linears for QLoRA) and fp32 adapters with their gradients and states; the base
    shards only at stage 3."""
    arch, job = plan.arch, plan.job
    mp = plan.model_parallel
    total, trainable, state_bytes = arch.total_params / mp, plan.trainable_params / mp, plan.state_bytes
    if job.method == "qlora":
        linear = arch.params.linear / mp
        # PEFT's prepare_model_for_kbit_training upcasts the non-quantized parameters (embeddings, head, norms) to
        # fp32 under mixed precision; a pure-bf16 run keeps them in bf16
        weights = linear * bytes_per_element("nf4") + (total - linear) * state_bytes
    else:
        weights = total * plan.weight_bytes
    weights += trainable * state_bytes  # PEFT keeps the adapters in fp32 unless the whole run is bf16
    sharding, held = plan.sharding, plan.expert_share_held
    n, stage = sharding.ranks, sharding.stage
    gradients = trainable * state_bytes * (held if stage < 2 or job.pp > 1 else 1.0 / n)
    optimizer = _optimizer_bytes(plan, trainable)
    optimizer = optimizer / n if stage >= 1 else optimizer * held
    gathered = 0.0
    if stage == 3 and job.pp == 1 and n > 1:
        layer = weights / max(plan.layers_per_stage, 1)
        gathered = min(weights - weights / n, 2 * layer)  # never more than not sharding at all
        weights /= n
    else:
        weights *= held
    states = ModelStates(weights=weights, master=0.0, gradients=gradients, optimizer=optimizer, gathered=gathered,
                         weights_at_step=weights)
    return _offloaded(plan, states)


def _optimizer_bytes(plan: TrainPlan, trainable: float) -> float:
    job = plan.job
    if job.optimizer == "adafactor":
        return _adafactor_bytes(plan.arch, plan.state_bytes, plan.trainable_params) / plan.model_parallel
    return trainable * _optimizer_bytes_per_param(job, plan.state_bytes)


def _optimizer_bytes_per_param(job: TrainJob, state_bytes: int) -> float:
    if job.optimizer in ("adamw", "paged-adamw"):
        return C.ADAMW_STATES.value * state_bytes
    if job.optimizer in ("adamw-8bit", "paged-adamw-8bit"):
        return C.ADAMW_STATES.value * C.EIGHT_BIT_STATE_BYTES.value
    if job.optimizer == "sgd":
        return state_bytes  # one momentum buffer
    return 0.0  # adafactor: factored second moment, counted separately


def _adafactor_bytes(arch: Architecture, state_bytes: int, trainable: float) -> float:
    """Adafactor keeps a row and a column vector per matrix (Shazeer & Stern 2018), about (d_in + d_out) each."""
    matrices = sum((x.d_in + x.d_out) * x.count * x.layers for x in arch.params.linears)
    share = trainable / max(arch.total_params, 1)
    return (matrices * share + arch.hidden + arch.vocab) * state_bytes


def _largest_parameter(arch: Architecture) -> float:
    """The largest single parameter tensor: the embedding (or untied head), else the widest linear."""
    linear = max((x.d_in * x.d_out for x in arch.params.linears if x.count == 1), default=0)
    return float(max(arch.params.embedding, arch.params.head, linear))
