"""Flag values into a typed job: the one door from a shell's options (the CLI, the web API, a scenario file) to a
TrainJob or InferJob, refusing a flag of the other task, or one the command does not take, in one line."""

from __future__ import annotations

from typing import Any

from gpuwise.errors import ConfigError
from gpuwise.flags import Flag, build, check_command, flag_fields, spelling
from gpuwise.workload.jobs.job import JOB_MODELS, InferJob, TrainJob


def make_job(task: str = "train", /, *, command: str | None = None, fixed: dict[str, object] | None = None,
             **values: object) -> TrainJob | InferJob:
    """Validate flag values into the job of ``task``; one-line ConfigError naming the flag and what it accepts.

    A value of the other task is refused with the flag that would make it count (``--quant ... add --task infer``);
    with ``command``, so is a flag that command does not take or decides itself. ``fixed`` values are the caller's
    own (a recommender's GPU count) and are not checked against ``command``."""
    kind = JOB_MODELS.get(task) if isinstance(task, str) else None
    if kind is None:
        raise ConfigError(f"--task {str(task)[:40]!r} is not accepted; use train or infer (hpc: estimate, recommend)")
    if values.pop("task", task) != task:
        raise ConfigError(f"the options say another task than {task!r}; give the task once")
    other = JOB_MODELS["infer" if task == "train" else "train"]
    for name in values:
        if name not in kind.model_fields and name not in kind.shorthands and name in other.model_fields:
            spelled = spelling(other, name)
            raise ConfigError(f"{spelled} applies to {'inference' if task == 'train' else 'training'}; "
                              f"{'add --task infer' if task == 'train' else 'this is an inference job'}")
    if command is not None:
        check_command(kind, values, command=command, task=task)
    return build(kind, {**values, **(fixed or {}), "task": task})


def job_flag_fields(command: str, tasks: tuple[str, ...] = ("train", "infer")) -> dict[str, tuple[Any, Flag]]:
    """Every job flag ``command`` takes for ``tasks``: name -> (field info, flag); a field both jobs share (count,
    batch ...) once."""
    found: dict[str, tuple[Any, Flag]] = {}
    for task in tasks:
        model = JOB_MODELS[task]
        for name, info, flag in flag_fields(model, command):
            found.setdefault(name, (info, flag))
        for name, (info, flag) in model.shorthands.items():
            if command in flag.commands:
                found.setdefault(name, (info, flag))
    return found
