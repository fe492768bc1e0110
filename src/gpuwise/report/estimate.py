"""Estimates as the JSON contract of ARCHITECTURE.md and as rich tables."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table

from gpuwise.api import Architecture, Estimate, FitReport, InferPerf, TrainJob, TrainPerf, TrainPlan
from gpuwise.api.reporting import DERIVED, CostFigures, band

GB = 1e9
GIB = 2**30
_LABELS = {
    "weights": "weights", "master_weights": "fp32 master weights", "gradients": "gradients",
    "optimizer": "optimizer states", "communication_buffers": "communication buffers", "activations": "activations",
    "kv_cache": "KV cache", "logits": "logits + loss",
    "framework_overhead": "CUDA context, workspaces", "allocator_reserve": "allocator reserve",
}
_RUNTIME = {"cuda": "CUDA context, workspaces", "rocm": "HIP context, workspaces"}  # the stack's own words
# what a job's figures rest on when the user leaves them out: (field, how the flag reads)
_FREE = {"train": (("batch", "--batch {} (micro-batch per GPU)"), ("seq", "--seq {}")),
         "infer": (("batch", "--batch {} (concurrent sequences)"), ("input_len", "--input-len {}"),
                   ("output_len", "--output-len {}"))}


def _gb(value: float) -> float:
    return round(value / GB, 4)


def _gib(value: float) -> float:
    return round(value / GIB, 4)


def params_breakdown(arch: Architecture) -> dict[str, Any]:
    """The parts of the total a vendor may count differently: the embedding table, an untied head, a vision tower,
    multi-token-prediction layers the checkpoint holds beside the model (not in the total), and how the count was
    made."""
    p = arch.params
    return {"embedding": p.embedding, "untied_head": p.head, "vision_tower": p.tower, "mtp_not_in_total": p.mtp,
            "active_excluding_embedding": arch.active_params - p.embedding if arch.active_params else 0,
            "counted_by": "module tree" if arch.resolved_as == DERIVED else "closed form"}


def estimate_json(est: Estimate) -> dict[str, Any]:
    """The estimate contract: workload, hardware, memory (perf and cost keys arrive with their issues)."""
    job, mem, arch = est.job, est.memory, est.model
    workload: dict[str, Any] = {
        "model": arch.name, "family": arch.family, "params": arch.total_params,
        "active_params": arch.active_params, "task": est.task,
        **job.model_dump(exclude={"count", "nodes", "network", "task"}),
        "params_breakdown": params_breakdown(arch),
    }
    if arch.resolved_as:
        workload["resolved_as"] = arch.resolved_as
    if arch.checkpoint is not None:
        workload["checkpoint_format"] = {"quant": arch.checkpoint.quant, "covers": arch.checkpoint.scope,
                                         "source": arch.checkpoint.source}
    if isinstance(job, TrainJob):
        sharding = est.plan.sharding if isinstance(est.plan, TrainPlan) else None
        if sharding is not None:  # the stage and runtime the plan decided
            workload.update(zero=sharding.stage, sharding=sharding.profile.id, sharding_ranks=sharding.ranks,
                            data_parallel=sharding.name)
        if job.framework_filled:
            workload["framework_filled"] = list(job.framework_filled)
    if isinstance(job, TrainJob):
        workload["trainable_params"] = int(mem.details.get("trainable_params", 0))
    memory: dict[str, Any] = {
        "per_gpu_gb": _gb(mem.per_gpu_bytes), "capacity_gb": _gb(mem.capacity_bytes), "fits": mem.fits,
        "headroom_gb": _gb(mem.headroom_bytes),
        "breakdown_gb": {k: _gb(v) for k, v in mem.breakdown_bytes.items()},
        **({"cuda_context_gb": _gb(mem.cuda_context_bytes)} if mem.cuda_context_bytes else {}),
        "per_gpu_gib": _gib(mem.per_gpu_bytes), "capacity_gib": _gib(mem.capacity_bytes),
        "headroom_gib": _gib(mem.headroom_bytes),
        "breakdown_gib": {k: _gib(v) for k, v in mem.breakdown_bytes.items()},
    }
    if mem.engine_reserved_bytes is not None:
        memory["engine_reserved_gb"] = _gb(mem.engine_reserved_bytes)
    if mem.max_concurrency is not None:
        memory["max_concurrency"] = mem.max_concurrency
        memory["max_context"] = mem.max_context
    if "kv_bytes_per_token" in mem.details:
        memory["kv_cache_mb_per_token"] = round(mem.details["kv_bytes_per_token"] / 1e6, 6)
    if mem.kv_budget_bytes is not None:
        memory["kv_budget_gb"] = _gb(max(mem.kv_budget_bytes, 0.0))
    if "kv_tokens_per_gpu" in mem.details:  # the engine's count where it sizes a pool of blocks
        memory["kv_tokens_per_gpu"] = memory["kv_cache_tokens"] = int(mem.details["kv_tokens_per_gpu"])
    if "kv_pool_bytes" in mem.details:  # the pool as the engine prints it at start-up
        memory.update(kv_pool_gib=_gib(mem.details["kv_pool_bytes"]), kv_blocks=int(mem.details["kv_blocks"]),
                      kv_block_tokens=int(mem.details["kv_block_tokens"]),
                      cuda_graph_gib=_gib(mem.details["cuda_graph_bytes"]),
                      max_concurrency_at_len=round(mem.details["max_concurrency_at_len"], 2))
    if "gradients_bytes" in mem.details:
        memory["gradients_total_gb"] = _gb(mem.details["gradients_bytes"])
    if mem.details.get("managed_bytes"):
        memory["managed_gb"] = _gb(mem.details["managed_bytes"])  # paged optimizer states: not in torch's stats
    if "weights_bytes" in mem.details:  # --weights: the exact sum of the header's tensors
        memory["weights_bytes"] = int(mem.details["weights_bytes"])
    if "host_ram_bytes" in mem.details:  # --n-cpu-moe: experts the host keeps
        memory["host_ram_gb"] = _gb(mem.details["host_ram_bytes"])
    hardware = {
        "gpu": est.gpu.id, "count": job.count, "nodes": job.nodes,
        "interconnect": est.gpu.scale_up_link or est.gpu.native_link, "network": job.network,
    }
    document: dict[str, Any] = {"workload": workload, "hardware": hardware, "memory": memory,
                                "defaults": left_free(est)}
    assumptions = list(mem.assumptions)
    if est.perf is not None:
        document["perf"] = {**perf_json(est), **({} if mem.fits else {"if_it_fit": True})}
        assumptions += list(est.perf.assumptions)
    if est.cost is not None:
        document["cost"] = _cost_json(est)
    if est.energy is not None:
        from gpuwise.report.perf import energy_json

        document["energy"] = energy_json(est.energy)
        document.setdefault("perf", {}).setdefault("infer", {})["joules_per_token"] = round(
            est.energy.joules_per_output_token, 6)
    document["assumptions"] = assumptions
    document["warnings"] = list(est.warnings)
    return document


def _cost_json(est: Estimate) -> dict[str, Any]:
    """The price by the hour, and what the speed makes of it per job or per million tokens (marked ``if_it_fit``
    when the job does not fit: those figures are the speed's)."""
    assert est.cost is not None
    cost: dict[str, Any] = {"usd_per_hour": round(est.cost.usd_per_hour, 4), "basis": est.cost.basis}
    if est.cost.usd_per_job is not None:
        cost["usd_per_job"] = round(est.cost.usd_per_job, 2)
    if est.cost.usd_per_million_tokens is not None:
        cost["usd_per_million_tokens"] = round(est.cost.usd_per_million_tokens, 4)
    if est.energy is not None:
        cost["usd_per_mtok_energy"] = round(est.energy.electricity_usd_per_mtok, 6)
    if not est.memory.fits and len(cost) > 2:
        cost["if_it_fit"] = True
    return cost


def left_free(est: Estimate) -> dict[str, Any]:
    """The job fields that drive its speed and cost which the user left at their defaults (a framework's filling
    counts as left), with the values used; ``tokens`` for training, None when no job length was given."""
    job = est.job
    typed = job.model_fields_set - set(getattr(job, "framework_filled", ()))
    free = {name: getattr(job, name) for name, _ in _FREE[est.task] if name not in typed}
    if isinstance(job, TrainJob) and "tokens" not in typed:
        free["tokens"] = job.tokens
    return free


def defaults_line(est: Estimate) -> str | None:
    """The defaults a figure below rests on, said first: the lengths and batch left out, the missing --tokens,
    and the price's basis (an owned card is priced over the TCO's default hours a day and years)."""
    free = left_free(est)
    said = [spelled.format(free[name]) for name, spelled in _FREE[est.task] if name in free]
    if "tokens" in free and free["tokens"] is None:
        said.append("no --tokens (so no time or cost per job)")
    if est.cost is not None:
        said.append(_price_words(est.cost))
    return "[bold]defaults you left:[/bold] " + "; ".join(said) if said else None


def _price_words(cost: CostFigures) -> str:
    if cost.basis.startswith("owned"):  # estimate/cost/price.py: no offer rents this many of the card
        return f"priced as {cost.basis}, the TCO's defaults (`gpuwise tco` takes --hours-per-day and --years)"
    return f"priced at the cheapest rented offer, not spot ({cost.usd_per_hour:,.2f} USD/h)"


def cost_line(est: Estimate) -> str | None:
    cost = est.cost
    if cost is None:
        return None
    per = [f"{cost.usd_per_hour:,.2f} USD/h ({cost.basis})"]
    if cost.usd_per_job is not None:
        per.append(f"{cost.usd_per_job:,.2f} USD for the --tokens of one job")
    if cost.usd_per_million_tokens is not None:
        per.append(f"{cost.usd_per_million_tokens:,.2f} USD per million output tokens at this batch")
    head = "cost if it fit" if not est.memory.fits and len(per) > 1 else "cost"
    return f"[bold]{head}:[/bold] " + "; ".join(per)


def _energy(est: Estimate) -> str | None:
    """Energy per output token at the batch's load, and the electricity's share of the cost per Mtok."""
    from gpuwise.report.perf import energy_line

    return energy_line(est.energy, "at this batch") if est.energy is not None else None


def estimate_view(est: Estimate) -> Group:
    """The estimate as the terminal shows it: the defaults it rests on, memory, verdict, speed, cost, notes."""
    from gpuwise.report.perf import perf_lines

    parts = (defaults_line(est), breakdown_table(est), verdict(est), kv_pool_line(est), perf_lines(est),
             cost_line(est), _energy(est), notes(est))
    return Group(*(p for p in parts if p))


def perf_json(est: Estimate) -> dict[str, Any]:
    """The contract's perf block; keys that do not apply to the task are left out, never zero-filled."""
    perf = est.perf
    if isinstance(perf, TrainPerf):
        train: dict[str, Any] = {
            "step_time_s": perf.step_time_s, "tokens_per_s": perf.tokens_per_s,
            "tokens_per_s_per_gpu": perf.tokens_per_s_per_gpu, "samples_per_s": perf.samples_per_s,
            "mfu": perf.mfu, "compute_s": perf.compute_s, "communication_s": perf.communication_s,
            "bubble_s": perf.bubble_s,
        }
        if perf.epoch_time_s is not None:
            train["epoch_time_s"] = perf.epoch_time_s
        train["band"] = _bands("train", train, ("step_time_s", "tokens_per_s", "tokens_per_s_per_gpu",
                                                "samples_per_s", "mfu", "epoch_time_s"))
        return {"bound": perf.bound, "train": _rounded(train), "top_ops": _ops(perf.top_ops)}
    assert isinstance(perf, InferPerf)
    infer = {k: getattr(perf, k) for k in ("ttft_ms", "tpot_ms", "decode_tokens_per_s", "output_tokens_per_s",
                                           "e2e_latency_ms", "samples_per_s") if getattr(perf, k) is not None}
    band = _bands("infer", infer, tuple(infer))
    if est.memory.max_concurrency is not None:
        infer["max_concurrency"] = est.memory.max_concurrency
    infer["band"] = band
    infer["replicas"] = perf.replicas  # the figures are one replica's; throughput adds up over replicas
    return {"bound": perf.bound, "infer": _rounded(infer), "top_ops": _ops(perf.top_ops)}


def _bands(task: str, values: dict[str, Any], keys: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """perf.*.band: the likely range of each figure, from the measured error distribution of its regime."""
    out = {}
    for key in keys:
        if key in values and (likely := band(task, key, values[key])) is not None:
            out[key] = {"low": round(likely[0], 6), "high": round(likely[1], 6)}
    return out


def _rounded(values: dict[str, Any]) -> dict[str, Any]:
    return {k: round(v, 6) if isinstance(v, float) else v for k, v in values.items()}


def _ops(top: tuple[tuple[str, float], ...]) -> list[dict[str, Any]]:
    return [{"op": name, "share": round(share, 4)} for name, share in top]


def breakdown_table(est: Estimate) -> Table:
    mem = est.memory
    table = Table(title=f"{est.model.name} ({est.task}) on {est.job.count} x {est.gpu.id}", title_justify="left")
    table.add_column("component")
    table.add_column("GiB per GPU", justify="right")
    table.add_column("share", justify="right")
    total = mem.per_gpu_bytes or 1.0
    labels = {**_LABELS, "framework_overhead": _RUNTIME.get(est.gpu.software.stack, "runtime context, workspaces")}
    for key, value in mem.breakdown_bytes.items():
        if value > 0:
            table.add_row(labels.get(key, key), f"{value / GIB:,.2f}", f"{value / total:.0%}")
    table.add_row("[bold]total[/bold]", f"[bold]{total / GIB:,.2f}[/bold]", "100%")
    return table


def verdict(est: Estimate) -> str:
    mem = est.memory
    word = "[green]fits[/green]" if mem.fits else "[red]does not fit[/red]"
    line = (f"{mem.per_gpu_bytes / GIB:,.2f} of {mem.capacity_bytes / GIB:,.2f} GiB per GPU: {word}, "
            f"headroom {mem.headroom_bytes / GIB:,.2f} GiB")
    if mem.engine_reserved_bytes:
        line += f"; {est.job.engine if hasattr(est.job, 'engine') else 'the engine'} pre-reserves " \
                f"{mem.engine_reserved_bytes / GIB:,.1f} GiB"
    if mem.max_concurrency is not None:
        line += f"; room for {mem.max_concurrency} sequences of this length"
    return line


def kv_pool_line(est: Estimate) -> str | None:
    """The KV pool as the engine prints it at start-up: GiB, tokens, whole blocks, and the requests of this length
    it holds at once."""
    details = est.memory.details
    context = int(getattr(est.job, "context", 0))
    if "kv_pool_bytes" not in details:  # an engine without a pool of its own rules: the room its cache can grow in
        room, tokens = est.memory.kv_budget_bytes, details.get("kv_tokens_per_gpu")
        if room is None or tokens is None:
            return None
        return (f"KV cache room: {max(room, 0.0) / GIB:,.2f} GiB = {int(tokens):,} tokens per GPU beside the weights "
                f"and buffers" + (f"; {tokens / context:.2f}x the {context:,}-token context" if context else ""))
    line = (f"KV cache: {details['kv_pool_bytes'] / GIB:,.2f} GiB = {int(details['kv_tokens_per_gpu']):,} tokens "
            f"({int(details['kv_blocks']):,} blocks of {int(details['kv_block_tokens'])})")
    if context:
        line += (f"; maximum concurrency for {context:,} tokens per request: "
                 f"{details['max_concurrency_at_len']:.2f}x")
    if details.get("cuda_graph_bytes"):
        line += f"; CUDA graphs {details['cuda_graph_bytes'] / GIB:.2f} GiB"
    return line


def notes(est: Estimate) -> str:
    lines = [f"[dim]- resolved: {est.model.resolved_as}[/dim]"] if est.model.resolved_as else []
    lines += [f"[yellow]warning:[/yellow] {w}" for w in est.warnings]
    lines += [f"[dim]- {a}[/dim]" for a in est.memory.assumptions]
    if est.perf is not None:  # the measurement an estimate was calibrated by is named where it is read
        lines += [f"- {a}" for a in est.perf.assumptions if a.startswith("calibrated by ")]
    return "\n".join(lines)


def fit_json(report: FitReport) -> dict[str, Any]:
    return {
        "estimate": estimate_json(report.estimate),
        "largest_batch": report.largest_batch,
        "gradient_accumulation": report.gradient_accumulation,
        "plan": list(report.plan),
        "plan_per_gpu_gb": None if report.plan_per_gpu_bytes is None else _gb(report.plan_per_gpu_bytes),
        "plan_per_gpu_gib": None if report.plan_per_gpu_bytes is None else _gib(report.plan_per_gpu_bytes),
        "changes": [
            {"flags": c.flags, "description": c.description, "tradeoff": c.tradeoff,
             "per_gpu_gb": _gb(c.per_gpu_bytes), "saving_gb": _gb(c.saving_bytes),
             "per_gpu_gib": _gib(c.per_gpu_bytes), "saving_gib": _gib(c.saving_bytes), "fits": c.fits}
            for c in report.changes
        ],
    }


def fit_view(report: FitReport) -> Group:
    est = report.estimate
    parts: list[Any] = [breakdown_table(est), verdict(est)]
    what = "micro-batch" if isinstance(est.job, TrainJob) else "concurrent batch"
    line = (f"largest {what} that fits: [bold]{report.largest_batch}[/bold]" if report.largest_batch
            else f"no {what} fits, not even 1")
    if report.gradient_accumulation and report.largest_batch:
        line += f"; gradient accumulation {report.gradient_accumulation} steps for the global batch"
    parts.append(line)
    if report.plan and report.plan_per_gpu_bytes is not None:
        parts.append(f"[green]fits with:[/green] [bold]{' '.join(report.plan)}[/bold] "
                     f"({report.plan_per_gpu_bytes / GIB:,.2f} GiB per GPU)")
    elif not est.memory.fits:
        parts.append("[red]no combination of the changes below fits this card[/red]")
    if report.changes:
        table = Table(title="changes that save memory (each alone), best first", title_justify="left")
        for header in ("flags", "what", "GiB per GPU", "saves GiB", "fits", "costs"):
            table.add_column(header, justify="right" if "GiB" in header else "left")
        for c in report.changes[:10]:
            table.add_row(c.flags, c.description, f"{c.per_gpu_bytes / GIB:,.2f}", f"{c.saving_bytes / GIB:,.2f}",
                          "yes" if c.fits else "no", c.tradeoff)
        parts.append(table)
    parts.append(notes(est))
    return Group(*parts)
