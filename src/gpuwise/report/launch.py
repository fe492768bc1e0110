"""The launch command of an inference estimate's engine, with exactly the settings the estimate assumed."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path

from gpuwise.errors import ConfigError
from gpuwise.estimate.estimate import Estimate
from gpuwise.runtimes.launch import LAUNCHES
from gpuwise.workload.jobs.job import InferJob


def launch_command(result: Estimate, model: str, engine: str, served: Mapping[str, object] | None = None) -> str:
    """``vllm serve MODEL --tensor-parallel-size 2 ...``: the estimate's replica as that engine starts it;
    ``served`` adds where it listens and its data-parallel copies ({"host": ..., "port": ..., "dp": ...})."""
    job = result.job
    if not isinstance(job, InferJob):
        raise ConfigError("--emit vllm|sglang|llamacpp prints a serving command: use --task infer")
    if engine != job.engine:
        raise ConfigError(f"--emit {engine} launches {engine}: estimate it with --engine {engine}")
    spec = LAUNCHES.get(engine)
    if spec is None:
        raise ConfigError(f"--emit {engine[:40]} launches a serving engine: use vllm, sglang or llamacpp")
    values = {**_values(result, job), **(served or {})}
    model = hub_id(model)
    from_hub = "/" in model and not model.endswith((".gguf", ".json")) and not Path(model).exists()
    program = spec.hub_program if from_hub and spec.hub_program else spec.program
    parts = [program.format(model=shlex.quote(model))]
    for setting, value in values.items():
        flag = spec.flags.get(setting)
        if flag is not None and value not in (None, ""):
            parts.append(f"{flag} {value}")
    return " ".join(parts)


def hub_id(model: str) -> str:
    """A preset id as the hub id its engine downloads (llama-3.1-8b -> meta-llama/Llama-3.1-8B)."""
    from gpuwise.workload.model.presets import presets

    preset = presets().get(model)
    return preset.hub_ids[0] if preset is not None and preset.hub_ids else model


def _values(result: Estimate, job: InferJob) -> dict[str, object]:
    from gpuwise.estimate.plan import InferPlan, resolve

    plan = resolve(result.model, job, result.gpu)
    assert isinstance(plan, InferPlan)
    spec = LAUNCHES[job.engine]
    kv = spec.kv.get(job.kv_dtype, "")
    slots = min(job.batch, plan.max_num_seqs)
    return {"tp": job.tp if job.tp > 1 else None, "max_num_seqs": slots,
            "memory_fraction": plan.memory_fraction, "kv": kv, "kv_k": kv, "kv_v": kv,
            "context": job.context * (slots if spec.context_is_total else 1),
            "max_batched_tokens": plan.max_batched_tokens, "quant": spec.quant.get(job.weights, ""),
            "gpu_layers": spec.gpu_layers, "cpu_moe": job.cpu_moe or None}
