"""--emit: what starts an estimated job or a ranked option -- a serving engine's command, a fine-tuning tool's config
or command, or a SkyPilot task that runs either on the rented machines -- with exactly the settings gpuwise assumed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuwise import api
from gpuwise.api import Estimate, TrainPlan
from gpuwise.api.launching import (
    EMIT_TOOLS,
    LAUNCHES,
    TRAINING_TOOLS,
    engine_name,
    fitting_flags,
    hub_id,
    tool_kind,
    training_launcher,
)
from gpuwise.api.shell import InferJob, Sharding, TrainJob
from gpuwise.errors import ConfigError, GpuwiseError
from gpuwise.report.finetune_launch import (
    AXOLOTL_FILE,
    axolotl_text,
    torchrun_flags,
    torchtune_command,
    torchtune_download,
    torchtune_text,
)
from gpuwise.report.launch import Slots, launch_command
from gpuwise.report.skypilot import MASTER_ADDR, Deployment, skypilot_task

TOOLS = tuple(EMIT_TOOLS)  # serving engines, then fine-tuning tools, then SkyPilot: what each is, its record says


def check_tool(tool: str) -> str:
    if tool not in TOOLS:
        raise ConfigError(f"--emit {tool[:40]!r} is not a tool gpuwise writes for; use one of {', '.join(TOOLS)}")
    return tool


def emit_estimate(result: Estimate, model: str, tool: str) -> str:
    """The estimate's job as ``tool`` starts it; a job the estimate says does not fit is refused (refuse_unfit)."""
    job = check_and_job(result, tool)
    kind = tool_kind(tool)
    if kind == "serving":
        text = launch_command(result, model, tool)
    elif isinstance(job, TrainJob):
        text = _training_text(result, model, tool) if kind == "training" else skypilot_task(
            _training_deployment(job, result, model, None))
    else:
        text = skypilot_task(_serving_deployment(result, model, None, job.count // job.nodes, job.nodes))
    refuse_unfit(result)
    return text


def check_and_job(result: Estimate, tool: str) -> InferJob | TrainJob:
    job = result.job
    check_tool(tool)
    if tool_kind(tool) == "training" and not isinstance(job, TrainJob):
        raise ConfigError(f"--emit {tool} writes a training config: use --task train")
    if not isinstance(job, InferJob | TrainJob):
        raise ConfigError(f"--emit {tool} covers language-model training and serving")
    return job


def refuse_unfit(result: Estimate) -> None:
    """A job the estimate says does not fit is not emitted: the error names the change `gpuwise fit` makes."""
    memory = result.memory
    if memory.fits:
        return
    need = (f"{result.model.name} needs {memory.per_gpu_bytes / 2**30:,.2f} of {memory.capacity_bytes / 2**30:,.2f} "
            f"GiB per GPU on {result.gpu.id}")
    try:
        changes = fitting_flags(result)
    except GpuwiseError:  # a card from the user's own catalog file: fit needs it too
        changes = None
    if changes:
        fix = f"`gpuwise fit` makes it fit with {' '.join(changes)}: add that and emit again"
    elif changes is None:
        fix = "run `gpuwise fit` with the same flags for the changes that make it fit"
    else:
        fix = "`gpuwise fit` finds no change that fits it on this card: choose a larger card or more GPUs"
    raise ConfigError(f"not emitted: {need} (it does not fit); {fix}")


def emit_options(result: Any, tool: str) -> dict[int, list[str]]:
    """Each shown option's workloads as ``tool`` starts them; an option it cannot start says why, in a comment."""
    check_tool(tool)
    request = result.request
    found: dict[int, list[str]] = {}
    for i, option in enumerate(result.options[: request.top]):
        for workload, fit in zip(request.workloads, option.fit.workloads or (option.fit,), strict=False):
            settings: Mapping[str, object] = fit.settings[0] if fit.settings else {}
            try:
                text = _option_text(option, workload, settings, tool)
            except ConfigError as exc:
                text = f"# {workload.model}: not emitted: {exc}"
            if text:
                found.setdefault(i, []).append(text)
    return found


def _option_text(option: Any, workload: Any, settings: Mapping[str, object], tool: str) -> str:
    job, kind = workload.job, tool_kind(tool)
    if kind == "cluster" and option.offer is None:
        raise ConfigError(f"{option.acquisition} is bought, not rented: SkyPilot launches rented machines")
    if isinstance(job, TrainJob):
        if kind == "serving":
            return ""
        place = option.placement
        fields = {k: v for k, v in settings.items() if k in TrainJob.model_fields}
        trained = job.updated(**fields, count=option.count, nodes=place.machines if place else 1,
                              network=place.network if place else None)
        estimate = api.estimate(workload.model, gpu=option.gpu, job=trained)
        if kind == "cluster":  # the job as the estimate's plan resolved it: the framework's recipe filled
            resolved = estimate.job
            assert isinstance(resolved, TrainJob)
            text = skypilot_task(_training_deployment(resolved, estimate, workload.model, option.offer))
        else:
            text = _training_text(estimate, workload.model, tool)
        refuse_unfit(estimate)
        return text
    if not isinstance(job, InferJob) or kind == "training" or (kind == "serving" and job.engine != tool):
        return ""
    replica, slots = _replica(option, workload, job, settings)
    if kind == "serving":
        text = launch_command(replica, workload.model, tool, slots=slots)
    else:
        per_node = option.placement.gpus_per_machine if option.placement else option.count
        text = skypilot_task(_serving_deployment(replica, workload.model, option.offer, per_node,
                                                 option.count // per_node, slots))
    refuse_unfit(replica)
    return text


def _replica(option: Any, workload: Any, job: InferJob, settings: Mapping[str, object]) -> tuple[Estimate, Slots]:
    """One replica of the option (its TP, format and KV cache on its card) at the batch it was planned at under
    load: the engine's sequence cap there, or the whole sequences its KV cache holds where fewer
    (estimate/serving/capacity.py Replica.batch_limit)."""
    update = {k: settings[k] for k in ("tp", "quant", "kv_dtype") if k in settings}
    tp = int(str(update.get("tp", job.tp)))
    replica = job.updated(**update, count=tp, nodes=1, batch=1)
    one = api.estimate(workload.model, gpu=option.gpu, job=replica)  # its plan and its KV room, at batch 1
    cap = int(getattr(one.plan, "max_num_seqs", 1))
    held = one.memory.max_concurrency or 1
    limit = max(1, min(cap, held))
    engine = engine_name(job.engine)
    why = (f"the batch this option was planned at under load, the fewer of {engine}'s cap on {option.gpu} ({cap:,}) "
           f"and the whole {job.context:,}-token sequences its KV cache holds ({held:,})")
    return api.estimate(workload.model, gpu=option.gpu, job=replica.updated(batch=limit)), Slots(limit, why)


def _training_text(estimate: Estimate, model: str, tool: str) -> str:
    """The estimate's training job as axolotl or torchtune runs it, sharded as its plan decided."""
    job, sharding = estimate.job, _sharding(estimate)
    assert isinstance(job, TrainJob)
    if TRAINING_TOOLS[tool].config == "file":
        return axolotl_text(job, hub_id(model), sharding)
    return torchtune_text(job, estimate.model.name, hub_id(model), sharding)


def _sharding(estimate: Estimate) -> Sharding:
    if not isinstance(estimate.plan, TrainPlan):
        raise ConfigError("no data-parallel plan for this job: it is not a training estimate")
    return estimate.plan.sharding


def _serving_deployment(replica: Estimate, model: str, offer: Any, per_node: int, nodes: int,
                        slots: Slots | None = None) -> Deployment:
    """Each machine runs one server: the replica's TP, and as many data-parallel copies as its GPUs hold."""
    job = replica.job
    assert isinstance(job, InferJob)
    spec = LAUNCHES.get(job.engine)
    if spec is None or not spec.install:
        raise ConfigError(f"gpuwise writes SkyPilot tasks for vllm and sglang serving, not {job.engine}")
    if replica.gpu.vendor != "nvidia":
        raise ConfigError(f"`{spec.install}` installs the CUDA build; {replica.gpu.id} needs its vendor's build "
                          "(no task written)")
    if job.tp > per_node or per_node % job.tp:
        raise ConfigError(f"a replica of TP {job.tp} does not sit in machines of {per_node} GPUs (a replica across "
                          "machines needs Ray: SkyPilot's llm/vllm/vllm-multinode.sky.yaml)")
    copies = per_node // job.tp
    served = {"host": "0.0.0.0", "port": spec.port, "dp": copies if copies > 1 else None}
    run = launch_command(replica, model, job.engine, served, slots=slots)
    return Deployment(f"gpuwise-{replica.model.name}", replica.gpu.id, per_node, 1, spec.install, run,
                      _checkpoint_gb(replica), offer, spec.port, nodes)


def _training_deployment(job: TrainJob, estimate: Estimate, model: str, offer: Any) -> Deployment:
    preset = estimate.model.name
    launcher = training_launcher(job.framework)
    if launcher is None:
        raise ConfigError(f"gpuwise writes no launch for --framework {job.framework}; use torchtune or axolotl")
    flags = " ".join(torchrun_flags(job, skypilot=True))
    master = MASTER_ADDR + "\n" if job.nodes > 1 else ""
    if launcher.config == "command":
        setup = f"{launcher.install}\n{torchtune_download(hub_id(model))}\n"
        run = master + torchtune_command(job, preset, _sharding(estimate), skypilot=True)
    else:
        config = axolotl_text(job, hub_id(model), _sharding(estimate))
        setup = f"{launcher.install}\ncat > {AXOLOTL_FILE} <<'EOF'\n{config}EOF\n"
        run = master + f"axolotl train {AXOLOTL_FILE}" + (f" --launcher torchrun -- {flags}" if job.count > 1 else "")
    return Deployment(f"gpuwise-{preset}", estimate.gpu.id, job.count // job.nodes, job.nodes, setup, run + "\n",
                      _checkpoint_gb(estimate), offer)


def _checkpoint_gb(estimate: Estimate) -> float:
    """The 16-bit checkpoint a task downloads, in GB."""
    return estimate.model.total_params * 2 / 1e9
