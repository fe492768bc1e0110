"""`gpuwise estimate`, `gpuwise fit` and `gpuwise models`: will it fit, and what to change so that it does.

`estimate` and `fit` are one command function registered twice: the flags are a stable interface shared
by both (and by `recommend` later); `fit` adds the largest batch, the ranked changes and `--emit hf`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from gpuwise import api
from gpuwise.cli.common import CatalogOption, JsonOption, catalog_files, guarded, print_json, stdout
from gpuwise.workload.job import CHOICES


def _choices(field: str) -> str:
    return ", ".join(CHOICES[field])


@guarded
def estimate_command(
    ctx: typer.Context,
    model: str = typer.Argument(..., help="Preset id (llama-3.1-8b), hub id (meta-llama/Llama-3.1-8B) or a "
                                           "config.json path. `gpuwise models` lists the presets."),
    gpu: str = typer.Option(..., "--gpu", help="Catalog id or loose name of the GPU: rtx-4090, 'H100 SXM'."),
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
    qps: float = typer.Option(10.0, help="[serve-sim] Request rate (Poisson arrivals)."),
    p99_ms: float | None = typer.Option(None, "--p99-ms", help="[serve-sim] P99 latency SLO: also find the "
                                                               "highest rate that meets it."),
    slo: str = typer.Option("e2e", help="[serve-sim] What the SLO bounds: e2e (end-to-end) or ttft."),
    requests: int = typer.Option(400, help="[serve-sim] Requests to simulate."),
    seed: int = typer.Option(0, help="[serve-sim] Random seed (same seed, same answer)."),
    length_dist: str = typer.Option("fixed", help="[serve-sim] Input/output lengths: fixed or exponential."),
    exact: bool = typer.Option(False, "--exact", help="Also count parameters by building the model on PyTorch's "
                                                      "meta device (needs the hf extra and torch)."),
    as_json: bool = JsonOption,
    catalog: list[Path] | None = CatalogOption,
) -> None:
    """Per-GPU memory of a training or inference job, component by component."""
    command = ctx.info_name
    if command == "serve-sim":
        task = "infer"
    elif command == "scale":
        task = "train"
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

    if command in ("scale", "serve-sim"):
        _perf_command(command, model, gpu, files, options, as_json,
                      dict(qps=qps, p99_ms=p99_ms, slo=slo, requests=requests, seed=seed, length_dist=length_dist))
        return
    if ctx.info_name == "fit":
        report = api.fit(model, gpu=gpu, task=task, catalog_files=files, **options)  # type: ignore[arg-type]
        if emit == "hf":
            from gpuwise.report.hf_settings import hf_settings

            typer.echo(hf_settings(report), nl=False)
        elif as_json:
            print_json(view.fit_json(report))
        else:
            stdout().print(view.fit_view(report))
        return
    result = api.estimate(model, gpu=gpu, task=task, catalog_files=files, **options)  # type: ignore[arg-type]
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
