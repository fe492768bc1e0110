"""Which data-parallel runtime shards a training job, at which ZeRO stage, over how many ranks: decided once, here,
when the plan is resolved (``resolve_sharding``), and read by the memory and speed estimators and the launch files.

The stage is the user's ``--zero``, else the framework's (torchtune and torchtitan: 3 over several data-parallel
GPUs, Megatron-LM: 0), else 3 over several data-parallel GPUs and 0 on one. The runtime is ``--sharding``, else the
framework's (torchtune, torchtitan: FSDP2; DeepSpeed; Megatron-LM), else by what the stage asks of it: DeepSpeed for
ZeRO-1 and for an optimizer-only offload (FSDP has neither), FSDP2 for stages 2 and 3 (torchtune's and torchtitan's),
plain DDP under torch.amp for stage 0.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.errors import ConfigError
from gpuwise.runtimes.schema import FrameworkProfile, ShardingProfile
from gpuwise.runtimes.sharding import DEFAULT_BY_STAGE, OFFLOADS_OPTIMIZER, SHARDERS, UNSHARDED
from gpuwise.workload.jobs.job import TrainJob


@dataclass(frozen=True)
class Sharding:
    """The data-parallel runtime a training job runs, its ZeRO stage and the ranks its sharded states split over."""

    profile: ShardingProfile
    stage: int
    ranks: int  # the ranks each sharded state is split over: every data-parallel rank, or one machine's (hybrid)
    hybrid: bool = False
    origin: str = ""  # where the runtime came from when the user did not name it

    @property
    def name(self) -> str:
        """The runtime's own name for what runs: its name and the stage's ('DeepSpeed ZeRO-2', 'FSDP FULL_SHARD'), or
        what runs on a single rank."""
        own = self.profile.stages.value[self.stage]
        if self.profile.one_rank_name is not None and self.ranks <= 1:
            return self.profile.one_rank_name
        hybrid = " hybrid (sharded within each machine)" if self.hybrid else ""
        return f"{self.profile.name} {own}{hybrid}"

    @property
    def autocast_params(self) -> bool:
        """Whether the forward reads fp32 parameters through torch.autocast's casts (DDP), rather than 16-bit
        parameters the runtime holds or gathers."""
        return self.profile.compute_params.value == "fp32_autocast"

    def describe(self) -> str:
        over = f" over {self.ranks:,} data-parallel ranks" if self.stage else ""
        origin = f" ({self.origin})" if self.origin else ""
        return f"data parallel: {self.name}{over}{origin}"


def resolve_sharding(job: TrainJob, framework: FrameworkProfile) -> Sharding:
    """The runtime, stage and sharding ranks of ``job`` (ConfigError for a stage or layout the runtime does not run)."""
    stage = job.zero if job.zero is not None else (3 if job.data_parallel > 1 else 0)
    runtime_id, origin = _runtime(job, framework, stage)
    profile = SHARDERS[runtime_id]
    _require_stage(profile, stage, job)
    _require_offload(job, profile, stage)
    ranks = job.data_parallel
    if job.hybrid_shard:
        ranks = _hybrid_ranks(job, profile, stage)
    return Sharding(profile, stage, ranks, job.hybrid_shard, origin)


def _runtime(job: TrainJob, framework: FrameworkProfile, stage: int) -> tuple[str, str]:
    if job.sharding is not None:
        return job.sharding, ""
    if framework.sharding is not None:
        own = framework.sharding.value
        if stage not in SHARDERS[own].stages.value:  # FSDP has no stage 0: without sharding it is plain DDP
            return UNSHARDED.id, f"{framework.name} without sharding runs plain data parallel"
        return own, f"{framework.name}'s: {framework.sharding.source}"
    chosen, why = OFFLOADS_OPTIMIZER if job.offload == "optimizer" else DEFAULT_BY_STAGE[stage]
    return chosen.id, f"{why}; --sharding to change" if why else ""


def _require_stage(profile: ShardingProfile, stage: int, job: TrainJob) -> None:
    stages = profile.stages.value
    if stage not in stages:
        runs = ", ".join(f"--zero {k} ({v})" for k, v in stages.items())
        raise ConfigError(f"--sharding {profile.id} runs {runs}; not --zero {stage}")
    below = profile.pipeline_below_stage
    if below is not None and job.pp > 1 and stage >= below.value:
        raise ConfigError(f"--pp {job.pp} with {profile.name} needs --zero below {below.value} "
                          f"({below.source.split(': ', 1)[-1]}); use --sharding fsdp2, which keeps the weights "
                          "gathered across micro-batches")


def _require_offload(job: TrainJob, profile: ShardingProfile, stage: int) -> None:
    if job.offload == "none":
        return
    if stage == 0:
        raise ConfigError(f"--offload {job.offload} needs --zero 1, 2 or 3 (ZeRO-Offload / FSDP CPU offload)")
    if job.offload == "optimizer+params" and stage != 3:
        raise ConfigError("--offload optimizer+params needs --zero 3 (parameters are offloaded only when sharded)")
    offloads = profile.offloads.value
    if not offloads:
        raise ConfigError(f"--offload {job.offload}: {profile.name} does not offload; use --sharding deepspeed")
    if job.offload not in offloads:
        raise ConfigError(f"--offload {job.offload} is DeepSpeed's ZeRO-Offload; {profile.name} offloads parameters, "
                          "gradients and optimizer states together: use --offload optimizer+params --zero 3, or "
                          "--sharding deepspeed")


def _hybrid_ranks(job: TrainJob, profile: ShardingProfile, stage: int) -> int:
    """The data-parallel ranks inside one machine: the shard group of HYBRID_SHARD / HSDP."""
    if not profile.hybrid.value:
        raise ConfigError(f"--hybrid-shard is FSDP's HYBRID_SHARD and FSDP2's HSDP; {profile.name} shards over every "
                          "data-parallel rank (use --sharding fsdp or fsdp2)")
    if stage < 2 or job.nodes < 2:
        raise ConfigError("--hybrid-shard shards within each machine and replicates across machines: it needs "
                          "--zero 2 or 3 and --nodes 2 or more")
    per_node = job.count // job.nodes
    if per_node % job.tp:
        raise ConfigError(f"--hybrid-shard needs --tp {job.tp} to divide the {per_node} GPUs of a machine")
    # pipeline stages span machines (torchtitan's mesh puts pp outermost): a machine's GPUs are tp x its dp shard
    return max(1, min(job.data_parallel, per_node // job.tp))
