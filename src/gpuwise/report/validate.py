"""A validate run as a table of measured beside predicted, and as JSON (the record `--save` writes)."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.table import Table

from gpuwise.api import ImageJob, Validation

_UNITS = {"peak_allocated_gib": ("peak allocated (torch)", "GiB"), "peak_reserved_gib": ("peak reserved", "GiB"),
          "step_s": ("training step", "s"), "tokens_per_s": ("tokens/s", ""),
          "samples_per_s": ("images/s", ""), "prefill_s": ("prefill (TTFT)", "s"),
          "decode_s_per_token": ("decode per token", "s"), "generate_s": ("whole generate call", "s"),
          "output_tokens_per_s": ("output tokens/s", ""), "decode_s": ("VAE decode", "s"),
          "seconds_per_image": ("per image (denoiser + VAE)", "s")}


def validate_json(done: Validation) -> dict[str, Any]:
    return done.record()


def _cell(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "s":
        return f"{value * 1e3:,.2f} ms" if value < 1 else f"{value:,.3f} s"
    return f"{value:,.4g} {unit}".strip()


def validate_view(done: Validation) -> Group:
    step = "denoiser forward" if isinstance(done.job, ImageJob) else "training step"
    table = Table(title=f"{done.model} on {done.device_name} ({done.device}): measured beside gpuwise's estimate "
                        f"for {done.card}", title_justify="left")
    for header in ("", "measured", "predicted", "error"):
        table.add_column(header, justify="left" if not header else "right")
    errors = done.errors
    for key, seen in done.measured.items():
        label, unit = (step, "s") if key == "step_s" else _UNITS.get(key, (key, ""))
        error = errors.get(key)
        table.add_row(label, _cell(seen, unit), _cell(done.predicted.get(key), unit),
                      f"{error:+.1%}" if error is not None else "—")
    run = done.run
    lines = [f"{run.method}; {run.steps_timed} timed step(s), median" + (
        " (stopped at the time limit)" if run.stopped_early else "")]
    bound = done.calibration.get("bound")
    if isinstance(done.job, ImageJob):
        lines.append("an image estimate takes no --calibration yet: a saved run (--save) is for `fleet report` and "
                     "your records")
    else:
        lines.append(f"the estimate's step is {bound}-bound; `estimate --calibration FILE` with this run saved "
                     f"(--save) recalibrates that mechanism on {done.card}")
    if done.card == "host-cpu":
        lines.append("on the CPU the prediction runs on a card made of rates measured now: gpuwise's speed model is "
                     "a GPU's, so read the CPU's time as a check of the run, the memory as a check of the model")
    return Group(table, "\n".join(lines))


def calibrate_json(done: Any) -> dict[str, Any]:
    return dict(done.record())


def calibrate_view(done: Any) -> Group:
    """One row per run: each measured figure beside gpuwise's, a mark on a run beyond what its cards can do, then
    how the file's names were read and what the record recalibrates (or why it applies nothing). Text read from the
    file (its name, model and GPU names) is escaped: it is never rich markup."""
    table = Table(title=f"{escape(done.source)}: {len(done.runs)} run(s) of {escape(done.model)} on {done.gpu} "
                        f"({done.engine}), measured / predicted", title_justify="left")
    keys = list(dict.fromkeys(k for c in done.runs for k in c.measured))
    beyond = {b.run for b in done.breaches if b.figure in ("prefill", "decode")}
    table.add_column("run")
    for key in keys:
        table.add_column(key.replace("_", " "), justify="right")
    if beyond:
        table.add_column("check")
    for c in done.runs:
        cells = [f"{_short(c.measured.get(k))} / {_short(c.predicted.get(k))}" for k in keys]
        mark = ["[bold red]beyond the cards[/bold red]" if c.run.label in beyond else ""] if beyond else []
        table.add_row(escape(c.run.label[:34]), *cells, *mark)
    lines = [escape(note) for note in done.notes]
    lines.append(_calibration_line(done.calibration))
    return Group(table, "\n".join(lines))


def _calibration_line(mechanism: Any) -> str:
    parts = [f"prefill matmuls at {v:,.0f} TFLOP/s" for v in (mechanism.get("gemm_tflops") or {}).values()]
    if mechanism.get("memory_gb_s"):
        parts.append(f"decode memory at {mechanism['memory_gb_s']:,.0f} GB/s")
    if mechanism.get("not_applied"):
        return (f"[bold red]not applied:[/bold red] {escape(mechanism['not_applied'])}. The record (--save) says so, "
                "and `estimate --calibration FILE` refuses it")
    text = (f"from {escape(str(mechanism.get('basis')))}: " + ", ".join(parts) if parts else "nothing to recalibrate")
    return (f"the record (--save) sets {text}; `estimate --calibration FILE` and `serve-sim --calibration FILE` use it "
            "on this card")


def _short(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f}" if value >= 10 else f"{value:,.3g}"
