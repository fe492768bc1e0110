"""`gpuwise estimate`, `gpuwise fit` and `gpuwise models`: will it fit, and what to change so that it does.

`estimate` and `fit` are one command function registered twice: the flags are a stable interface shared
by both (and by `recommend` later); `fit` adds the largest batch, the ranked changes and `--emit hf`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpuwise import api
from gpuwise.cli.common import CatalogOption, JsonOption, catalog_files, guarded, output_file, print_json, stdout
from gpuwise.workload.job import CHOICES


def _choices(field: str) -> str:
    return ", ".join(CHOICES[field])


# flags that mean something only for one task or one command: given elsewhere they would be ignored silently
_TRAIN_ONLY = ("method", "precision", "optimizer", "seq", "grad_ckpt", "ckpt", "zero", "offload", "pp",
               "pp_microbatches", "lora_rank", "lora_targets", "tokens", "global_batch")
_INFER_ONLY = ("quant", "kv_dtype", "input_len", "output_len", "engine")
_COMMAND_ONLY = {
    "emit": ("fit",), "qps": ("serve-sim", "recommend"), "p99_ms": ("serve-sim", "recommend"),
    "slo": ("serve-sim",), "requests": ("serve-sim",), "seed": ("serve-sim",), "length_dist": ("serve-sim",),
    "calibration": ("estimate",), "exact": ("estimate",), "gpu": ("estimate", "fit", "scale", "serve-sim"),
    "count": ("estimate", "fit", "serve-sim"),
    **dict.fromkeys(("objective", "buy", "buy_used", "rent", "provider", "budget_usd", "monthly_budget_usd",
                     "max_gpus", "top", "deadline_hours", "hours_per_day", "years", "usd_per_kwh", "pue",
                     "psu_watts", "chassis", "os_name", "need", "exclude_vendor", "scenario", "report"),
                    ("recommend",)),
}


_FIXED_TASK = {"serve-sim": "infer", "scale": "train"}


def _refuse_unused_flags(ctx: typer.Context, command: str, task: str) -> None:
    """A flag the user typed that this command (or task) does not use is an error, not a silent no-op."""
    def typed(name: str) -> bool:  # by name: typer vendors its own copy of click's ParameterSource
        source = ctx.get_parameter_source(name)
        return source is not None and source.name == "COMMANDLINE"

    given = [p for p in ctx.command.params if p.name and typed(p.name)]
    effective = _FIXED_TASK.get(command, task)
    for param in given:
        name, flag = str(param.name), param.opts[0] if param.opts else str(param.name)
        users = _COMMAND_ONLY.get(name)
        if users is not None and command not in users:
            raise typer.BadParameter(f"{flag} is not used by `gpuwise {command}`; it applies to "
                                     f"{', '.join('gpuwise ' + u for u in users)}", param_hint=flag)
        if name == "task" and command in _FIXED_TASK and task != _FIXED_TASK[command]:
            raise typer.BadParameter(f"`gpuwise {command}` is {_FIXED_TASK[command]} only", param_hint=flag)
        if name == "tp" and command == "recommend" and effective == "infer":
            raise typer.BadParameter("recommend picks the smallest tensor-parallel degree that fits each GPU; "
                                     "leave --tp out", param_hint=flag)
        if name in _TRAIN_ONLY and effective != "train":
            raise typer.BadParameter(f"{flag} applies to training; this is an inference job (--task infer)",
                                     param_hint=flag)
        if name in _INFER_ONLY and effective != "infer":
            raise typer.BadParameter(f"{flag} applies to inference; add --task infer", param_hint=flag)


@guarded
def estimate_command(
    ctx: typer.Context,
    model: str = typer.Argument(None, help="Preset id (llama-3.1-8b), hub id (meta-llama/Llama-3.1-8B) or a "
                                           "config.json path. `gpuwise models` lists the presets."),
    gpu: str = typer.Option(None, "--gpu", help="Catalog id or loose name of the GPU: rtx-4090, 'H100 SXM' "
                                                "(recommend: not needed)."),
    count: int = typer.Option(1, help="GPUs in the job."),
    task: str = typer.Option("train", help="train or infer."),
    method: str = typer.Option("full", help=f"[train] {_choices('method')}."),
    precision: str = typer.Option("bf16", help=f"[train] {_choices('precision')}; bf16/fp16 = mixed precision "
                                               "with fp32 master weights; pure-bf16 = everything in bf16."),
    optimizer: str = typer.Option("adamw", help=f"[train] {_choices('optimizer')}."),
    batch: int = typer.Option(1, help="Micro-batch per GPU (train) or concurrent sequences (infer)."),
    seq: int = typer.Option(2048, help="[train] Tokens per sequence."),
    grad_ckpt: bool | None = typer.Option(None, "--grad-ckpt/--no-grad-ckpt",
                                          help="[train] Same as --ckpt full / none."),
    ckpt: str = typer.Option("none", help=f"[train] Activation checkpointing: {_choices('ckpt')}."),
    flash_attn: bool = typer.Option(True, "--flash-attn/--no-flash-attn", help="FlashAttention (no s x s scores)."),
    zero: int = typer.Option(0, help="[train] ZeRO stage 0-3 (3 = FSDP full shard)."),
    offload: str = typer.Option("none", help=f"[train] CPU offload: {_choices('offload')}."),
    tp: int = typer.Option(1, help="Tensor-parallel degree."),
    pp: int = typer.Option(1, help="[train] Pipeline-parallel degree."),
    pp_microbatches: int | None = typer.Option(None, help="[train] Micro-batches in the pipeline."),
    lora_rank: int = typer.Option(16, help="[train] LoRA rank r."),
    lora_targets: str = typer.Option("all-linear", help=f"[train] {_choices('lora_targets')}."),
    tokens: float | None = typer.Option(None, help="[train] Tokens in one epoch."),
    nodes: int = typer.Option(1, help="Machines the GPUs sit in."),
    network: str | None = typer.Option(None, help="Link between nodes: ib-ndr, ib-hdr, eth-400g ..."),
    quant: str = typer.Option("bf16", help=f"[infer] Weight format: {_choices('quant')}."),
    kv_dtype: str = typer.Option("fp16", help=f"[infer] KV cache: {_choices('kv_dtype')}."),
    input_len: int = typer.Option(1024, help="[infer] Prompt tokens."),
    output_len: int = typer.Option(256, help="[infer] Generated tokens."),
    engine: str = typer.Option("vllm", help=f"[infer] {_choices('engine')}."),
    global_batch: int | None = typer.Option(None, help="[fit] Sequences per optimizer step: gives the "
                                                        "gradient accumulation."),
    emit: str | None = typer.Option(None, help="[fit] 'hf': print matching transformers/PEFT/bitsandbytes settings."),
    qps: float = typer.Option(10.0, help="[serve-sim, recommend --task infer] Request rate to sustain."),
    p99_ms: float | None = typer.Option(None, "--p99-ms", help="[serve-sim] P99 latency SLO: also find the "
                                                               "highest rate that meets it."),
    slo: str = typer.Option("e2e", help="[serve-sim] What the SLO bounds: e2e (end-to-end) or ttft."),
    requests: int = typer.Option(400, help="[serve-sim] Requests to simulate."),
    seed: int = typer.Option(0, help="[serve-sim] Random seed (same seed, same answer)."),
    length_dist: str = typer.Option("fixed", help="[serve-sim] Input/output lengths: fixed or exponential."),
    objective: str = typer.Option("tco", help="[recommend] tco, cost-per-job, time, perf-per-dollar or perf-per-watt.",
                                  rich_help_panel="Recommend"),
    buy: bool = typer.Option(False, "--buy", help="[recommend] Consider buying new (default: all three ways).",
                             rich_help_panel="Recommend"),
    buy_used: bool = typer.Option(False, "--buy-used", help="[recommend] Consider buying used.",
                                  rich_help_panel="Recommend"),
    rent: bool = typer.Option(False, "--rent", help="[recommend] Consider renting.", rich_help_panel="Recommend"),
    provider: list[str] | None = typer.Option(None, "--provider", help="[recommend] Only these cloud providers.",
                                              rich_help_panel="Recommend"),
    budget_usd: float | None = typer.Option(None, help="[recommend] Purchase budget.", rich_help_panel="Recommend"),
    monthly_budget_usd: float | None = typer.Option(None, help="[recommend] Monthly rental budget.",
                                                    rich_help_panel="Recommend"),
    max_gpus: int = typer.Option(64, help="[recommend] Most GPUs to consider.", rich_help_panel="Recommend"),
    top: int = typer.Option(10, help="[recommend] Options to show.", rich_help_panel="Recommend"),
    deadline_hours: float | None = typer.Option(None, help="[recommend] A training job must finish within.",
                                                rich_help_panel="Recommend"),
    hours_per_day: float = typer.Option(8.0, help="[recommend] Hours of use per day.", rich_help_panel="Recommend"),
    years: float = typer.Option(3.0, help="[recommend] Horizon.", rich_help_panel="Recommend"),
    usd_per_kwh: float = typer.Option(0.16, help="[recommend] Electricity price.", rich_help_panel="Recommend"),
    pue: float = typer.Option(1.0, help="[recommend] Power usage effectiveness (1.0 at home).",
                              rich_help_panel="Recommend"),
    psu_watts: float | None = typer.Option(None, help="[recommend] Power supply to fit in.",
                                           rich_help_panel="Recommend"),
    chassis: str | None = typer.Option(None, help="[recommend] desktop, workstation or server.",
                                       rich_help_panel="Recommend"),
    os_name: str = typer.Option("linux", "--os", help="[recommend] linux, windows or wsl2.",
                                rich_help_panel="Recommend"),
    need: list[str] | None = typer.Option(None, "--need", help="[recommend] ecc, mig, nvlink, fp8, bf16, "
                                          "bitsandbytes, flash-attention-2, vllm (repeatable).",
                                          rich_help_panel="Recommend"),
    exclude_vendor: list[str] | None = typer.Option(None, "--exclude-vendor", help="[recommend] nvidia, amd, intel.",
                                                    rich_help_panel="Recommend"),
    scenario: Path | None = typer.Option(None, help="[recommend] YAML scenario with everything (workloads, money, "
                                                    "constraints); flags are then ignored.",
                                         rich_help_panel="Recommend"),
    report: Path | None = typer.Option(None, callback=output_file,
                                       help="[recommend] Also write a Markdown report to this file.",
                                       rich_help_panel="Recommend"),
    calibration: Path | None = typer.Option(None, "--calibration", metavar="FILE",
                                            help="Measured rates from `gpuwise bench --save FILE` for this card."),
    exact: bool = typer.Option(False, "--exact", help="Also count parameters by building the model on PyTorch's "
                                                      "meta device (needs the hf extra and torch)."),
    as_json: bool = JsonOption,
    catalog: list[Path] | None = CatalogOption,
) -> None:
    """Per-GPU memory of a training or inference job, component by component."""
    command = ctx.info_name
    if model is None and not (command == "recommend" and scenario is not None):
        raise typer.BadParameter("give a MODEL: a preset id, a hub id or a config.json path", param_hint="MODEL")
    if gpu is None and command != "recommend":
        raise typer.BadParameter("--gpu is required: a catalog id or loose name such as rtx-4090", param_hint="--gpu")
    if not (command == "recommend" and scenario is not None):  # a scenario file says everything itself
        _refuse_unused_flags(ctx, str(command), task)
    task = _FIXED_TASK.get(str(command), task)
    options: dict[str, Any] = dict(count=count, nodes=nodes, network=network, tp=tp, batch=batch,
                                   flash_attn=flash_attn)
    if task == "train":
        options.update(method=method, precision=precision, optimizer=optimizer, seq=seq,
                       ckpt=("full" if grad_ckpt else "none") if grad_ckpt is not None else ckpt,
                       zero=zero, offload=offload, pp=pp, pp_microbatches=pp_microbatches, lora_rank=lora_rank,
                       lora_targets=lora_targets, tokens=tokens, global_batch=global_batch)
    else:
        options.update(quant=quant, kv_dtype=kv_dtype, input_len=input_len, output_len=output_len, engine=engine)
    files = catalog_files(catalog)
    if emit not in (None, "hf"):
        raise typer.BadParameter(f"--emit {emit!r} is not accepted; use hf")
    from gpuwise.report import estimate as view

    if command == "recommend":
        from gpuwise.cli.recommend import run_recommend

        acquisitions = [a for a, on in (("buy-new", buy), ("buy-used", buy_used), ("rent", rent)) if on]
        run_recommend(model=model, task=task, options=options, files=files, as_json=as_json, scenario=scenario,
                      report=report, settings=dict(
                          objective=objective, acquisitions=acquisitions or ["buy-new", "buy-used", "rent"],
                          providers=provider or None, budget_usd=budget_usd, monthly_budget_usd=monthly_budget_usd,
                          top=top, usage=dict(hours_per_day=hours_per_day, years=years, usd_per_kwh=usd_per_kwh,
                                              pue=pue),
                          constraints=dict(psu_watts=psu_watts, chassis=chassis, max_gpus=max_gpus, os=os_name,
                                           needs=need or [], exclude_vendors=exclude_vendor or [])),
                      targets=dict(deadline_hours=deadline_hours, qps=qps if task == "infer" else None,
                                   p99_ms=p99_ms, tokens=tokens if task == "train" else None))
        return
    if command in ("scale", "serve-sim"):
        _perf_command(command, model, gpu, files, options, as_json,
                      dict(qps=qps, p99_ms=p99_ms, slo=slo, requests=requests, seed=seed, length_dist=length_dist))
        return
    if ctx.info_name == "fit":
        fitted = api.fit(model, gpu=gpu, task=task, catalog_files=files, **options)  # type: ignore[arg-type]
        if emit == "hf":
            from gpuwise.report.hf_settings import hf_settings

            typer.echo(hf_settings(fitted), nl=False)
        elif as_json:
            print_json(view.fit_json(fitted))
        else:
            stdout().print(view.fit_view(fitted))
        return
    result = api.estimate(model, gpu=gpu, task=task, catalog_files=files,  # type: ignore[arg-type]
                          calibration=calibration, **options)
    exact_count = api.exact_params(model) if exact else None
    if as_json:
        document = view.estimate_json(result)
        if exact_count is not None:
            document["workload"]["params_exact"] = exact_count
        print_json(document)
    else:
        if exact_count is not None:
            agree = "agrees" if exact_count == result.model.total_params else "DIFFERS"
            stdout().print(f"meta-device count {exact_count:,} ({agree} with the formula's "
                           f"{result.model.total_params:,})")
        from gpuwise.report.perf import perf_lines

        stdout().print(view.breakdown_table(result))
        stdout().print(view.verdict(result))
        stdout().print(perf_lines(result))
        stdout().print(view.notes(result))


def _perf_command(command: str, model: str, gpu: str, files: tuple[Path, ...], options: dict[str, Any],
                  as_json: bool, sim: dict[str, Any]) -> None:
    from gpuwise.report import perf as view

    if command == "scale":
        if "zero" in options and options["zero"] == 0:
            options["zero"] = 3  # scaling a model means sharding it; pass --zero 1 or 2 to compare
        rows = api.scale(model, gpu=gpu, catalog_files=files, **options)
        print_json([view.scale_row_json(r) for r in rows]) if as_json else stdout().print(view.scale_table(
            model, gpu, rows))
        return
    if sim["slo"] not in ("e2e", "ttft"):
        raise typer.BadParameter(f"--slo {sim['slo']!r} is not accepted; use e2e or ttft")
    if sim["length_dist"] not in ("fixed", "exponential"):
        raise typer.BadParameter(f"--length-dist {sim['length_dist']!r} is not accepted; use fixed or exponential")
    report = api.serve_sim(model, gpu=gpu, qps=sim["qps"], p99_ms=sim["p99_ms"], slo=sim["slo"],
                           requests=sim["requests"], seed=sim["seed"],
                           exponential_lengths=sim["length_dist"] == "exponential", catalog_files=files, **options)
    print_json(view.serving_json(report)) if as_json else stdout().print(view.serving_view(report))


@guarded
def models_command(as_json: bool = JsonOption) -> None:
    """List the shipped model presets (offline): id, family, parameters, hub ids."""
    rows: list[dict[str, Any]] = []
    for preset in api.list_models():
        arch = api.model(preset.id)
        rows.append({"id": preset.id, "family": arch.family, "params": arch.total_params,
                     "active_params": arch.active_params, "hub_ids": list(preset.hub_ids), "source": preset.source})
    if as_json:
        print_json(rows)
        return
    from rich.table import Table

    table = Table(title=f"{len(rows)} model presets", title_justify="left")
    for header in ("id", "family", "parameters", "hub id"):
        table.add_column(header, justify="right" if header == "parameters" else "left", no_wrap=header == "id")
    for r in rows:
        table.add_row(r["id"], r["family"], f"{r['params']:,}", (r["hub_ids"] or [""])[0])
    stdout().print(table)
