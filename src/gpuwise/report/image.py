"""Image-generation estimates as tables and JSON."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table

from gpuwise.api import ImageEstimate, ImageFit
from gpuwise.api.reporting import band, band_percentiles

GIB = 2**30


def image_json(est: ImageEstimate) -> dict[str, Any]:
    job, p, memory = est.job, est.pipeline, est.memory
    return {
        "workload": {"model": p.id, "name": p.name, "kind": "image-pipeline", "task": "infer",
                     "params": p.total_params, "params_breakdown": p.params(), "source": p.source},
        "hardware": {"gpu": est.gpu.id, "count": 1, "interconnect": est.gpu.native_link},
        "job": job.model_dump(),
        "memory": {"per_gpu_gb": round(memory.per_gpu_bytes / 1e9, 4),
                   "capacity_gb": round(memory.capacity_bytes / 1e9, 4),
                   "headroom_gb": round(memory.headroom_bytes / 1e9, 4),
                   "per_gpu_gib": round(memory.per_gpu_bytes / GIB, 4),
                   "capacity_gib": round(memory.capacity_bytes / GIB, 4), "fits": memory.fits,
                   "breakdown_gib": {k: round(v / GIB, 4) for k, v in memory.breakdown_bytes.items()},
                   "weights_gib": {k: round(v / GIB, 4) for k, v in est.weights_bytes.items()},
                   "working_set_gib": None if est.working_set_bytes is None else round(est.working_set_bytes / GIB,
                                                                                        4)},
        "perf": None if est.seconds_per_call is None else {
            "seconds_per_image": round(est.seconds_per_image or 0.0, 4),
            "seconds_per_call": round(est.seconds_per_call, 4),
            "images_per_s": round(est.images_per_s or 0.0, 5),
            "phases_s": {k: round(v, 4) for k, v in est.phases_s.items()},
            "band": _likely_json(est.seconds_per_call)},
        "assumptions": list(est.assumptions), "warnings": list(est.warnings),
    }


def _likely_json(seconds: float) -> dict[str, float] | None:
    """seconds_per_call's likely range: the image regime's out-of-sample band."""
    likely = band("image", "seconds_per_call", seconds)
    return None if likely is None else {"low": round(likely[0], 4), "high": round(likely[1], 4)}


def image_table(est: ImageEstimate) -> Table:
    total = est.memory.per_gpu_bytes
    table = Table(title=f"{est.pipeline.id} (text-to-image, {est.job.resolution} px, batch {est.job.batch}) on "
                        f"1 x {est.gpu.id}", title_justify="left")
    for header in ("component", "GiB", "share"):
        table.add_column(header, justify="left" if header == "component" else "right")
    for name, value in est.memory.breakdown_bytes.items():
        table.add_row(name, f"{value / GIB:,.2f}", f"{value / total:.0%}" if total else "-")
    table.add_row("total", f"{total / GIB:,.2f}", "100%", style="bold")
    return table


def image_lines(est: ImageEstimate) -> str:
    m = est.memory
    verdict = "fits" if m.fits else "does NOT fit"
    lines = [f"{m.per_gpu_bytes / GIB:,.2f} of {m.capacity_bytes / GIB:,.2f} GiB: {verdict}"]
    if est.working_set_bytes is not None and est.working_set_bytes < m.per_gpu_bytes:
        lines.append(f"{est.job.runtime.name} keeps it all loaded because it fits; it runs in "
                     f"{est.working_set_bytes / GIB:,.2f} GiB, one component at a time")
    if est.seconds_per_call is not None:
        phases = ", ".join(f"{k} {v:,.2f} s" for k, v in est.phases_s.items() if v >= 0.005)
        lines.append(f"{est.seconds_per_image:,.2f} s per image ({est.job.steps} steps x "
                     f"{est.job.guidance_passes} pass(es)); per call of {est.job.batch}: {phases}")
        likely = band("image", "seconds_per_call", est.seconds_per_call)
        if likely is not None:
            lines.append(f"likely {likely[0]:,.2f}-{likely[1]:,.2f} s per call (measured / predicted on runs the fit "
                         f"never saw, {band_percentiles('image', 'seconds_per_call')})")
    lines += [f"warning: {w}" for w in est.warnings]
    lines += [f"- {a}" for a in est.assumptions]
    return "\n".join(lines)


def image_fit_json(fit: ImageFit) -> dict[str, Any]:
    return {**image_json(fit.estimate), "fitting_options": [
        {"flags": o.flags, "per_gpu_gib": round(o.estimate.memory.per_gpu_bytes / GIB, 4),
         "seconds_per_image": None if o.estimate.seconds_per_image is None else round(o.estimate.seconds_per_image, 4)}
        for o in fit.options]}


def image_fit_view(fit: ImageFit) -> Group:
    table = Table(title="settings that fit this card, fastest first", title_justify="left")
    for header in ("flags", "GiB", "s / image"):
        table.add_column(header, justify="left" if header == "flags" else "right")
    for o in fit.options:
        seconds = o.estimate.seconds_per_image
        table.add_row(o.flags, f"{o.estimate.memory.per_gpu_bytes / GIB:,.2f}",
                      "-" if seconds is None else f"{seconds:,.2f}")
    if not fit.options:
        return Group(image_table(fit.estimate), image_lines(fit.estimate),
                     "nothing fits: no offload mode or weight format brings it under this card's memory")
    return Group(image_table(fit.estimate), image_lines(fit.estimate), table)
