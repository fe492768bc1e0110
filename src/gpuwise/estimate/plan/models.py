"""A model's job resolved once (training or inference of an Architecture: language, vision, CNN).

``model_plan(arch, job, gpu)`` turns the user's flags into a frozen plan -- the dtype of each tensor class, the
trainable parameters, the parallel layout, micro-batches and accumulation, the runtime's batch and token limits on
this card, the format of each weight class and of the KV cache -- and records every choice it took from a default,
with where it came from (a flag, a framework's recipe, an engine's code, the checkpoint, gpuwise). The memory, speed,
serving and cost estimators read the plan and re-derive none of it (vLLM gathers its model, cache, parallel and
scheduler configs once, in its engine arguments, the same way).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from gpuwise import runtimes
from gpuwise.catalog import GPU
from gpuwise.catalog.schema import Dtype
from gpuwise.errors import ConfigError, NotEstimable
from gpuwise.estimate.calibration import Calibration
from gpuwise.estimate.dtypes import (
    activation_bytes,
    bytes_per_element,
    train_dtype,
    training_state_bytes,
    training_weight_bytes,
)
from gpuwise.estimate.roofline import Machine, machine
from gpuwise.estimate.sharding import Sharding, resolve_sharding
from gpuwise.estimate.weights import Weights, as_header_says, matmul_dtype, padded_experts, weights
from gpuwise.runtimes import rules
from gpuwise.runtimes.schema import CardRule, EngineProfile, FrameworkProfile, Sourced
from gpuwise.workload.jobs.job import InferJob, Job, TrainJob
from gpuwise.workload.model.architecture import Architecture
from gpuwise.workload.model.counts import Linear
from gpuwise.workload.vision.inputs import for_encoder, for_images

UNBOUNDED_SEQUENCES = 65_536  # an engine with no batch cap (SGLang): its KV pool admits fewer long before this

# MoE families whose checkpoints already store the experts fused (3-D): transformers 5 has no weight conversion for
# them (transformers/conversion_mapping.py _MODEL_TO_CONVERSION_PATTERN, 5.24), so PEFT's all-linear, which targets
# fused experts through that conversion (peft/utils/transformers_weight_conversion.py), leaves their experts frozen
NATIVELY_FUSED_EXPERTS = frozenset({"gpt_oss", "llama4", "llama4_text"})


@dataclass(frozen=True)
class Choice:
    """One thing the plan decided that the user did not: what, the value, and where it came from."""

    what: str
    value: str
    origin: str

    def describe(self) -> str:
        return f"{self.what}: {self.value} ({self.origin})"


@dataclass(frozen=True)
class TrainPlan:
    """A training job resolved on a card: its layout, its tensors' formats and what its framework runs."""

    arch: Architecture
    job: TrainJob
    gpu: GPU
    framework: FrameworkProfile
    microbatches: int  # micro-batches one data-parallel rank runs per optimizer step (accumulation, pipeline)
    trainable_params: float  # of the whole model: LoRA's adapters, or every parameter
    sharding: Sharding  # the data-parallel runtime, its ZeRO stage and the ranks it shards over
    choices: tuple[Choice, ...] = ()
    calibration: Calibration | None = None  # the user's measured rates for this card (bench, validate, calibrate)

    @property
    def matmul_dtype(self) -> Dtype:
        """The dtype the training matmuls run in: --precision's (bf16 for the mixed-precision recipes); TF32 for an
        fp32 run with --tf32 on a card that has it."""
        if self.job.precision == "fp32" and self.job.tf32 and self.gpu.peak_flops("tf32"):
            return "tf32"
        return train_dtype(self.job.precision)

    @property
    def machine(self) -> Machine:
        """The card's achievable rates for the training matmuls, the user's calibration in place of the tables."""
        return machine(self.gpu, self.matmul_dtype, calibration=self.calibration)

    @property
    def layers_per_stage(self) -> float:
        return self.arch.layers / self.job.pp

    @property
    def model_parallel(self) -> int:
        return self.job.tp * self.job.pp

    @property
    def expert_share_held(self) -> float:
        """The share of the model's parameters one GPU holds unsharded under --ep: the routed experts (all the
        experts of each layer) split over ep data-parallel ranks, the rest whole."""
        job, arch = self.job, self.arch
        if job.ep <= 1 or not arch.total_params:
            return 1.0
        experts = sum(x.count * x.d_in * x.d_out * x.layers for x in arch.params.linears if x.count > 1)
        share = experts / arch.total_params
        return 1.0 - share + share / job.ep

    @property
    def weight_bytes(self) -> int:
        """The working copy of the weights the forward pass reads (16-bit, fp32 for --precision fp32)."""
        return training_weight_bytes(self.job.precision)

    @property
    def state_bytes(self) -> int:
        """Gradients, optimizer states and adapters (bf16 only in a pure-bf16 run)."""
        return training_state_bytes(self.job.precision)

    @property
    def act_bytes(self) -> int:
        return activation_bytes(self.job.precision)

    @property
    def autocast(self) -> bool:
        """Mixed precision as torch.autocast runs it over fp32 parameters, casting each weight per operator: adapter
        training (PEFT over a 16-bit base) and plain data parallel. DeepSpeed's and Megatron's bf16 models and FSDP's
        gathered bf16 parameters compute in 16 bit without casts."""
        job = self.job
        return job.precision in ("bf16", "fp16") and (job.trains_adapters or self.sharding.autocast_params)

    @property
    def residual_bytes(self) -> int:
        """Bytes per element of the residual stream: the embedding's dtype, since the residual adds keep the wider
        type -- fp32 for --precision fp32 and for mixed precision over fp32 weights (a full fine-tune; QLoRA, whose
        non-quantized parameters PEFT's prepare_model_for_kbit_training upcasts), else 16-bit."""
        if self.job.precision == "fp32" or (self.autocast and self.job.method in ("full", "qlora")):
            return 4
        return self.act_bytes

    @property
    def eager_modules(self) -> bool:
        """Norms and rotary embedding run as transformers' (or torchtune's) Python modules, op by op: an RMSNorm
        family, not compiled, under a framework that does not swap in fused kernels, without tensor or pipeline
        parallelism (which only those frameworks run). torch.nn.LayerNorm is one native kernel already."""
        job = self.job
        return (self.arch.rms_norm and not job.compile and not self.framework.fused_kernels.value
                and job.tp == 1 and job.pp == 1)

    @property
    def stream_bytes(self) -> int | None:
        """The residual stream's bytes between fused-away ops: fp32 under autocast over fp32 parameters."""
        job = self.job
        mixed = job.precision in ("bf16", "fp16", "fp8") and (job.trains_adapters or self.sharding.autocast_params)
        return 4 if mixed and self.framework.fp32_residual_under_autocast.value else None

    @property
    def gradients_persist(self) -> bool:
        """Whether gradients exist while the next forward runs. zero_grad(set_to_none=True) frees them after the step
        (the HF Trainer's model.zero_grad(), torchtune's, FSDP2's sharded gradients, traced); accumulation and a
        pipeline's micro-batches keep them between micro-batches, and DeepSpeed ZeRO-3's partition buffer and
        Megatron's main_grad buffer are allocated for good."""
        kept = self.sharding.stage in self.sharding.profile.gradients_kept.value
        several = self.microbatches > 1  # accumulation, or a pipeline's micro-batches (1F1B interleaves them)
        return (several or self.framework.persistent_gradients.value or kept) and not self.job.optimizer_in_backward


@dataclass(frozen=True)
class InferPlan:
    """An inference job resolved on a card: the formats it runs, and its engine's limits and rules there."""

    arch: Architecture
    job: InferJob
    gpu: GPU
    engine: EngineProfile
    rule: CardRule  # the engine's defaults for this card
    max_num_seqs: int  # the most sequences a replica batches: --max-num-seqs, else the engine's default
    memory_fraction: float | None  # the share the KV pool is sized from (None: the engine keeps no pool)
    stored: Weights  # the weights as the format stores them, by class
    choices: tuple[Choice, ...] = ()
    calibration: Calibration | None = None  # the user's measured rates for this card (bench, validate, calibrate)

    @property
    def max_batched_tokens(self) -> int | None:
        """The tokens one iteration schedules: --max-num-batched-tokens, else the engine's default for the card."""
        return self.job.max_num_batched_tokens or self.rule.max_batched_tokens

    @property
    def act_bytes(self) -> int:
        return activation_bytes(self.job.weights)

    @property
    def kv_bytes(self) -> float:
        return bytes_per_element(self.job.kv_dtype)

    @property
    def matmul_dtype(self) -> Dtype:
        """The dtype the matmuls run in on this card: the weights' format where the card multiplies it natively,
        else the 16-bit type they are dequantized to."""
        return matmul_dtype(self.job.weights, self.gpu)

    @property
    def machine(self) -> Machine:
        """The card's achievable rates for the plan's matmuls, the user's calibration in place of the tables; an
        eager engine without a traced host inventory keeps the eager per-kernel floor (one with an inventory pays
        its host's dispatch as a whole, speed/inference.py)."""
        eager = self.engine.eager.value and self.engine.host_ops is None
        return machine(self.gpu, self.matmul_dtype, eager=eager, calibration=self.calibration)

    def captured_sizes(self, query: int = 1) -> tuple[int, ...] | None:
        """The decode batches the engine replays as CUDA graphs (None: it captures none)."""
        return rules.captured_sizes(self.engine.graphs, self.rule, tp=self.job.tp, max_num_seqs=self.max_num_seqs,
                                    query=query)

    def graph_batch(self, batch: int, query: int = 1) -> int | None:
        return rules.graph_batch(self.engine.graphs, batch, self.captured_sizes(query))

    def with_job(self, **changes: Any) -> InferPlan:
        """The same plan for a copy of the job with a few fields changed (a batch, a replica's GPU count)."""
        return replace(self, job=self.job.updated(**changes))


Plan = TrainPlan | InferPlan


def adapted_linears(arch: Architecture, job: TrainJob) -> list[Linear]:
    """The linears LoRA adapts: attention only (--lora-targets attn) or every linear ('all-linear'), routed experts
    where PEFT reaches them."""
    groups = ("attn",) if job.lora_targets == "attn" else ("attn", "mlp")
    experts = peft_targets_experts(arch)
    return [x for x in arch.params.linears if x.group in groups and (x.count == 1 or experts)]


def adapter_params(arch: Architecture, job: TrainJob) -> int:
    """LoRA adapter parameters: r x (d_in + d_out) per targeted linear (PEFT's A and B matrices)."""
    return sum(job.lora_rank * (x.d_in + x.d_out) * x.count * x.layers for x in adapted_linears(arch, job))


def peft_targets_experts(arch: Architecture) -> bool:
    """Whether PEFT's LoRA with target_modules='all-linear' adapts this model's routed experts."""
    return bool(arch.experts) and arch.family not in NATIVELY_FUSED_EXPERTS


def model_plan(arch: Architecture, job: Job, gpu: GPU,
                  calibration: Calibration | None = None) -> TrainPlan | InferPlan:
    """``job`` on ``gpu`` resolved once (ConfigError for a flag the model cannot take, NotEstimable for a model
    gpuwise does not model), with the user's ``calibration`` of the card: its rates, and its runtime's measured host
    seconds per operator in place of the profile's."""
    if arch.kind == "unet":
        raise NotEstimable(f"{arch.name} is a UNET model: gpuwise models transformers and ResNets only "
                           f"({arch.total_params:,} parameters, {weights(arch, 'fp16').bytes / 1e9:.2f} GB of fp16 "
                           "weights)")
    if isinstance(job, TrainJob):
        job = with_framework(job)  # the framework's recipe for the flags the user left out
    job = for_encoder(arch, for_images(arch, job))  # a ViT's sequence is its patches; an encoder generates nothing
    require_tp(arch, job.tp)
    plan = _train_plan(arch, job, gpu) if isinstance(job, TrainJob) else _infer_plan(arch, job, gpu)
    return _calibrated(plan, calibration)


def _calibrated(plan: TrainPlan | InferPlan, calibration: Calibration | None) -> TrainPlan | InferPlan:
    """The plan carrying the user's calibration, and its runtime's host seconds per operator as a validate run
    measured them (an eager runtime's dispatch floor, re-derived for this job's operators)."""
    if calibration is None:
        return plan
    plan = replace(plan, calibration=calibration)
    if calibration.host_op_s is None:
        return plan
    measured = Sourced(calibration.host_op_s, f"measured: {calibration.source or 'a validate record'}")
    if isinstance(plan, TrainPlan):
        if plan.framework.launch_cost_s is None:
            return plan
        return replace(plan, framework=replace(plan.framework, launch_cost_s=measured))
    if plan.engine.launch_cost_s is None:
        return plan
    return replace(plan, engine=replace(plan.engine, launch_cost_s=measured))


def with_framework(job: TrainJob) -> TrainJob:
    """``job`` with --framework's defaults for the fields the user left free (runtimes/rules.py framework_fills: its
    recipe for this GPU count, method and checkpointing), ``framework_filled`` naming them. Settled here, once per
    resolve, so a copy at another GPU count (recommend's layouts) gets that count's recipe."""
    if job.framework is None:
        return job
    given = job.model_dump(exclude_unset=True, exclude=set(job.framework_filled))
    values = rules.apply_framework(given)
    filled = tuple(values.pop("framework_filled", ()))
    return job.with_recipe(values, filled)


def _train_plan(arch: Architecture, job: TrainJob, gpu: GPU) -> TrainPlan:
    if job.ep > 1 and not arch.experts:
        raise ConfigError(f"--ep {job.ep} spreads routed experts over GPUs; {arch.name} has none")
    require_training_knobs(arch, job)
    framework = runtimes.framework(job.framework)
    accumulation = math.ceil(job.global_batch / (job.batch * job.data_parallel)) if job.global_batch else 1
    microbatches = max(job.pp_microbatches or job.pp, accumulation) if job.pp > 1 else accumulation
    trainable = float(adapter_params(arch, job) if job.trains_adapters else arch.total_params)
    sharding = resolve_sharding(job, framework)  # the job arrives with its recipe filled (model_plan)
    choices = _train_choices(job, framework) + _sharding_choices(job, sharding)
    return TrainPlan(arch, job, gpu, framework, microbatches, trainable, sharding, choices)


def data_parallel_layout(job: TrainJob) -> Sharding:
    """The data-parallel runtime, ZeRO stage and sharding ranks of a bare training job, as its plan would decide them
    (its framework's recipe filled first): what ``--trace`` shards with when it is given no plan."""
    job = with_framework(job)
    return resolve_sharding(job, runtimes.framework(job.framework))


def _sharding_choices(job: TrainJob, sharding: Sharding) -> tuple[Choice, ...]:
    """The ZeRO stage when gpuwise chose it (the runtime that shards is in the sharding's own description)."""
    if job.zero is not None or sharding.stage == 0:
        return ()
    return (Choice("ZeRO stage", f"{sharding.stage} over {job.data_parallel} data-parallel ranks",
                   "gpuwise default for several data-parallel GPUs, as torchtune's and torchtitan's distributed "
                   "recipes shard (FSDP2)"),)


def _train_choices(job: TrainJob, framework: FrameworkProfile) -> tuple[Choice, ...]:
    found = []
    if job.framework is not None:
        sources = [framework.fills, framework.fills_one_gpu_full, framework.fills_while_checkpointing]
        for name in job.framework_filled:
            source = next((s.source for s in sources if s is not None and name in s.value),
                          framework.zero_when_data_parallel.source if framework.zero_when_data_parallel else "")
            found.append(Choice(f"--{name.replace('_', '-')}", str(getattr(job, name)),
                                f"{framework.name}'s default: {source}"))
    return tuple(found)


def _infer_plan(arch: Architecture, job: InferJob, gpu: GPU) -> InferPlan:
    if job.ep > 1 and not arch.experts:
        raise ConfigError(f"--ep {job.ep} spreads routed experts over GPUs; {arch.name} has none (use --tp)")
    if job.cpu_moe and not arch.experts:
        raise ConfigError(f"--n-cpu-moe keeps routed experts in host RAM; {arch.name} has none (a dense model "
                          "offloads whole layers: fewer --gpu-layers, not modelled)")
    given = job.quant
    job = job.for_checkpoint(arch.checkpoint)  # the checkpoint's weight format unless --quant says otherwise
    engine = runtimes.engine(job.engine)
    # the memory the engine's device query reports: on a unified-memory machine, the GPU's share (torch's total)
    rule = rules.card_rule(engine, gpu.usable_memory_bytes, (gpu.id, gpu.name))
    seqs = job.max_num_seqs or rule.max_num_seqs or UNBOUNDED_SEQUENCES
    fraction = engine.memory_fraction.value if engine.memory_fraction else None
    if fraction is not None and job.memory_fraction is not None:
        fraction = job.memory_fraction
    choices = _infer_choices(arch, job, engine, rule, given)
    stored = as_header_says(weights(arch, job.weights), job.weights_bytes)
    padding = engine.kernels.expert_padding
    stored = padded_experts(stored, arch, job.tp, padding.value if padding else None,
                            gpu.compute_capability if gpu.vendor == "nvidia" else None)
    return InferPlan(arch, job, gpu, engine, rule, seqs, fraction, stored, choices)


def _infer_choices(arch: Architecture, job: InferJob, engine: EngineProfile, rule: CardRule,
                   given: str | None) -> tuple[Choice, ...]:
    found = []
    if given is None and arch.decoder_layers:
        origin = (f"the checkpoint's format: {arch.checkpoint.source}" if arch.checkpoint is not None and
                  arch.checkpoint.quant == job.weights else "a 16-bit checkpoint, as shipped")
        found.append(Choice("weights", job.weights, origin))
    profile = engine.memory_profile(job.engine_version)
    if profile is not None and (profile.fraction_by_tp or profile.fraction_reserve) and job.memory_fraction is None:
        found.append(Choice("KV pool", "the share of memory this version derives for the card and TP (the pool "
                                       "line gives it)", f"{engine.name} default: {profile.source}"))
    elif engine.memory_fraction is not None and job.memory_fraction is None:
        pool = engine.kv_pool.value
        unit = "of what the loaded engine leaves free" if pool == "of_free" else "of total memory"
        found.append(Choice("KV pool", f"{engine.memory_fraction.value:.0%} {unit}",
                            f"{engine.name} default: {engine.memory_fraction.source}"))
    if job.max_num_seqs is None and job.max_num_batched_tokens is None and engine.pooled:  # its own scheduler
        limits = [f"{rule.max_num_seqs:,} sequences" if rule.max_num_seqs else "no sequence cap",
                  f"{rule.max_batched_tokens:,} tokens per iteration" if rule.max_batched_tokens else "no token budget"]
        found.append(Choice("batch limits", ", ".join(limits), f"{engine.name} default on this card: "
                                                               f"{engine.card_rules.source}"))
    return tuple(found)


def tp_divides(arch: Architecture, tp: int) -> bool:
    """Tensor parallelism splits the attention heads (and KV heads, replicated when fewer) evenly over the GPUs."""
    return tp == 1 or not arch.heads or arch.heads % tp == 0


def require_tp(arch: Architecture, tp: int) -> None:
    if not tp_divides(arch, tp):
        fits = [t for t in (1, 2, 4, 8, 16) if tp_divides(arch, t)]
        raise ConfigError(f"--tp {tp} does not divide {arch.name}'s {arch.heads} attention heads; "
                          f"use one of {', '.join(map(str, fits))}")


def require_training_knobs(arch: Architecture, job: TrainJob) -> None:
    """Refuse training flags that would change nothing for this model."""
    if job.decoder_seq is not None and arch.kind != "encoder-decoder":
        raise ConfigError(f"--decoder-seq is an encoder-decoder's label length (T5, BART); {arch.name} is not an "
                          "encoder-decoder: leave it out")
    if arch.kind == "cnn" and (job.activation_offload or job.framework is not None or job.packed or job.compile):
        raise ConfigError("--cpu-activations, --framework, --packed and --compile model transformer fine-tuning "
                          "stacks, not a CNN")
    if job.loss != "standard" and not arch.lm_head and "loss" not in job.framework_filled:
        raise ConfigError(f"--loss {job.loss} changes a language-model head's cross-entropy; {arch.name} has none")
