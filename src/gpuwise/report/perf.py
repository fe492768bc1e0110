"""Speed results as tables and JSON: training/inference figures, scaling tables, serving simulations."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Group
from rich.table import Table

from gpuwise.api import Estimate, InferPerf, ScaleRow, ServingReport, TrainPerf
from gpuwise.api.reporting import (
    DEFAULT_NETWORK,
    SESSION_STEADY_FACTOR,
    SLO_LABELS,
    STEADY_FACTOR,
    Energy,
    LoadResult,
    SloReport,
    band,
    band_percentiles,
)
from gpuwise.report.narrow import Column, narrow_table


def scale_row_json(row: ScaleRow) -> dict[str, Any]:
    values = {k: round(v, 6) if isinstance(v, float) else v for k, v in row.__dict__.items()}
    return {**values, "per_gpu_gib": round(row.per_gpu_gb * 1e9 / 2**30, 4)}


SCALE_COLUMNS = (Column("GPUs"), Column("nodes"), Column("GiB/GPU"), Column("fits"), Column("step s"),
                 Column("tokens/s"), Column("tokens/s per GPU"), Column("comm share"), Column("efficiency"))
SCALE_DROPS = ("nodes", "comm share", "tokens/s per GPU")  # nodes: the GPUs over 8, said in the caption


def scale_table(model: str, gpu: str, rows: list[ScaleRow], network: str | None = None) -> Table:
    """One row per GPU count; a count that does not fit shows no speed (its figures stay in --json, beside
    ``fits: false``); on a narrow terminal the nodes, communication share and per-GPU rate leave first."""
    joined = network or f"{DEFAULT_NETWORK} (assumed; --network names yours: eth-100g, eth-400g, ib-hdr ...)"
    timed = any(r.epoch_time_s for r in rows)
    columns = SCALE_COLUMNS + ((Column("hours for --tokens"),) if timed else ())
    cells = [_scale_cells(r, timed) for r in rows]
    caption = "—: does not fit, so no speed" if not all(r.fits for r in rows) else None
    if any(r.nodes > 1 for r in rows):
        caption = (f"{caption}; " if caption else "") + f"nodes of 8 joined by {joined}"
    runtimes = list(dict.fromkeys(r.runtime for r in rows if r.runtime))
    if len(runtimes) > 1:
        caption = (f"{caption}; " if caption else "") + (
            f"{' then '.join(runtimes)}: the runtime changes, so a GPU's speed may rise (FSDP2 and DeepSpeed "
            "compute in bf16 without autocast's per-layer casts)")
    return narrow_table(f"{model} training on {gpu}: scaling (efficiency = tokens/s per GPU vs the smallest count "
                        "that fits)", columns, cells, drop=SCALE_DROPS, caption=caption, note_dropped=True)


def _scale_cells(r: ScaleRow, timed: bool) -> tuple[str, ...]:
    shape = (str(r.count), str(r.nodes), f"{r.per_gpu_gb * 1e9 / 2**30:,.1f}", "yes" if r.fits else "no")
    hours = (f"{r.epoch_time_s / 3600:,.1f}" if r.epoch_time_s and r.fits else "—",) if timed else ()
    if not r.fits:
        return (*shape, "—", "—", "—", "—", "—", *hours)
    return (*shape, f"{r.step_time_s:,.3f}", f"{r.tokens_per_s:,.0f}", f"{r.tokens_per_s_per_gpu:,.0f}",
            f"{r.communication_share:.0%}", f"{r.efficiency:.0%}" if r.efficiency else "—", *hours)


def _stats(p50_p90_p99: tuple[float, float, float], mean: float, key: str) -> dict[str, Any]:
    """The figure's statistics, and the likely range of its mean (the serving regime's out-of-sample band)."""
    values = (mean, *p50_p90_p99)
    out: dict[str, Any] = {k: (round(v, 3) if math.isfinite(v) else None)
                           for k, v in zip(("mean", "p50", "p90", "p99"), values, strict=True)}
    likely = band("serve", key, mean) if math.isfinite(mean) and mean > 0 else None
    out["band"] = None if likely is None else {"low": round(likely[0], 3), "high": round(likely[1], 3)}
    return out


def _load_json(result: LoadResult | None) -> dict[str, Any] | None:
    if result is None:
        return None
    return {
        "qps": round(result.qps, 4), "requests": result.requests, "concurrency": result.concurrency,
        "ttft_ms": _stats(result.ttft_ms, result.ttft_mean_ms, "ttft_ms"),
        "tpot_ms": _stats(result.tpot_ms, result.tpot_mean_ms, "tpot_ms"),
        "e2e_ms": dict(zip(("p50", "p90", "p99"), (round(v, 3) for v in result.e2e_ms), strict=True)),
        "mean_queue_ms": round(result.mean_queue_ms, 3), "mean_batch": round(result.mean_batch, 2),
        "throughput_tokens_per_s": round(result.throughput_tokens_per_s, 1),
        "output_tokens_per_s": round(result.throughput_tokens_per_s, 1),
        "requests_per_s": round(result.requests_per_s, 4), "saturated": result.saturated, "steady": result.steady,
        "energy": energy_json(result.energy),
        "prefix_cache": _cache_json(result),
        "ttft_mean_ms_by_turn": [round(v, 3) if math.isfinite(v) else None for v in result.ttft_by_turn_ms] or None,
    }


def _cache_json(result: LoadResult) -> dict[str, Any] | None:
    """A session workload's prefix cache: prompt tokens served from the GPU's cache or reloaded from host memory."""
    stats = result.prefix_cache
    if stats is None:
        return None
    return {"hit_rate": round(stats.hit_rate, 4), "prompt_tokens": stats.prompt_tokens,
            "prefill_tokens_saved": stats.hit_tokens + stats.reloaded_tokens, "gpu_hit_tokens": stats.hit_tokens,
            "reloaded_tokens": stats.reloaded_tokens, "reload_s": round(stats.reload_s, 6),
            "evicted_tokens": stats.evicted_tokens}


def serving_json(report: ServingReport) -> dict[str, Any]:
    return {"at_rate": _load_json(report.at_rate), "at_concurrency": _load_json(report.at_concurrency),
            "slo_p99_ms": report.slo_p99_ms, "slo": report.slo_key,
            "max_qps": report.max_qps, "at_max_qps": _load_json(report.at_max), "max_batch": report.max_batch,
            "kv_capacity_tokens": int(min(report.kv_capacity_tokens, 2**62)),
            "closed_form": {"max_qps": round(report.planned_qps, 4), "p99_ms_at_rate": report.planned_p99_ms,
                            "binding_slo": report.planned_binding if isinstance(report, SloReport) else None},
            "replicas": report.replicas, "layout": report.layout or None, "memory": _memory_json(report),
            "rate_unit": "sessions_per_s" if report.turns else "requests_per_s", "turns": report.turns,
            "expected_hit_rate": None if report.expected_hit_rate is None else round(report.expected_hit_rate, 4),
            "slos": _slos_json(report)}


def _slos_json(report: ServingReport) -> dict[str, Any] | None:
    """``{ttft_p99_ms: {target, at_capacity}, tpot_p99_ms: {...}, binding: "tpot"}``: each SLO given, its P99 at the
    highest rate meeting them all (or, where none does, at a trickle), and the one with the least headroom."""
    if not isinstance(report, SloReport) or not report.slos:
        return None
    at_capacity = dict(report.p99_at_capacity_ms)
    out: dict[str, Any] = {f"{name}_p99_ms": {"target": target, "at_capacity": _rounded(at_capacity.get(name))}
                           for name, target in report.slos.targets_ms.items()}
    return {**out, "binding": report.binding_slo}


def _rounded(value: float | None) -> float | None:
    return round(value, 3) if value is not None and math.isfinite(value) else None


def _slo_line(report: ServingReport, unit: str) -> str | None:
    """'highest rate meeting P99 TTFT <= 2,000 ms and TPOT <= 50 ms: 3.20 QPS (TPOT binds: 49.6 ms)'; where no rate
    meets them, the SLO a trickle of requests already misses."""
    if not isinstance(report, SloReport) or not report.slos or report.layout:
        return None
    wanted, binding = report.slos.text(), report.binding_slo
    at = dict(report.p99_at_capacity_ms).get(binding or "")
    label = SLO_LABELS[binding] if binding else "one of them"
    value = f"{at:,.1f} ms" if at is not None and math.isfinite(at) else "unstable"
    if report.max_qps:
        return f"highest rate meeting {wanted}: [bold]{report.max_qps:,.2f} {unit}[/bold] ({label} binds: {value})"
    return (f"highest rate meeting {wanted}: [red]none: even a trickle of requests misses {label}"
            f"{f' ({value})' if binding else ''}[/red]")


def _memory_json(report: ServingReport) -> dict[str, Any] | None:
    """A replica's memory on each of its GPUs at batch 1, as `estimate --task infer` gives it."""
    if report.per_gpu_bytes is None or report.capacity_bytes is None:
        return None
    per_gpu, capacity = report.per_gpu_bytes, report.capacity_bytes
    return {"per_gpu_gib": round(per_gpu / 2**30, 4), "capacity_gib": round(capacity / 2**30, 4),
            "fits": per_gpu <= capacity}


SERVING_COLUMNS = tuple(Column(h) for h in ("load", "TTFT P50/P90/P99 ms", "TPOT mean/P99 ms",
                                              "end-to-end P50/P99 ms", "mean batch", "tokens/s", "note"))


def _likely_line(r: LoadResult) -> str:
    """The likely range of the mean TTFT and TPOT at one load (the serving regimes' out-of-sample bands)."""
    ttft, tpot = band("serve", "ttft_ms", r.ttft_mean_ms), band("serve", "tpot_ms", r.tpot_mean_ms)
    if ttft is None or tpot is None or not (math.isfinite(r.ttft_mean_ms) and math.isfinite(r.tpot_mean_ms)):
        return ""
    load = _load_name(r)
    return (f"likely at {load}: mean TTFT {ttft[0]:,.0f}-{ttft[1]:,.0f} ms, mean TPOT {tpot[0]:,.1f}-{tpot[1]:,.1f} ms "
            f"(measured / predicted on serving runs the fit never saw, {band_percentiles('serve', 'ttft_ms')} for "
            f"TTFT, {band_percentiles('serve', 'tpot_ms')} for TPOT)")


def _cache_line(r: LoadResult) -> str:
    stats = r.prefix_cache
    assert stats is not None
    load = f"{r.concurrency} users" if r.concurrency else f"{r.qps:,.2f} sessions/s"
    return (f"prefix cache at {load}: {stats.hit_rate:.1%} of prompt tokens not prefilled "
            f"({stats.hit_tokens:,} from the GPU, {stats.reloaded_tokens:,} reloaded from host memory); "
            f"{stats.evicted_tokens:,} tokens evicted")


def serving_view(report: ServingReport) -> Group:
    results = [r for r in (report.at_rate, report.at_max, report.at_concurrency) if r is not None]
    unit = "sessions/s" if report.turns else "QPS"  # --turns: rates count sessions
    rows = [(f"{r.concurrency} clients" if r.concurrency else f"{r.qps:,.2f} {unit}",
             "/".join(f"{v:,.0f}" for v in r.ttft_ms), f"{r.tpot_mean_ms:,.1f}/{r.tpot_ms[2]:,.1f}",
             f"{r.e2e_ms[0]:,.0f}/{r.e2e_ms[2]:,.0f}", f"{r.mean_batch:.1f}", f"{r.throughput_tokens_per_s:,.0f}",
             "saturated" if r.saturated else ("" if r.steady else "too few requests")) for r in results]
    table = narrow_table("latency under load (simulated continuous batching)", SERVING_COLUMNS, rows,
                         drop=("note", "mean batch", "tokens/s"))
    over = f" over {report.replicas} replicas" if report.replicas > 1 else ""
    plans = (report.layout if report.layout else
             f"the recommender's closed form plans {report.planned_qps:,.2f} {unit}{over}")
    memory = (f"{report.per_gpu_bytes / 2**30:,.1f} of {report.capacity_bytes / 2**30:,.0f} GiB per GPU at batch 1; "
              if report.per_gpu_bytes is not None and report.capacity_bytes is not None else "")
    lines: list[Any] = [table, f"{memory}KV cache room: {report.kv_capacity_tokens:,.0f} tokens and a batch limit of "
                               f"{report.max_batch} sequences per replica; {plans}"]
    lines += [_likely_line(r) for r in results if _likely_line(r)]
    lines += [energy_line(r.energy, f"at {_load_name(r)}") for r in results if r.energy is not None]
    lines += [_cache_line(r) for r in results if r.prefix_cache is not None]
    short = next((r for r in results if not r.steady), None)
    if short is not None:
        lines.append(_short_note(short))
    slo_line = _slo_line(report, unit)
    if slo_line is not None:
        lines.append(slo_line)
    return Group(*lines)


def _likely(task: str, key: str, value: float, fmt: str) -> str:
    likely = band(task, key, value)
    shown = format(value, fmt)
    return shown if likely is None else f"{shown} (likely {format(likely[0], fmt)}-{format(likely[1], fmt)})"


def perf_lines(est: Estimate) -> str:
    perf = est.perf
    if isinstance(perf, TrainPerf):
        unit = "images/s" if est.model.kind == "cnn" else "tokens/s"  # a CNN's sample is an image, not a sequence
        text = (f"{_likely('train', 'tokens_per_s', perf.tokens_per_s, ',.0f')} {unit}, step "
                f"{perf.step_time_s:,.3f} s ({perf.tokens_per_s_per_gpu:,.0f} {unit} per GPU), MFU {perf.mfu:.0%}, "
                f"{perf.bound}-bound")
        if perf.epoch_time_s:
            text += f"; epoch {_likely('train', 'epoch_time_s', perf.epoch_time_s / 3600, ',.2f')} h"
    elif isinstance(perf, InferPerf):
        if perf.samples_per_s is not None:
            text = f"{_likely('infer', 'samples_per_s', perf.samples_per_s, ',.1f')} samples/s, {perf.bound}-bound"
        else:
            assert perf.ttft_ms is not None and perf.tpot_ms is not None and perf.decode_tokens_per_s is not None
            text = (f"TTFT {_likely('infer', 'ttft_ms', perf.ttft_ms, ',.1f')} ms, TPOT {perf.tpot_ms:,.2f} ms, "
                    f"{_likely('infer', 'decode_tokens_per_s', perf.decode_tokens_per_s, ',.0f')} tokens/s while "
                    f"decoding, end-to-end {perf.e2e_latency_ms:,.0f} ms, {perf.bound}-bound")
        if perf.replicas > 1:
            text += f"; each of {perf.replicas} replicas (x{perf.replicas} the throughput)"
        if perf.bound_why:
            text += f"\n{perf.bound_why}"
    else:
        return ""
    top = ", ".join(f"{name} {share:.0%}" for name, share in perf.top_ops[:5])
    head = "speed" if est.memory.fits else "speed if it fit (it does not: memory above)"
    return f"[bold]{head}:[/bold] {text}\n[dim]time by operator: {top}[/dim]"


def _short_note(r: LoadResult) -> str:
    """Why a run is too short for steady state: too few requests for those in flight, or (sessions) too few
    sessions for those live at once, think time included."""
    if r.sessions and r.requests >= STEADY_FACTOR * max(r.mean_batch, 1.0):
        return (f"[yellow]note:[/yellow] {r.sessions:,} sessions are fewer than {SESSION_STEADY_FACTOR:g}x the "
                f"{r.live_sessions:,.0f} live at once: the prefix cache never holds a steady working set; raise "
                "--requests")
    return (f"[yellow]note:[/yellow] {r.requests:,} requests are fewer than {STEADY_FACTOR:g}x the "
            f"{r.mean_batch:,.0f} in flight: one burst, not steady state; raise --requests")


def _load_name(r: LoadResult) -> str:
    """'16 clients', '2.00 QPS', or with --turns '1.00 sessions/s' (the rate counts sessions)."""
    return f"{r.concurrency} clients" if r.concurrency else f"{r.qps:,.2f} {'sessions/s' if r.sessions else 'QPS'}"


def energy_json(e: Energy | None) -> dict[str, Any] | None:
    """Energy per output token at one load (estimate/cost/energy.py): the terms that made it, SI units."""
    if e is None:
        return None
    return {"joules_per_output_token": round(e.joules_per_output_token, 6), "gpu_w": round(e.gpu_w, 2),
            "gpus": e.gpus, "host_w": round(e.host_w, 2), "pue": e.pue, "wall_w": round(e.wall_w, 2),
            "busy_fraction": round(e.busy_fraction, 4),
            "prefill_share": round(e.prefill_share, 4), "output_tokens_per_s": round(e.output_tokens_per_s, 3),
            "usd_per_kwh": e.usd_per_kwh, "electricity_usd_per_mtok": round(e.electricity_usd_per_mtok, 6),
            "electricity_share": round(e.electricity_share, 6) if e.electricity_share is not None else None}


def energy_words(e: Energy) -> str:
    """'0.55 J per output token (1 GPU at 100 % busy, 15 % of it prefilling: 451 W + 210 W host share, PUE 1);
    electricity 0.0245 USD per Mtok at 0.16 USD/kWh, 4.0 % of the cost'."""
    gpus = f"{e.gpus} GPU" + ("s" if e.gpus > 1 else "")
    text = (f"{e.joules_per_output_token:,.3g} J per output token ({gpus} at {e.busy_fraction:.0%} busy, "
            f"{e.prefill_share:.0%} of it prefilling: {e.gpu_w:,.0f} W each + {e.host_w:,.0f} W host share, "
            f"PUE {e.pue:g}); electricity {e.electricity_usd_per_mtok:,.3g} USD per Mtok at {e.usd_per_kwh:g} USD/kWh")
    if e.electricity_share is not None:
        text += f", {e.electricity_share:.1%} of the cost"
    return text


def energy_line(e: Energy, where: str = "at this load") -> str:
    return f"[bold]energy {where}:[/bold] {energy_words(e)}"
