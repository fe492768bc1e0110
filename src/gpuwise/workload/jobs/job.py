"""The job descriptions: what is trained or served, how, and on how many GPUs; and a serving load test.

Each field is the one definition of its flag (type, range, default, help; :mod:`gpuwise.flags` says
which commands take it). The CLI, the API, the web app and scenario files all build these models. Upper bounds
are far above any real job and keep every computation finite.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator
from pydantic.fields import FieldInfo

from gpuwise import runtimes
from gpuwise.flags import JOB_COMMANDS, Flag, build
from gpuwise.runtimes import rules
from gpuwise.runtimes.names import Engine, Framework, Sharding  # the runtimes' names, beside their registries
from gpuwise.runtimes.rules import engine_refusal
from gpuwise.workload.model.checkpoint import WeightFormat

Task = Literal["train", "infer"]
Method = Literal["full", "lora", "qlora"]
Precision = Literal["bf16", "fp16", "fp32", "pure-bf16", "fp8"]
Optimizer = Literal["adamw", "adamw-8bit", "paged-adamw", "paged-adamw-8bit", "sgd", "adafactor"]
Checkpointing = Literal["none", "selective", "full"]
Offload = Literal["none", "optimizer", "optimizer+params"]
LoraTargets = Literal["attn", "all-linear"]
Loss = Literal["standard", "chunked", "fused"]
Quant = Literal["fp32", "bf16", "fp16", "fp8", "fp8-block", "int8", "mxfp4", "nvfp4", "int4", "awq-int4", "gptq-int4",
                "gguf-q4_k_m", "gguf-q8_0"]
KvDtype = Literal["fp16", "bf16", "fp8", "q8_0", "q4_0"]

_ALL = JOB_COMMANDS
_TRAIN = frozenset({"estimate", "fit", "scale", "recommend"})
_INFER = frozenset({"estimate", "fit", "serve-sim", "recommend"})
_SPEC = frozenset({"estimate", "serve-sim", "recommend"})  # decode speed only: fit has no use for it
_SIZED = frozenset({"estimate", "fit", "serve-sim"})  # scale and recommend choose the GPU count themselves
HARDWARE, TRAINING, INFERENCE = "Job: hardware and parallelism", "Job: training", "Job: inference"
_TASK_FLAG = Flag(frozenset({"estimate", "fit", "recommend"}), HARDWARE, accepted=("train", "infer", "hpc"))
_TASK_HELP = "train (fine-tuning, pre-training), infer (serving, generation) or hpc (an application: --app)"
TP_CHOSEN = "recommend picks the tensor-parallel degree whose replicas carry the most requests/s; leave --tp out"
_ONE_REPLICA = ("serves from replicas of --tp GPUs inside one machine; machines and the links between them do not "
                "change a replica's answer: leave it out")
_MEMORY_ONLY = "fit answers memory per GPU, which machines and links do not change: leave it out"
_FIT_REPLICA = "fit answers the memory of one replica of --tp GPUs; leave --count out"
_NO_NODES = {("estimate", "infer"): "inference " + _ONE_REPLICA, ("serve-sim", "infer"): "serve-sim " + _ONE_REPLICA,
             ("fit", "train"): _MEMORY_ONLY, ("fit", "infer"): _MEMORY_ONLY}
_MEMORY_ONLY_FIT = {("fit", "train"): _MEMORY_ONLY, ("fit", "infer"): _MEMORY_ONLY}  # a replica's TP crosses the slot



class _Job(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    count: Annotated[int, Field(ge=1, le=65536), Flag(_SIZED, HARDWARE, refused={("fit", "infer"): _FIT_REPLICA})] = (
        Field(default=1, description="GPUs in the job (infer: --count / --tp replicas share the load)"))
    nodes: Annotated[int, Field(ge=1, le=8192), Flag(_SIZED, HARDWARE, refused=_NO_NODES)] = Field(
        default=1, description="machines the GPUs sit in")
    network: Annotated[str | None, Field(max_length=64, pattern=r"^[a-z0-9][a-z0-9.-]*$"),
                       Flag(_ALL, HARDWARE, refused=_NO_NODES)] = (
        Field(default=None, description="catalog id of the link between nodes: ib-ndr, ib-hdr, eth-400g ..."))
    slot_link: Annotated[str | None, Field(max_length=64, pattern=r"^[a-z0-9][a-z0-9.-]*$"),
                         Flag(_ALL, HARDWARE, refused=_MEMORY_ONLY_FIT)] = Field(
        default=None, description="catalog id of the PCIe link each card's slot gives it, when narrower than the "
                                  "card's own: pcie4-x8 for two cards on one consumer CPU's 16 lanes")
    tp: Annotated[int, Field(ge=1, le=1024), Flag(_ALL, HARDWARE, refused={("recommend", "infer"): TP_CHOSEN})] = (
        Field(default=1, description="tensor-parallel degree"))
    batch: Annotated[int, Field(ge=1, le=1_000_000), Flag(_ALL, HARDWARE, refused={("serve-sim", "infer"): (
        "under load the batch is what the arrivals make it; cap it with --max-num-seqs")})] = Field(
        default=1, description="micro-batch per GPU (train) or concurrent sequences per replica (infer)")
    ep: Annotated[int, Field(ge=1, le=1024), Flag(frozenset({"estimate", "fit", "serve-sim"}), HARDWARE)] = Field(
        default=1, description="expert parallelism: the routed experts spread over this many GPUs, tokens reaching "
                               "them through an all-to-all. Infer: GPUs of the replica (vLLM --enable-expert-parallel, "
                               "SGLang --ep-size; alone at --tp 1 it also runs attention data-parallel). Train: "
                               "data-parallel ranks (torchtitan expert_parallel_degree, Megatron "
                               "--expert-model-parallel-size)")
    flash_attn: Annotated[bool, Flag(_ALL, HARDWARE)] = Field(
        default=True, description="FlashAttention / fused SDPA kernels: no s x s score tensor")
    compile: Annotated[bool, Flag(_ALL, HARDWARE, negatable=True)] = Field(
        default=False, description="a compiled model: train -- torch.compile, whose backward recomputes the "
                                   "elementwise ops (inductor's min-cut partitioner), so layers keep only matmul and "
                                   "attention outputs; infer -- transformers' static cache with torch.compile (or "
                                   "another graph compiler, XLA, TensorRT), whose CUDA graphs replay a step without "
                                   "Python dispatching each operator")
    image_size: Annotated[int | None, Field(ge=32, le=8192), Flag(_ALL - {"serve-sim"}, HARDWARE)] = Field(
        default=None, description="vision models: the input images' side in pixels (default: the model's own -- 224 "
                                  "ResNet/ViT, 1024 SAM, 640 YOLO, 512 U-Net); a ViT's tokens follow: (side / patch)^2")

    def updated(self, **changes: object) -> Any:
        """A validated copy with some fields changed: the given stay given, a recipe's fills go (the plan refills)."""
        kept = self.model_dump(exclude_unset=True, exclude=set(getattr(self, "framework_filled", ())))
        return build(type(self), {**kept, **changes})


class TrainJob(_Job):
    """Fine-tuning or pre-training; ``batch`` is the micro-batch per data-parallel rank."""

    shorthands: ClassVar[dict[str, tuple[FieldInfo, Flag]]] = {"grad_ckpt": (
        FieldInfo(annotation=bool, default=None, description="same as --ckpt full (--no-grad-ckpt: --ckpt none)"),
        Flag(_TRAIN, TRAINING, negatable=True))}

    task: Annotated[Literal["train"], _TASK_FLAG] = Field(default="train", description=_TASK_HELP)
    method: Annotated[Method, Flag(_TRAIN, TRAINING)] = Field(
        default="full", description="full fine-tuning, LoRA adapters, or QLoRA (4-bit NF4 base + LoRA)")
    precision: Annotated[Precision, Flag(_TRAIN, TRAINING)] = Field(
        default="bf16", description="bf16/fp16 = mixed precision with fp32 master weights; pure-bf16 = everything "
                                    "in bf16; fp8 = FP8 matmuls (Transformer Engine, torchao)")
    tf32: Annotated[bool, Flag(_TRAIN, TRAINING, negatable=True)] = Field(
        default=False, description="with --precision fp32: matmuls in TF32 on tensor cores (PyTorch's "
                                   "torch.backends.cuda.matmul.allow_tf32, off by default since 1.12; NVIDIA's NGC "
                                   "containers turn it on); fp32 convolutions run in TF32 already (cuDNN's default)")
    optimizer: Annotated[Optimizer, Flag(_TRAIN, TRAINING)] = Field(default="adamw", description="optimizer")
    seq: Annotated[int, Field(ge=1, le=10_000_000), Flag(_TRAIN, TRAINING)] = Field(
        default=2048, description="tokens per sequence")
    decoder_seq: Annotated[int | None, Field(ge=1, le=10_000_000), Flag(_TRAIN, TRAINING)] = Field(
        default=None, description="an encoder-decoder's label tokens (T5, BART): its decoder's length; default --seq")
    ckpt: Annotated[Checkpointing, Flag(_TRAIN, TRAINING)] = Field(
        default="none", description="activation checkpointing")
    zero: Annotated[int | None, Field(ge=0, le=3), Flag(_TRAIN, TRAINING)] = Field(
        default=None, description="ZeRO stage 0-3: what the data-parallel ranks shard -- 1 optimizer states, 2 and "
                                  "gradients (FSDP SHARD_GRAD_OP), 3 and weights (FSDP FULL_SHARD); default: 3 when "
                                  "data-parallel over several GPUs, else 0")
    sharding: Annotated[Sharding | None, Flag(_TRAIN, TRAINING)] = Field(
        default=None, description="whose code shards: ddp, deepspeed (ZeRO-1/2/3), fsdp (FSDP1: SHARD_GRAD_OP, "
                                  "FULL_SHARD), fsdp2 (fully_shard, reshard_after_forward) or megatron (distributed "
                                  "optimizer at --zero 1); default: the framework's, else deepspeed for --zero 1 or "
                                  "--offload optimizer, fsdp2 for --zero 2 and 3, ddp for 0")
    hybrid_shard: Annotated[bool, Flag(_TRAIN, TRAINING, negatable=True)] = Field(
        default=False, description="shard within each machine and replicate across machines (FSDP HYBRID_SHARD, "
                                   "FSDP2 HSDP): the sharded states divide by one machine's data-parallel GPUs")
    offload: Annotated[Offload, Flag(_TRAIN, TRAINING, accepted=(*get_args(Offload), "model-cpu", "sequential",
                                                                    "auto"))] = (
        Field(default="none", description="CPU offload: optimizer or optimizer+params when training (ZeRO-Offload); "
                                          "an image pipeline's: model-cpu or sequential (diffusers), auto, none "
                                          "or sequential (ComfyUI)"))
    pp: Annotated[int, Field(ge=1, le=1024), Flag(_TRAIN, TRAINING)] = Field(
        default=1, description="pipeline-parallel degree")
    pp_microbatches: Annotated[int | None, Field(ge=1, le=100_000), Flag(_TRAIN, TRAINING)] = Field(
        default=None, description="micro-batches in the pipeline (default: --pp)")
    lora_rank: Annotated[int, Field(ge=1, le=65536), Flag(_TRAIN, TRAINING)] = Field(
        default=16, description="LoRA rank r")
    lora_targets: Annotated[LoraTargets, Flag(_TRAIN, TRAINING)] = Field(
        default="all-linear", description="linears the adapters train: attention projections or all of them")
    tokens: Annotated[float | None, Field(gt=0, le=1e16), Flag(_TRAIN - {"fit"}, TRAINING)] = Field(
        default=None, description="tokens in one epoch (one job)")
    global_batch: Annotated[int | None, Field(ge=1, le=1_000_000_000), Flag(_TRAIN, TRAINING)] = Field(
        default=None, description="sequences per optimizer step: gives the gradient accumulation")
    loss: Annotated[Loss, Flag(_TRAIN, TRAINING)] = Field(
        default="standard", description="cross-entropy: standard (transformers: fp32 logits), chunked (torchtune "
                                        "CEWithChunkedOutputLoss, 8 chunks upcast one at a time) or fused (Liger / "
                                        "cut-cross-entropy / Unsloth: the full logits never exist)")
    optimizer_in_backward: Annotated[bool, Flag(_TRAIN, TRAINING, name="--optim-in-bwd", negatable=True,
                                                            aliases=("--optimizer-in-backward",))] = Field(
        default=False, description="step each parameter as its gradient arrives and free it (torchtune "
                                   "optimizer_in_bwd; also --optimizer-in-backward): no full-model gradient buffer; "
                                   "no gradient accumulation")
    framework: Annotated[Framework | None, Flag(_TRAIN, TRAINING)] = Field(
        default=None, description="fill the flags you leave out with this framework's defaults (torchtune: bf16, "
                                  "checkpointing, chunked loss; unsloth: offloaded checkpoints, fused loss; "
                                  "torchtitan: selective checkpointing); the estimate lists what it filled")
    activation_offload: Annotated[bool, Flag(_TRAIN, TRAINING, name="--cpu-activations", negatable=True,
                                                             aliases=("--activation-offload",))] = Field(
        default=False, description="keep saved activations in host memory between forward and backward "
                                   "(torchtune enable_activation_offloading; also --activation-offload): two layers "
                                   "stay on the GPU")

    packed: Annotated[bool, Flag(_TRAIN, TRAINING, negatable=True)] = Field(
        default=False, description="several documents packed into each --seq sequence (torchtune packed=True, "
                                   "axolotl sample_packing, TRL packing): without FlashAttention the block-causal "
                                   "mask is held too")

    _recipe_filled: tuple[str, ...] = PrivateAttr(default=())  # set by with_recipe only: never an input

    @property
    def framework_filled(self) -> tuple[str, ...]:
        """The fields --framework's recipe filled; set when the plan resolves the job (with_recipe)."""
        return self._recipe_filled

    def with_recipe(self, values: Mapping[str, object], filled: tuple[str, ...]) -> TrainJob:
        """The job of ``values`` (the user's flags and the recipe's fills), remembering which the recipe filled."""
        job = build(TrainJob, values)
        job._recipe_filled = filled
        return job

    @property
    def recipe_fields(self) -> frozenset[str]:
        """The fields --framework's recipe may fill (a reproduce command spells the user's even at their default)."""
        return rules.recipe_fields(runtimes.framework(self.framework)) if self.framework else frozenset()

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("grad_ckpt") is not None:
            data = dict(data)
            on = data.pop("grad_ckpt")
            if not isinstance(on, bool):
                raise ValueError(f"--grad-ckpt must be true or false, got {on!r:.40}")
            if "ckpt" in data and data["ckpt"] != ("full" if on else "none"):
                raise ValueError("give --grad-ckpt or --ckpt, not both")
            data["ckpt"] = "full" if on else "none"
        elif isinstance(data, dict) and "grad_ckpt" in data:
            data = {k: v for k, v in data.items() if k != "grad_ckpt"}
        return data

    @model_validator(mode="after")
    def _coherent(self) -> TrainJob:
        if self.count % (self.tp * self.pp):
            raise ValueError(f"--count {self.count} is not a multiple of --tp {self.tp} x --pp {self.pp}")
        if self.count % self.nodes:
            raise ValueError(f"--count {self.count} GPUs do not split evenly over --nodes {self.nodes}")
        if self.data_parallel % self.ep:
            raise ValueError(f"--ep {self.ep} does not divide the {self.data_parallel} data-parallel ranks (--count / "
                             "(--tp x --pp)): training spreads the experts over data-parallel ranks")
        if self.optimizer_in_backward and self.accumulates:
            raise ValueError("--optim-in-bwd steps at every backward: it cannot accumulate gradients over "
                             "--global-batch (torchtune refuses gradient_accumulation_steps > 1 with it)")
        if self.tf32 and self.precision != "fp32":
            raise ValueError(f"--tf32 runs an fp32 job's matmuls in TF32; with --precision {self.precision} they run "
                             "in that dtype already: add --precision fp32 or drop --tf32")
        return self

    @property
    def data_parallel(self) -> int:
        return self.count // (self.tp * self.pp)

    @property
    def accumulates(self) -> bool:
        """Whether --global-batch needs gradient accumulation over several micro-batches per step."""
        return self.global_batch is not None and self.global_batch > self.batch * self.data_parallel

    @property
    def trains_adapters(self) -> bool:
        return self.method in ("lora", "qlora")


class InferJob(_Job):
    """Serving or offline generation of ``batch`` sequences of ``input_len`` + ``output_len`` tokens."""

    shorthands: ClassVar[dict[str, tuple[FieldInfo, Flag]]] = {}

    task: Annotated[Literal["infer"], _TASK_FLAG] = Field(default="infer", description=_TASK_HELP)
    quant: Annotated[Quant | None, Flag(_INFER, INFERENCE, accepted=(*get_args(Quant), "nf4"))] = Field(
        default=None, description="weight format (default: the checkpoint's -- bf16, or what its config.json says, "
                                  "e.g. mxfp4 for gpt-oss, fp8-block for DeepSeek-V3; an image pipeline's "
                                  "denoiser: bf16, fp16, fp8 or nf4)")
    kv_dtype: Annotated[KvDtype, Flag(_INFER, INFERENCE, metavar="FORMAT")] = Field(
        default="fp16", description="KV cache format: fp16, bf16, fp8 (vLLM, SGLang, TRT-LLM), q8_0, q4_0 (llama.cpp)")
    input_len: Annotated[int, Field(ge=1, le=10_000_000), Flag(_INFER, INFERENCE)] = Field(
        default=1024, description="prompt tokens")
    output_len: Annotated[int, Field(ge=0, le=1_000_000), Flag(_INFER, INFERENCE)] = Field(
        default=256, description="generated tokens")
    engine: Annotated[Engine, Flag(_INFER, INFERENCE, accepted=(*get_args(Engine), *runtimes.IMAGE_ENGINE_IDS))] = (
        Field(default="vllm", description="serving engine (an image pipeline: diffusers or comfyui)"))
    dp_attention: Annotated[int, Field(ge=1, le=8192), Flag(frozenset({"estimate", "fit", "serve-sim"}),
                                                             INFERENCE)] = Field(
        default=1, description="attention data-parallel groups of --tp GPUs in one replica (SGLang "
                               "--enable-dp-attention --dp-size, TRT-LLM attention DP): each runs attention for its "
                               "share of the batch; the replica spans tp x dp-attention GPUs")
    weights_bytes: float | None = Field(default=None, gt=0, le=1e15, description="the checkpoint's exact weight "
                                        "bytes, read from its header (--weights FILE|URL)")
    cpu_moe: Annotated[int, Field(ge=0, le=1024), Flag(_INFER, INFERENCE, name="--n-cpu-moe")] = Field(
        default=0, description="llama.cpp: keep the routed experts of the first N MoE layers in host RAM (the CPU "
                               "runs them in decode; prompts copy them to the GPU)")
    host_bandwidth_gb_s: Annotated[float | None, Field(gt=0, le=20_000), Flag(_INFER, INFERENCE)] = Field(
        default=None, description="the host's memory bandwidth for --n-cpu-moe (default 89.6: dual-channel "
                                  "DDR5-5600)")
    mtp: Annotated[bool, Flag(_INFER, INFERENCE)] = Field(
        default=False, description="load the checkpoint's multi-token-prediction layers as the speculative decoder "
                                   "(DeepSeek-V3/R1, GLM; vLLM --speculative-config method mtp)")
    spec_tokens: Annotated[int, Field(ge=0, le=16), Flag(_SPEC, INFERENCE)] = Field(
        default=0, description="speculative decoding: tokens the draft head proposes per step, verified together "
                               "by one forward of the model (vLLM num_speculative_tokens, SGLang "
                               "--speculative-num-steps); needs --spec-accept")
    spec_accept: Annotated[float | None, Field(gt=0, le=1), Flag(_SPEC, INFERENCE)] = Field(
        default=None, description="the chance each drafted token is accepted (measured on your traffic: vLLM's "
                                  "spec-decode metrics report it); a step yields (1 - a^(K+1)) / (1 - a) tokens")
    memory_fraction: Annotated[float | None, Field(gt=0, le=1), Flag(_INFER, INFERENCE, name="--mem-fraction")] = (
        Field(default=None, description="the share of memory the engine sizes its KV pool from: vLLM "
                                        "--gpu-memory-utilization (default 0.9), SGLang --mem-fraction-static "
                                        "(0.88), TensorRT-LLM free_gpu_memory_fraction (0.9 of what is free)"))
    engine_version: Annotated[str | None, Field(max_length=40), Flag(_INFER, INFERENCE)] = Field(
        default=None, description="the engine's version (vLLM 0.6.4, 0.11.0 ...): its memory profile and KV sizing "
                                  "as that version does them (default: the newest)")
    enforce_eager: Annotated[bool, Flag(_INFER, INFERENCE)] = Field(
        default=False, description="vLLM --enforce-eager: no CUDA graphs captured, no graph memory")
    max_num_seqs: Annotated[int | None, Field(ge=1, le=100_000), Flag(frozenset({"serve-sim", "recommend"}),
                                                                        INFERENCE)] = Field(
        default=None, description="under load: the most sequences a replica batches (vLLM --max-num-seqs; "
                                  "default: the engine's own for the card -- vLLM 1024 on 70 GiB+ cards other than "
                                  "A100, else 256; SGLang: as many as the KV pool holds)")
    max_num_batched_tokens: Annotated[int | None, Field(ge=1, le=10_000_000),
                                      Flag(frozenset({"estimate", "fit", "serve-sim", "recommend"}),
                                           INFERENCE)] = Field(
        default=None, description="the tokens one engine iteration schedules, prompt chunks included (vLLM "
                                  "--max-num-batched-tokens, SGLang --chunked-prefill-size, TensorRT-LLM "
                                  "max_num_tokens); default: the engine's own for the card")

    @property
    def weights(self) -> Quant:
        """The weight format: --quant, else 16-bit (call ``for_checkpoint`` first to take the checkpoint's)."""
        return self.quant or "bf16"

    def for_checkpoint(self, checkpoint: WeightFormat | None) -> InferJob:
        """This job with the checkpoint's weight format when --quant was not given (bf16 when the checkpoint is
        16-bit, or when this engine cannot run its format); holding the checkpoint's exact bytes when it gives them
        (a GGUF file's header) and the job runs that format."""
        job = self
        if self.quant is None:
            wanted = checkpoint.quant if checkpoint is not None else "bf16"
            job = self.model_copy(update={"quant": wanted if runtimes.engine_runs(self.engine, wanted) else "bf16"})
        exact = checkpoint.exact_bytes if checkpoint is not None else None
        if exact and job.weights_bytes is None and checkpoint is not None and job.quant == checkpoint.quant:
            job = job.model_copy(update={"weights_bytes": exact})
        return job

    @field_validator("engine_version")
    @classmethod
    def _a_version(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"v?[0-9]+(\.[0-9]+){0,3}([.+-]?[0-9A-Za-z.+-]*)?", value):
            raise ValueError(f"{value!r} is not a version: give the engine's version as it prints it, e.g. 0.6.4, "
                             "v0.11.0 or 0.6.4.dev9+g5d264f4a")
        return value

    @field_validator("engine", mode="before")
    @classmethod
    def _a_language_model_engine(cls, value: object) -> object:
        if value in runtimes.IMAGE_ENGINE_IDS:
            raise ValueError(f"{value} runs image pipelines (sdxl, flux.1-dev: `gpuwise models`); a language model "
                             f"runs on one of: {', '.join(runtimes.ENGINE_IDS)}")
        return value

    @model_validator(mode="after")
    def _coherent(self) -> InferJob:
        pooled = tuple(sorted(e for e in runtimes.ENGINE_IDS if runtimes.engine(e).pooled))
        refusal = engine_refusal(runtimes.engine(self.engine), quant=self.quant, kv_dtype=self.kv_dtype,
                                 memory_fraction=self.memory_fraction, cpu_moe=self.cpu_moe, pooled=pooled,
                                 engine_version=self.engine_version, enforce_eager=self.enforce_eager)
        if refusal:
            raise ValueError(refusal)
        if self.count % self.tp:
            raise ValueError(f"--count {self.count} is not a multiple of --tp {self.tp}")
        if self.replica_gpus % self.ep:
            raise ValueError(f"--ep {self.ep} does not divide the replica's {self.replica_gpus} GPUs (--tp x "
                             "--dp-attention)")
        if self.count % self.replica_gpus:
            raise ValueError(f"--count {self.count} is not a multiple of the replica's {self.replica_gpus} GPUs "
                             "(--tp x --dp-attention)")
        if self.count % self.nodes:
            raise ValueError(f"--count {self.count} GPUs do not split evenly over --nodes {self.nodes}")
        if (self.spec_tokens > 0) != (self.spec_accept is not None):
            raise ValueError("--spec-tokens K and --spec-accept P go together: K drafted tokens per step, each "
                             "accepted with probability P (e.g. --spec-tokens 3 --spec-accept 0.7)")
        return self

    @property
    def tokens_per_step(self) -> float:
        """Tokens a sequence gains per decode step: 1, or the accepted drafts plus the verifier's own token,
        (1 - a^(K+1)) / (1 - a) (Leviathan et al. 2023, arXiv 2211.17192, eq. 1; i.i.d. acceptance)."""
        if not self.spec_tokens or self.spec_accept is None:
            return 1.0
        a, k = self.spec_accept, self.spec_tokens
        return float(k + 1) if a >= 1.0 else (1 - a ** (k + 1)) / (1 - a)

    @property
    def context(self) -> int:
        return self.input_len + self.output_len

    @property
    def attention_dp(self) -> int:
        """Attention data-parallel groups: --dp-attention, or --ep alone at --tp 1 (SGLang's DP attention with EP)."""
        if self.dp_attention > 1:
            return self.dp_attention
        return self.ep if self.tp == 1 else 1

    @property
    def replica_gpus(self) -> int:
        """GPUs one copy of the model spans: --tp x the attention data-parallel groups."""
        return self.tp * self.attention_dp

    @property
    def local_batch(self) -> int:
        """Sequences each GPU of the replica runs attention for: its group's share of --batch."""
        return -(-self.batch // self.attention_dp)


Job = TrainJob | InferJob
JOB_MODELS: dict[str, type[TrainJob] | type[InferJob]] = {"train": TrainJob, "infer": InferJob}
