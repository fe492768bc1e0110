"""The job descriptions: what is trained or served, how, and on how many GPUs.

These mirror the stable ``gpuwise estimate`` flags (see the README); every value is validated here once.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gpuwise.errors import ConfigError

Method = Literal["full", "lora", "qlora"]
Precision = Literal["bf16", "fp16", "fp32", "pure-bf16", "fp8"]
Optimizer = Literal["adamw", "adamw-8bit", "paged-adamw-8bit", "sgd", "adafactor"]
Checkpointing = Literal["none", "selective", "full"]
Offload = Literal["none", "optimizer", "optimizer+params"]
LoraTargets = Literal["attn", "all-linear"]
Quant = Literal["fp32", "bf16", "fp16", "fp8", "int8", "awq-int4", "gptq-int4", "gguf-q4_k_m", "gguf-q8_0"]
KvDtype = Literal["fp16", "bf16", "fp8"]
Engine = Literal["vllm", "sglang", "trtllm", "lmdeploy", "hf", "llamacpp", "exllamav2"]

CHOICES: dict[str, tuple[str, ...]] = {
    "method": get_args(Method), "precision": get_args(Precision), "optimizer": get_args(Optimizer),
    "ckpt": get_args(Checkpointing), "offload": get_args(Offload), "lora_targets": get_args(LoraTargets),
    "quant": get_args(Quant), "kv_dtype": get_args(KvDtype), "engine": get_args(Engine),
}
"""Accepted values of each choice flag, for help texts and error messages."""


class _Job(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    count: int = Field(default=1, ge=1, le=65536, description="GPUs in the job")
    nodes: int = Field(default=1, ge=1, description="machines the GPUs sit in")
    network: str | None = Field(default=None, description="catalog id of the link between nodes")
    tp: int = Field(default=1, ge=1, description="tensor-parallel degree")


class TrainJob(_Job):
    """Fine-tuning or pre-training; ``batch`` is the micro-batch per data-parallel rank."""

    method: Method = "full"
    precision: Precision = "bf16"
    optimizer: Optimizer = "adamw"
    batch: int = Field(default=1, ge=1)
    seq: int = Field(default=2048, ge=1)
    ckpt: Checkpointing = "none"
    flash_attn: bool = True
    zero: int = Field(default=0, ge=0, le=3)
    offload: Offload = "none"
    pp: int = Field(default=1, ge=1)
    pp_microbatches: int | None = Field(default=None, ge=1)
    lora_rank: int = Field(default=16, ge=1)
    lora_targets: LoraTargets = "all-linear"
    tokens: float | None = Field(default=None, gt=0, description="tokens in one epoch")
    global_batch: int | None = Field(default=None, ge=1, description="sequences per optimizer step")

    @model_validator(mode="after")
    def _coherent(self) -> TrainJob:
        if self.count % (self.tp * self.pp):
            raise ValueError(f"--count {self.count} is not a multiple of --tp {self.tp} x --pp {self.pp}")
        if self.offload != "none" and self.zero == 0:
            raise ValueError(f"--offload {self.offload} needs --zero 1, 2 or 3 (ZeRO-Offload / FSDP CPU offload)")
        if self.offload == "optimizer+params" and self.zero != 3:
            raise ValueError("--offload optimizer+params needs --zero 3 (parameters are offloaded only when sharded)")
        if self.count % self.nodes:
            raise ValueError(f"--count {self.count} GPUs do not split evenly over --nodes {self.nodes}")
        return self

    @property
    def data_parallel(self) -> int:
        return self.count // (self.tp * self.pp)

    @property
    def trains_adapters(self) -> bool:
        return self.method in ("lora", "qlora")


class InferJob(_Job):
    """Serving or offline generation of ``batch`` sequences of ``input_len`` + ``output_len`` tokens."""

    quant: Quant = "bf16"
    kv_dtype: KvDtype = "fp16"
    batch: int = Field(default=1, ge=1)
    input_len: int = Field(default=1024, ge=1)
    output_len: int = Field(default=256, ge=0)
    engine: Engine = "vllm"
    flash_attn: bool = True

    @model_validator(mode="after")
    def _coherent(self) -> InferJob:
        if self.count % self.tp:
            raise ValueError(f"--count {self.count} is not a multiple of --tp {self.tp}")
        if self.count % self.nodes:
            raise ValueError(f"--count {self.count} GPUs do not split evenly over --nodes {self.nodes}")
        return self

    @property
    def context(self) -> int:
        return self.input_len + self.output_len


def make_job(kind: type[TrainJob] | type[InferJob], **values: object) -> TrainJob | InferJob:
    """Validate flag values into a job; one-line ConfigError naming the flag and what it accepts."""
    try:
        return kind(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else ""
        flag = "--" + field.replace("_", "-") if field else "options"
        if field in CHOICES:
            raise ConfigError(f"{flag} {err.get('input')!r} is not accepted; use one of: "
                              f"{', '.join(CHOICES[field])}") from None
        message = str(err["msg"]).removeprefix("Value error, ")
        raise ConfigError(f"{flag}: {message}" if field else message) from None
