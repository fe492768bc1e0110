"""A validate run as a table of measured beside predicted, and as JSON (the record `--save` writes)."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table

from gpuwise.api.validation import Validation
from gpuwise.workload.jobs.image import ImageJob

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
    """One row per run: each measured figure beside gpuwise's, then what the record recalibrates."""
    table = Table(title=f"{done.source}: {len(done.runs)} run(s) of {done.model} on {done.gpu} ({done.engine}), "
                        "measured / predicted", title_justify="left")
    keys = list(dict.fromkeys(k for c in done.runs for k in c.measured))
    table.add_column("run")
    for key in keys:
        table.add_column(key.replace("_", " "), justify="right")
    for c in done.runs:
        cells = [f"{_short(c.measured.get(k))} / {_short(c.predicted.get(k))}" for k in keys]
        table.add_row(c.run.label[:34], *cells)
    mechanism = done.calibration
    parts = [f"prefill matmuls at {v:,.0f} TFLOP/s" for v in (mechanism.get("gemm_tflops") or {}).values()]
    if mechanism.get("memory_gb_s"):
        parts.append(f"decode memory at {mechanism['memory_gb_s']:,.0f} GB/s")
    text = (f"from {mechanism.get('basis')}: " + ", ".join(parts) if parts else "nothing to recalibrate")
    return Group(table, f"the record (--save) sets {text}; `estimate --calibration FILE` and `serve-sim --calibration "
                        "FILE` use it on this card")


def _short(value: float | None) -> str:
    return "—" if value is None else f"{value:,.1f}" if value >= 10 else f"{value:,.3g}"
