"""What the user asks the recommender: workloads with targets, money and time, usage and system constraints.

A scenario file (``gpuwise recommend --scenario FILE``) is this model as YAML; the CLI flags, the web app and
Python callers build the same model. Each workload's ``options`` (the job flags, e.g. ``method: qlora``) are
validated into a typed job when the request is; ``tokens`` (the size of one training job) may be given at the
workload level, as the examples do, or among the options.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from gpuwise.catalog import FEATURES
from gpuwise.catalog.schema import Vendor
from gpuwise.errors import ConfigError, GpuwiseError
from gpuwise.estimate import constants as C
from gpuwise.estimate.cost.tco import Usage
from gpuwise.flags import Flag
from gpuwise.safe_io import excerpt, parse_yaml, read_text
from gpuwise.workload.jobs.hpc import HpcJob, make_hpc_job
from gpuwise.workload.jobs.image import ImageJob, make_image_job
from gpuwise.workload.jobs.job import JOB_MODELS, InferJob, Task, TrainJob
from gpuwise.workload.jobs.parse import make_job
from gpuwise.workload.jobs.slos import DESCRIPTIONS, Slos, normalise_slos
from gpuwise.workload.kind import workload_kind

Objective = Literal["tco", "cost-per-job", "time", "perf-per-dollar", "perf-per-watt", "usd-per-mtok",
                    "energy"]
Acquisition = Literal["buy-new", "buy-used", "rent"]
Chassis = Literal["desktop", "workstation", "server"]
OBJECTIVES: tuple[str, ...] = ("tco", "cost-per-job", "time", "perf-per-dollar", "perf-per-watt")
DEFAULT_TRAIN_TOKENS = 1e8  # the job behind "h/job" when the user names none: 100M tokens
MAX_WORKLOADS = 16  # each costs a whole-catalog enumeration
MAX_SCENARIO_BYTES = 1_000_000
_REC = frozenset({"recommend"})
TARGETS, MONEY, SYSTEM, RANKING = "Targets", "Money", "System", "Ranking and output"
SESSIONS = "Sessions"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _whole(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 1024 else 1


def template_count(task: str, options: dict[str, Any]) -> int:
    """The GPU count a workload's job is validated at: its smallest model-parallel group (TP x PP for training, TP
    for serving); the recommender then tries every count that is a multiple of it."""
    return _whole(options.get("tp", 1)) * (_whole(options.get("pp", 1)) if task == "train" else 1)


class Workload(_Model):
    """One job and its target: a training or HPC deadline, or a serving rate with a P99 latency SLO."""

    model: str = Field(min_length=1, max_length=1000, description="preset id, hub id or config.json path (with task "
                                                                  "hpc: the application, as options.app)")
    task: Task | Literal["hpc"] = "train"
    options: TrainJob | InferJob | ImageJob | HpcJob = Field(description="the job flags, e.g. {method: qlora, seq: "
                                                                         "4096} or {app: gromacs, atoms: 250000}")
    deadline_hours: Annotated[float | None, Field(gt=0, le=1e6), Flag(_REC, TARGETS)] = Field(
        default=None, description="a training job must finish within this many hours")
    qps: Annotated[float | None, Field(gt=0, le=1e6), Flag(_REC, TARGETS)] = Field(
        default=None, description="serving: requests per second to sustain")
    p99_ms: Annotated[float | None, Field(gt=0, le=1e9), Flag(_REC, TARGETS, name="--p99-ms")] = Field(
        default=None, description="serving: P99 end-to-end latency SLO in ms (with --slo ttft: time to first "
                                  "token); the same as --e2e-p99-ms")
    slo: Annotated[Literal["e2e", "ttft"], Flag(_REC, TARGETS)] = Field(
        default="e2e", description="serving: what the SLO bounds, end-to-end latency or time to first token")
    # -- SLOs (workload/jobs/slos.py): --p99-ms [--slo] is read into these three; any of them at once --
    ttft_p99_ms: Annotated[float | None, Field(gt=0, le=1e9), Flag(_REC, TARGETS)] = Field(
        default=None, description="serving: " + DESCRIPTIONS["ttft"])
    tpot_p99_ms: Annotated[float | None, Field(gt=0, le=1e9), Flag(_REC, TARGETS)] = Field(
        default=None, description="serving: " + DESCRIPTIONS["tpot"])
    e2e_p99_ms: Annotated[float | None, Field(gt=0, le=1e9), Flag(_REC, TARGETS)] = Field(
        default=None, description="serving: " + DESCRIPTIONS["e2e"])

    @model_validator(mode="before")
    @classmethod
    def _one_spelling_of_slos(cls, data: Any) -> Any:
        return normalise_slos(data)

    @property
    def slos(self) -> Slos:
        """The P99 SLOs the service must meet at once (none given: an empty Slos)."""
        return Slos(self.ttft_p99_ms, self.tpot_p99_ms, self.e2e_p99_ms)
    # -- end of the SLOs --
    users: Annotated[int | None, Field(ge=1, le=10_000_000), Flag(_REC, TARGETS)] = Field(
        default=None, description="serving: people using it at once; with --user-qps (each one's requests/s) or "
                                  "--think-s (the pause between one answer and their next request) it sets --qps")
    user_qps: Annotated[float | None, Field(gt=0, le=1000), Flag(_REC, TARGETS)] = Field(
        default=None, description="serving, with --users: requests per second each user sends")
    think_s: Annotated[float | None, Field(gt=0, le=86_400), Flag(_REC, TARGETS)] = Field(
        default=None, description="serving, with --users: seconds each user reads and thinks before the next request")
    same_quant: Annotated[bool, Flag(_REC, TARGETS)] = Field(
        default=False, description="serving: every option at the checkpoint's own weight format (with --quant "
                                   "free, each card is otherwise offered at FP8 where it has FP8 tensor cores)")
    disagg: Annotated[Literal["off", "auto"], Flag(_REC, TARGETS)] = Field(
        default="off", description="serving: auto also plans each option's replicas as separate prefill and decode "
                                   "pools (XPYD, where the engine runs them: vLLM, SGLang, TensorRT-LLM) and keeps the "
                                   "layout that sustains more requests/s")
    min_tokens_per_s: Annotated[float | None, Field(gt=0, le=100_000), Flag(_REC, TARGETS)] = Field(
        default=None, description="one user: the decode speed (tokens/s) a single stream must reach on one copy of "
                                  "the model split over the cards (local use; no request rate)")
    # sessions (issue 40): as serve-sim's flags of the same names (workload/jobs/load_test.py); --qps then counts
    # sessions per second and --input-len/--output-len are each turn's new input and answer
    turns: Annotated[int | None, Field(ge=1, le=1000), Flag(_REC, SESSIONS)] = Field(
        default=None, description="serving: turns per session, each prompt carrying the system prompt and every "
                                  "earlier turn (--qps is then sessions per second)")
    think_time_s: Annotated[float | None, Field(ge=0, le=86_400), Flag(_REC, SESSIONS)] = Field(
        default=None, description="serving, with --turns: seconds between a turn's answer and the next turn")
    system_prompt_len: Annotated[int, Field(ge=0, le=10_000_000), Flag(_REC, SESSIONS)] = Field(
        default=0, description="serving, with --turns: tokens of a system prompt every session shares")
    kv_offload_gib: Annotated[float, Field(ge=0, le=1_000_000), Flag(_REC, SESSIONS)] = Field(
        default=0.0, description="serving, with --turns: host memory per replica (GiB) keeping evicted prefixes")

    _tokens_given: bool = PrivateAttr(default=True)

    @model_validator(mode="wrap")
    @classmethod
    def _note_free_tokens(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """Remember whether a training workload's --tokens was left free (it is then DEFAULT_TRAIN_TOKENS, printed
        above the answer as a default behind its cost)."""
        if not isinstance(data, dict):
            return handler(data)  # a Workload already made keeps its own record
        options = data.get("options")
        given = "tokens" in data or (isinstance(options, dict) and options.get("tokens") is not None) or (
            isinstance(options, TrainJob) and options.tokens is not None)
        workload = handler(data)
        workload._tokens_given = given
        return workload

    @model_validator(mode="before")
    @classmethod
    def _typed_job(cls, data: Any) -> Any:
        if not isinstance(data, dict) or isinstance(data.get("options"), (TrainJob, InferJob, ImageJob, HpcJob)):
            return data
        data = dict(data)
        kind = workload_kind(data.get("task"), data.get("model"))
        if kind == "hpc":
            return _hpc_workload(data)
        pipeline = kind == "image"
        if pipeline:
            data.setdefault("task", "infer")  # an image pipeline generates; no other task is modelled
        task = data.get("task", "train")
        options = data.get("options", {})
        if pipeline and isinstance(options, dict):
            if task != "infer":
                raise ValueError("an image pipeline is modelled for generation: task infer (or leave task out)")
            try:
                data["options"] = make_image_job(**options)
            except GpuwiseError as exc:
                raise ValueError(f"options: {exc}") from None
            return data
        if not isinstance(options, dict) or not isinstance(task, str) or task not in JOB_MODELS:
            return data  # the field validators say what is wrong
        options = dict(options)
        if "tokens" in data:
            tokens = data.pop("tokens")
            if "tokens" in options and options["tokens"] != tokens:
                raise ValueError("tokens is given twice (workload and options) with different values")
            options["tokens"] = tokens
        if task == "train" and options.get("tokens") is None:
            options["tokens"] = DEFAULT_TRAIN_TOKENS
        try:
            data["options"] = make_job(task, command="recommend", fixed={"count": template_count(task, options)},
                                       **options)
        except GpuwiseError as exc:
            raise ValueError(f"options: {exc}") from None
        return data

    @model_validator(mode="before")
    @classmethod
    def _users_make_a_rate(cls, data: Any) -> Any:
        """--users N with --user-qps R is N x R requests/s; with --think-s T a closed loop of N users, each waiting
        for its answer and then T seconds, sends at most N / T (the answer's own time, short against the pause, is
        left out, which plans a little high: the safe side)."""
        if not isinstance(data, dict):
            return data
        given = [f for f in ("user_qps", "think_s") if data.get(f) is not None]
        if data.get("users") is None:
            if given:
                raise ValueError(f"--{given[0].replace('_', '-')} describes each of --users N: give --users")
            return data
        if data.get("qps") is not None or len(given) != 1:
            raise ValueError("--users N needs one of --user-qps R (N x R requests/s) or --think-s T (N / T), and no "
                             "--qps")
        users, per_user = data["users"], data.get("user_qps")
        if not all(isinstance(v, (int, float)) and v > 0 for v in (users, per_user or data.get("think_s"))):
            return data  # the field validators say what is wrong
        return {**data, "qps": users * per_user if per_user is not None else users / data["think_s"]}

    @model_validator(mode="after")
    def _targets_fit_the_task(self) -> Workload:
        if self.task in ("train", "hpc") and (self.qps is not None or self.slos):
            raise ValueError("--qps and the P99 SLOs are serving targets; use --task infer")
        if self.task == "hpc" and self.min_tokens_per_s is not None:
            raise ValueError("--min-tokens-per-s is one user's decode speed; a scientific job has --deadline-hours")
        if self.task == "infer" and self.deadline_hours is not None:
            raise ValueError("--deadline-hours is a training or HPC target; use --task train or --task hpc")
        if self.min_tokens_per_s is not None and (self.task != "infer" or self.qps is not None):
            raise ValueError("--min-tokens-per-s is one user's decode speed: use --task infer without --qps")
        if self.qps is not None and not isinstance(self.options, HpcJob) and self.options.batch != 1:
            raise ValueError("--batch with --qps: under load the batch is what the arrivals make it; cap it with "
                             "--max-num-seqs")
        return self

    @model_validator(mode="after")
    def _sessions_are_served(self) -> Workload:
        given = [f for f in ("think_time_s", "system_prompt_len", "kv_offload_gib") if getattr(self, f)]
        if self.turns is None and given:
            raise ValueError(f"--{given[0].replace('_', '-')} describes sessions: give --turns N too")
        if self.turns is not None and not self.is_service:
            raise ValueError("--turns describes a served session workload: use --task infer with --qps or --p99-ms")
        return self

    @property
    def job(self) -> TrainJob | InferJob | ImageJob | HpcJob:
        return self.options

    @property
    def tokens(self) -> float:
        """Tokens in one training job (the size behind time and cost per job)."""
        job = self.options
        return float(job.tokens or DEFAULT_TRAIN_TOKENS) if isinstance(job, TrainJob) else 0.0

    @property
    def tokens_left_free(self) -> bool:
        """A training job whose size the user did not give: DEFAULT_TRAIN_TOKENS."""
        return self.task == "train" and not self._tokens_given

    @property
    def is_service(self) -> bool:
        """A server's workload: inference at a request rate or within a latency SLO (not one user's stream)."""
        return self.task == "infer" and (self.qps is not None or bool(self.slos))


def _hpc_workload(data: dict[str, Any]) -> dict[str, Any]:
    """A scientific-computing workload: its options validated into an HpcJob; its model is the application."""
    options = data.get("options", {})
    if not isinstance(options, dict):
        return data  # the field validator says what is wrong
    if "count" in options:
        raise ValueError("options: count is the recommender's to choose; give --max-gpus or --runs instead")
    try:
        job = make_hpc_job(**options)
    except GpuwiseError as exc:
        raise ValueError(f"options: {exc}") from None
    model = data.get("model")
    if model is not None and model != job.app:
        raise ValueError(f"model {excerpt(model, 40)} and options.app {job.app} differ: a task hpc workload is its "
                         "application (leave model out)")
    return {**data, "model": job.app, "options": job}


class Constraints(_Model):
    psu_watts: Annotated[float | None, Field(gt=0, le=100_000), Flag(_REC, SYSTEM)] = Field(
        default=None, description="power supply the cards must fit in (W)")
    chassis: Annotated[Chassis | None, Flag(_REC, SYSTEM)] = Field(
        default=None, description="the system they go in when bought")
    circuit_watts: Annotated[float, Field(gt=0, le=100_000), Flag(_REC, SYSTEM)] = Field(
        default=C.WALL_CIRCUIT_CONTINUOUS_W.value,
        description="what the wall circuit of a desktop or workstation carries continuously (W): 1,440 on a US "
                    "15 A, 120 V circuit (80 % rule); 3680 for a 230 V, 16 A one")
    min_headroom: Annotated[float, Field(ge=0, le=0.5), Flag(_REC, SYSTEM)] = Field(
        default=0.10, description="share of each card's memory an option leaves free to rank first (the allocator's "
                                  "fragmentation, a longer batch); options beyond it rank after those within it")
    max_gpus: Annotated[int, Field(ge=1, le=4096), Flag(_REC, SYSTEM)] = Field(
        default=64, description="most GPUs to consider")
    max_nodes: Annotated[int | None, Field(ge=1, le=512), Flag(_REC, SYSTEM)] = Field(
        default=None, description="most machines to consider")
    own_host: Annotated[bool, Flag(_REC, SYSTEM)] = Field(
        default=False, description="the cards go into a computer you already own, a desktop unless --chassis says: "
                                   "no host cost; its slots and --psu-watts still constrain")
    exclude_vendors: Annotated[tuple[Vendor, ...], Field(max_length=8), Flag(_REC, SYSTEM, name="--exclude-vendor")] = (
        Field(default=(), description="vendors to leave out (repeatable)"))
    needs: Annotated[tuple[str, ...], Field(max_length=len(FEATURES)), Flag(_REC, SYSTEM, name="--need",
                                                                            accepted=tuple(FEATURES))] = Field(
        default=(), description="features the card must have (repeatable); the names of `catalog list --feature`")
    os: Annotated[Literal["linux", "windows", "wsl2", "macos"] | None, Flag(_REC, SYSTEM, name="--os")] = Field(
        default=None, description="operating system the machine must run (default: any; a Mac runs macOS, the "
                                  "other GPUs Linux)")

    @field_validator("needs")
    @classmethod
    def _known_features(cls, needs: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [n for n in needs if n not in FEATURES]
        if unknown:
            raise ValueError(f"unknown feature {excerpt(unknown[0], 40)}; use one of: {', '.join(FEATURES)}")
        return needs


_WAYS = {"buy-new": "--buy", "buy-used": "--buy-used", "rent": "--rent"}


class Request(_Model):
    workloads: tuple[Workload, ...] = Field(min_length=1, max_length=MAX_WORKLOADS)
    objective: Annotated[Objective, Flag(_REC, RANKING)] = Field(default="tco", description="what to rank by")
    acquisitions: Annotated[tuple[Acquisition, ...], Field(min_length=1, max_length=3),
                            Flag(_REC, MONEY, choice_flags=_WAYS)] = Field(
        default=("buy-new", "buy-used", "rent"), description="ways to get the cards (default: all three)")
    providers: Annotated[tuple[Annotated[str, Field(max_length=64)], ...] | None, Field(max_length=64),
                         Flag(_REC, MONEY, name="--provider")] = Field(
        default=None, description="only these cloud providers (repeatable)")
    spot: Annotated[bool, Flag(_REC, MONEY)] = Field(
        default=False, description="also rank spot (preemptible) offers, charged --spot-overhead for restarts")
    spot_overhead: Annotated[float, Field(ge=0, le=2), Flag(_REC, MONEY)] = Field(
        default=0.15, description="share of a spot job's hours redone after preemptions (gpuwise policy 0.15: a "
                                  "restart from the last checkpoint; set your own from your preemption history)")
    budget_usd: Annotated[float | None, Field(gt=0, le=1e10), Flag(_REC, MONEY)] = Field(
        default=None, description="purchase budget (USD)")
    monthly_budget_usd: Annotated[float | None, Field(gt=0, le=1e9), Flag(_REC, MONEY)] = Field(
        default=None, description="monthly rental budget (USD)")
    usage: Usage = Usage()
    constraints: Constraints = Constraints()
    top: Annotated[int, Field(ge=1, le=200), Flag(_REC, RANKING)] = Field(default=10, description="options to show")
    gpus: tuple[Annotated[str, Field(max_length=100)], ...] | None = Field(
        default=None, max_length=200, description="restrict to these catalog ids")
    prices_on: dt.date = Field(default_factory=dt.date.today, description="the day prices are judged on: a street "
                                                                          "price older than a year is not a new price")
    _usage_given: frozenset[str] = PrivateAttr(default=frozenset())

    @model_validator(mode="after")
    def _one_off_is_a_job(self) -> Request:
        if self.usage.pattern == "one-off" and not any(w.task in ("train", "hpc") for w in self.workloads):
            raise ValueError("--usage one-off costs one training or HPC job over its hours; serving and inference "
                             "run ongoing: leave --usage out")
        if self.objective == "energy" and not any(w.task == "infer" for w in self.workloads):
            raise ValueError("--objective energy ranks by joules per output token: it needs --task infer")
        return self

    @model_validator(mode="after")
    def _science_is_priced_per_job(self) -> Request:
        """Scientific jobs are bought to finish work: with only HPC workloads and no objective given, options are
        ranked by what one job costs (hours x hourly cost) -- a total cost of ownership would rank the cheapest card
        first however slowly it computes. The one place this default is decided."""
        if all(w.task == "hpc" for w in self.workloads) and "objective" not in self.model_fields_set:
            object.__setattr__(self, "objective", "cost-per-job")
        return self

    @model_validator(mode="after")
    def _note_usage_given(self) -> Request:
        """The usage fields the user gave, before a default is settled below (those left free are printed)."""
        self._usage_given = frozenset(self.usage.model_fields_set)
        return self

    @model_validator(mode="after")
    def _serving_runs_all_day(self) -> Request:
        """A service runs around the clock: when any workload serves at a request rate or within a latency SLO and
        the hours per day were not given, the hardware is costed at 24 h/day (issues 14 and 36), not the 8 h/day of
        a workstation -- a team's training beside its service included; other usage fields keep theirs."""
        if any(w.is_service for w in self.workloads) and "hours_per_day" not in self._usage_given:
            object.__setattr__(self, "usage", self.usage.model_copy(update={"hours_per_day": 24.0}))
        return self

    @property
    def usage_given(self) -> frozenset[str]:
        """The usage fields the user set (the others are defaults)."""
        return self._usage_given


def _one_line(exc: ValidationError, origin: str) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    message = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        message = "unknown key; see the examples/ scenarios for the accepted ones"
    return f"{origin}: {where}: {message}" if where else f"{origin}: {message}"


def parse_request(data: object, *, origin: str = "request") -> Request:
    if isinstance(data, Request):
        return data
    try:
        return Request.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_one_line(exc, origin)) from None


def load_scenario(path: Path) -> Request:
    """A scenario YAML file -> Request; one-line ConfigError naming the file and the field."""
    data = parse_yaml(read_text(path, what="scenario", max_bytes=MAX_SCENARIO_BYTES), origin=str(path))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a scenario is a mapping with 'workloads' and options")
    data = {k: v for k, v in data.items() if k not in ("name", "description", "source")}
    return parse_request(data, origin=str(path))
