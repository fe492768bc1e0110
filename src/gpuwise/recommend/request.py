"""What the user asks the recommender: workloads with targets, money and time, options and system constraints.

A scenario file (``gpuwise recommend --scenario FILE``) is this model as YAML; CLI flags build the same model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from gpuwise.errors import ConfigError
from gpuwise.workload.job import InferJob, TrainJob, make_job

Objective = Literal["tco", "cost-per-job", "time", "perf-per-dollar", "perf-per-watt"]
Acquisition = Literal["buy-new", "buy-used", "rent"]
Chassis = Literal["desktop", "workstation", "server"]
Need = Literal["ecc", "mig", "nvlink", "fp8", "bf16", "bitsandbytes", "flash-attention-2", "vllm"]
OBJECTIVES: tuple[str, ...] = ("tco", "cost-per-job", "time", "perf-per-dollar", "perf-per-watt")
DEFAULT_TRAIN_TOKENS = 1e8


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class Workload(_Model):
    """One job and its target: a training deadline, or a serving rate with a P99 latency SLO."""

    model: str
    task: Literal["train", "infer"] = "train"
    options: dict[str, Any] = Field(default_factory=dict, description="the estimate flags, e.g. method: qlora")
    tokens: float = Field(default=DEFAULT_TRAIN_TOKENS, gt=0, description="[train] tokens in one job (epoch)")
    deadline_hours: float | None = Field(default=None, gt=0, description="[train] the job must finish within")
    qps: float | None = Field(default=None, gt=0, description="[infer] requests per second to sustain")
    p99_ms: float | None = Field(default=None, gt=0, description="[infer] P99 end-to-end latency SLO")

    @model_validator(mode="after")
    def _targets_fit_the_task(self) -> Workload:
        if self.task == "train" and (self.qps is not None or self.p99_ms is not None):
            raise ValueError("--qps/--p99-ms are serving targets; use --task infer")
        if self.task == "infer" and self.deadline_hours is not None:
            raise ValueError("--deadline-hours is a training target; use --task train")
        _check_options(self.task, self.options)
        return self


def _check_options(task: str, options: dict[str, Any]) -> None:
    """The options are job flags; validate them now, as a job of the smallest GPU count they allow, so a bad value
    is one line here rather than a rejection of every GPU (or a crash) later."""
    chosen = sorted({"count", "nodes"} & set(options))
    if chosen:
        raise ValueError(f"options: {', '.join(chosen)} is chosen by the recommender; leave it out "
                         "(limit it with --max-gpus / --max-nodes)")
    def whole(key: str) -> int:
        value = options.get(key, 1)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1

    group = whole("tp") * (whole("pp") if task == "train" else 1)
    try:
        make_job(TrainJob if task == "train" else InferJob, **{**options, "count": group})
    except ConfigError as exc:
        raise ValueError(f"options: {exc}") from None


class Constraints(_Model):
    psu_watts: float | None = Field(default=None, gt=0)
    chassis: Chassis | None = None
    max_gpus: int = Field(default=64, ge=1, le=4096)
    max_nodes: int | None = Field(default=None, ge=1)
    exclude_vendors: tuple[str, ...] = ()
    needs: tuple[Need, ...] = ()
    os: Literal["linux", "windows", "wsl2"] = "linux"


class Usage(_Model):
    hours_per_day: float = Field(default=8.0, gt=0, le=24)
    years: float = Field(default=3.0, gt=0, le=10)
    usd_per_kwh: float = Field(default=0.16, ge=0, description="EIA US residential average 15.45 c/kWh, Jan 2024")
    pue: float = Field(default=1.0, ge=1.0, le=3.0, description="1.0 at home; data centers 1.1-1.6 (Uptime)")


class Request(_Model):
    workloads: tuple[Workload, ...] = Field(min_length=1)
    objective: Objective = "tco"
    acquisitions: tuple[Acquisition, ...] = ("buy-new", "buy-used", "rent")
    providers: tuple[str, ...] | None = None
    budget_usd: float | None = Field(default=None, gt=0, description="purchase budget")
    monthly_budget_usd: float | None = Field(default=None, gt=0)
    usage: Usage = Usage()
    constraints: Constraints = Constraints()
    top: int = Field(default=10, ge=1, le=200)
    gpus: tuple[str, ...] | None = Field(default=None, description="restrict to these catalog ids")


def _one_line(exc: ValidationError, origin: str) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return f"{origin}: {where}: {str(err['msg']).removeprefix('Value error, ')}"


def parse_request(data: dict[str, Any], *, origin: str = "request") -> Request:
    try:
        return Request.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_one_line(exc, origin)) from None


def load_scenario(path: Path) -> Request:
    """A scenario YAML file -> Request; one-line ConfigError naming the file and the field."""
    try:
        data = yaml.safe_load(path.read_text("utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read scenario {str(path)!r}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a scenario is a mapping with 'workloads' and options")
    data = {k: v for k, v in data.items() if k not in ("name", "description", "source")}
    return parse_request(data, origin=str(path))
