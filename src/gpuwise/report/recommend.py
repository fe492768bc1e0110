"""Recommendations and TCO as rich tables, JSON and Markdown."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from rich import box
from rich.console import Group
from rich.markup import escape
from rich.table import Table

from gpuwise.api import Recommendation, TcoReport
from gpuwise.api.reporting import SLO_LABELS, Fit, Option, Rejected
from gpuwise.api.shell import Workload
from gpuwise.report.perf import energy_json, energy_words


def _workload_json(workload: Workload, fit: Fit) -> dict[str, Any]:
    """One workload's figures on the option: memory, time or capacity, its settings and reproducing command."""
    return {"model": workload.model, "task": workload.task, "per_gpu_gib": round(fit.per_gpu_bytes / 2**30, 3),
            "job_hours": fit.job_hours, "tokens_per_s": fit.tokens_per_s, "qps_capacity": fit.qps_capacity,
            "p99_ms": fit.p99_ms, "p99_slo": fit.p99_slo, "binding_slo": fit.binding_slo,
            "seconds_per_image": fit.seconds_per_image, "tp": fit.tp,
            "settings": [dict(s) for s in fit.settings], "command": fit.commands[0] if fit.commands else None}


def option_json(o: Option, workloads: tuple[Workload, ...] = ()) -> dict[str, Any]:
    return {
        "workloads": [_workload_json(w, f) for w, f in zip(workloads, o.fit.workloads, strict=False)],
        "gpu": o.gpu, "count": o.count, "acquisition": o.acquisition, "fits": True,
        "per_gpu_gb": round(o.fit.per_gpu_gb, 3), "per_gpu_gib": round(o.fit.per_gpu_bytes / 2**30, 3),
        "job_hours": {"expected": o.fit.job_hours, "high": o.fit.job_hours_high} if o.fit.job_hours is not None
        else None, "tokens_per_s": o.fit.tokens_per_s,
        "qps_capacity": o.fit.qps_capacity, "p99_ms": o.fit.p99_ms, "p99_slo": o.fit.p99_slo,
        "binding_slo": o.fit.binding_slo, "tp": o.fit.tp,
        "seconds_per_image": o.fit.seconds_per_image,
        "hpc": {"value": round(o.fit.hpc_value, 6), "unit": o.fit.hpc_unit} if o.fit.hpc_value is not None else None,
        "cost_per_job_usd": o.cost_per_job_usd, "tco_usd": round(o.tco_usd, 2),
        "usd_per_hour": round(o.usd_per_hour, 4),
        "usd_per_mtok": round(o.usd_per_mtok, 4) if o.usd_per_mtok is not None else None,
        "settings": [dict(s) for s in o.fit.settings], "commands": list(o.fit.commands), **_placement_json(o),
        "capex_usd": o.capex_usd, "wall_kw": round(o.wall_kw, 3), "why": o.why, "warnings": list(o.warnings),
        "energy": energy_json(o.energy),
    }


def _placement_json(o: Option) -> dict[str, Any]:
    """Where the GPUs sit: the system (catalog id, or the cloud instance), how many machines, the links."""
    p = o.placement
    if p is None:
        return {"system": None, "instances": None, "gpus_per_node": None, "interconnect": None, "network": None}
    return {"system": p.system, "instances": p.machines, "gpus_per_node": p.gpus_per_machine,
            "interconnect": p.interconnect, "network": p.network, "slot_link": p.slot_link,
            "host_usd": round(p.host_usd, 2)}


def rejected_json(r: Rejected) -> dict[str, Any]:
    return {"gpu": r.gpu, "count": r.count, "acquisition": r.acquisition, "code": r.code, "reason": r.reason}


def recommendation_json(rec: Recommendation) -> dict[str, Any]:
    return {
        "request": rec.request.model_dump(mode="json"),
        "options": [option_json(o, rec.request.workloads) for o in rec.options[: rec.request.top]],
        "pareto": [{"gpu": o.gpu, "count": o.count, "acquisition": o.acquisition, "tco_usd": round(o.tco_usd, 2),
                    "time": o.fit.job_hours if o.fit.job_hours is not None else o.fit.p99_ms} for o in rec.pareto],
        "rejected": [rejected_json(r) for r in rec.rejected],
        "nearest": [rejected_json(r) for r in rec.nearest],
        "assumptions": list(rec.assumptions), "findings": list(rec.findings), "defaults": list(rec.defaults),
    }


def _groups(rejected: tuple[Rejected, ...]) -> list[tuple[str, int, list[str]]]:
    by_code: dict[str, list[Rejected]] = defaultdict(list)
    for r in rejected:
        by_code[r.code].append(r)
    out = []
    for code, items in sorted(by_code.items(), key=lambda kv: -len(kv[1])):
        examples: list[str] = []
        for r in items:
            text = f"{r.count} x {r.gpu}: {r.reason}" if r.count else f"{r.gpu}: {r.reason}"
            if len(examples) < 3 and r.gpu not in " ".join(examples):
                examples.append(text)
        out.append((code, len(items), examples))
    return out


def _way(o: Option, *, machines: bool = True) -> str:
    """The acquisition and the machines in a few characters for the table ('buy new, 2 HGX nodes', 'rent aws x2':
    two instances); ``machines`` False leaves them to the reason line. The full offer is in --json and --report."""
    count = o.placement.machines if o.placement else 1
    if o.acquisition.startswith("rent:"):
        return "rent " + o.acquisition.split(":")[1] + (f" x{count}" if count > 1 and machines else "")
    way = {"buy-new": "buy new", "buy-used": "buy used"}.get(o.acquisition, o.acquisition)
    return f"{way}, {o.placement.label}" if o.placement and machines else way


def _time_text(o: Option, *, short: bool = False) -> str:
    """What an option's speed is: hours per job (the band's range in the table), images or requests per unit, or one
    user's tokens/s; ``short`` for the 80-column table."""
    return _fit_time_text(o.fit, short=short)


def _fit_time_text(fit: Fit, *, short: bool = False) -> str:
    """The same for one workload's figures (a scenario's sub-row) or an option's combined ones."""
    if fit.job_hours is not None and fit.job_hours < 0.1:  # minutes or seconds: an HPL solve, a short sweep
        seconds = fit.job_hours * 3600
        text = f"{seconds / 60:,.1f} min" if seconds >= 60 else f"{seconds:,.1f} s"
        return text if short else f"{text}/job"
    if fit.job_hours is not None:
        if not short:
            return f"{fit.job_hours:,.1f} h/job"
        high = fit.job_hours_high or fit.job_hours
        digits = 1 if high < 10 else 0  # short jobs keep a decimal, so that a range never reads "2-2 h"
        low_text, high_text = f"{fit.job_hours:,.{digits}f}", f"{high:,.{digits}f}"
        return f"{low_text}-{high_text} h" if high_text != low_text else f"{low_text} h"
    if fit.seconds_per_image is not None and fit.qps_capacity is not None:
        per_hour = "" if short else f", {fit.qps_capacity * 3600:,.0f} images/h"
        return f"{fit.seconds_per_image:,.1f} s/{'img' if short else 'image'}{per_hour}"
    if fit.qps_capacity is not None:
        if short:
            return f"{_rate_text(fit.qps_capacity)}/s {_p99_label(fit)} " + _latency_text(fit.p99_ms)
        spec = ".3g" if fit.p99_slo == "tpot" else ",.0f"  # a TPOT is tens of ms: its tenths count
        p99 = f"{fit.p99_ms:{spec}} ms" if fit.p99_ms is not None else "— (saturated)"
        return f"{_rate_text(fit.qps_capacity)} QPS, {_p99_label(fit, short=False)} {p99}"
    if fit.tokens_per_s is not None:
        return f"{fit.tokens_per_s:,.0f} tok/s" if short else f"{fit.tokens_per_s:,.1f} tokens/s for one user"
    return "—"


def _rate_text(qps: float) -> str:
    """Requests per second to three figures below 10 ('0.833', '2.65'), so that a capacity just above the rate asked
    never reads below it; one decimal above ('262.2')."""
    return f"{qps:,.1f}" if qps >= 10 else f"{qps:.3g}"


def _p99_label(fit: Fit, *, short: bool = True) -> str:
    """'p99' (end-to-end, or no SLO), 'TTFT' / 'P99 TTFT' where the option's P99 is of another SLO's kind."""
    if fit.p99_slo == "e2e":
        return "p99" if short else "P99"
    return SLO_LABELS[fit.p99_slo] if short else f"P99 {SLO_LABELS[fit.p99_slo]}"


def _latency_text(p99_ms: float | None) -> str:
    """'38ms', '2.4s', 'sat.' (saturated: no SLO) for the short speed column."""
    if not p99_ms:
        return "sat."
    return f"{p99_ms:,.0f}ms" if p99_ms < 1e3 else f"{p99_ms / 1e3:,.1f}s"


def _usd(value: float | None) -> str:
    """USD in at most 6 characters: 0.03, 875, 12,340, 482k, 4.92M."""
    if value is None:
        return "—"
    if value < 10:
        return f"{value:,.2f}"
    if value >= 1e6:
        return f"{value / 1e6:,.2f}M"
    if value >= 1e5:
        return f"{value / 1e3:,.0f}k"
    return f"{value:,.0f}"


TABLE_COLUMNS = 80  # the table fits a default terminal; what does not fit is in the reason line and --json


def _rows(shown: tuple[Option, ...] | list[Option], *, machines: bool,
          names: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """One row per option; under each, with several workloads, a sub-row per workload (its memory and speed)."""
    rows: list[tuple[str, ...]] = []
    for i, o in enumerate(shown, 1):
        rows.append((str(i), f"{o.count} x {o.gpu}{_format(o)}", _way(o, machines=machines),
                     f"{o.fit.per_gpu_bytes / 2**30:,.1f}",
                     _time_text(o, short=True), _usd(o.cost_per_job_usd),
                     f"{o.usd_per_mtok:,.3f}" if o.usd_per_mtok is not None else "—", _usd(o.tco_usd)))
        if len(o.fit.workloads) > 1:
            rows += [("", f"  {_short(name)}{_format_of(w.settings)}", "", f"{w.per_gpu_bytes / 2**30:,.1f}",
                      _fit_time_text(w, short=True), "", "", "")
                     for name, w in zip(names, o.fit.workloads, strict=False)]
    return rows


def _format(o: Option) -> str:
    """' fp8': the weight format a serving option runs (recommend picks it per card when --quant is free); with
    several workloads each sub-row says its own."""
    return _format_of(o.fit.settings) if len(o.fit.workloads) <= 1 else ""


def _format_of(settings: tuple[Mapping[str, object], ...]) -> str:
    formats = {str(setting["quant"]) for setting in settings if "quant" in setting}
    return f" {formats.pop()}" if len(formats) == 1 else ""


def _short(model: str) -> str:
    """A workload's model in a sub-row: its last path part, at most 22 characters."""
    tail = model.rstrip("/").split("/")[-1]
    return tail if len(tail) <= 22 else tail[:21] + "~"


def _p99_in_header(rows: list[tuple[str, ...]], header: str) -> tuple[list[tuple[str, ...]], str]:
    """Rows that all serve ('2.65/s p99 10.4s') say 'p99' once, in the header ('rate p99'), not in every cell."""
    if not rows or not all(" p99 " in row[4] for row in rows):
        return rows, header
    return [(*row[:4], row[4].replace(" p99 ", " "), *row[5:]) for row in rows], "rate  p99"


def _options_table(rec: Recommendation, table: Table) -> Table:
    """The ranked options: every column as wide as its widest cell (ids are never cut); the machines each option
    needs are in the way column while the table still fits 80 columns, else only in the reason line."""
    shown = rec.options[: rec.request.top]
    timed = any(o.fit.job_hours is not None for o in shown)
    names = tuple(w.model for w in rec.request.workloads)
    for machines in (True, False):
        rows, speed = _p99_in_header(_rows(shown, machines=machines, names=names), "time/job" if timed else "speed")
        headers = ("#", "configuration", "way", "GiB", speed, "$/job", "$/Mtok", "TCO $")
        # a serving table has no $/job; a sub-row's blank cells say nothing either
        keep = [j for j in range(len(headers)) if any(r[j] not in ("—", "") for r in rows)]
        if 5 in keep and 6 in keep:  # training and serving together: one cost column, the one ranked by if either
            keep.remove(5 if rec.request.objective == "usd-per-mtok" else 6)
        if rec.request.usage.pattern == "one-off" and 5 in keep:
            keep.remove(7)  # one job: its cost is the whole cost
        widths = [max(len(headers[j]), *(len(r[j]) for r in rows)) for j in keep]
        if sum(widths) + len(widths) + 1 <= TABLE_COLUMNS:
            break
    ranked_by = 6 if rec.request.objective == "usd-per-mtok" else 7
    for j in (6, 5):  # still too wide (long ids with their format): a cost column besides the ranked one leaves
        if sum(widths) + len(widths) + 1 > TABLE_COLUMNS and j in keep and j != ranked_by and len(keep) > 5:
            del widths[keep.index(j)]
            keep.remove(j)
    for j, widest in zip(keep, widths, strict=True):
        table.add_column(headers[j], justify="left" if j in (1, 2) else "right", no_wrap=True, min_width=widest)
    for row in rows:
        table.add_row(*(row[j] for j in keep))
    return table


def recommendation_view(rec: Recommendation) -> Group:
    """The ranked table (80 columns: ids never cut; USD/h, kW and the full offer are in --json and --report)."""
    parts: list[Any] = []
    if rec.defaults:
        parts.append(f"[bold]defaults left free:[/bold] {escape('; '.join(rec.defaults))}")
    if rec.options:
        table = Table(title=f"best ways to run it, by {rec.request.objective}", title_justify="left",
                      box=box.SIMPLE_HEAD, padding=(0, 0), pad_edge=False)
        parts.append(_options_table(rec, table))
        winner = rec.options[0]
        parts.append(f"[bold]why #1:[/bold] {escape(winner.why)}")
        if winner.energy is not None:
            parts.append(f"[bold]energy #1 at the rate it serves:[/bold] {energy_words(winner.energy)}")
        parts += [f"[bold]reproduce #1:[/bold] {escape(c)}" for c in winner.fit.commands]
        for note in winner.warnings:
            parts.append(f"[yellow]note:[/yellow] {escape(note)}")
        parts += [f"[bold]finding:[/bold] {escape(f)}" for f in rec.findings]
        front = ", ".join(f"{o.count} x {o.gpu} ({o.acquisition})" for o in rec.pareto[:6])
        parts.append(f"[dim]Pareto front (cost vs time): {escape(front)}[/dim]")
    else:
        parts.append("[red]nothing meets every requirement.[/red] Nearest options and what would have to change:")
        for r in rec.nearest:
            parts.append(escape(f"- {r.count} x {r.gpu} ({r.acquisition}): {r.reason}"))
    for code, n, examples in _groups(rec.rejected):
        parts.append(f"[dim]rejected for {code} ({n}): {escape('; '.join(examples))}[/dim]")
    parts.append("[dim]" + "\n".join(f"- {a}" for a in rec.assumptions) + "[/dim]")
    return Group(*parts)


def markdown(rec: Recommendation) -> str:
    lines = ["# gpuwise recommendation", "", "## Inputs", "", "```yaml"]
    import yaml

    lines += [yaml.safe_dump(rec.request.model_dump(mode="json"), sort_keys=False).rstrip(), "```", ""]
    if rec.defaults:
        lines += ["Left free, so the defaults:", "", *[f"- {d}" for d in rec.defaults], ""]
    lines += ["## Options",
              "", "| # | configuration | acquisition | GiB/GPU | time / capacity | USD/job | TCO USD | USD/h | why |",
              "|---|---|---|---:|---|---:|---:|---:|---|"]
    names = tuple(w.model for w in rec.request.workloads)
    for i, o in enumerate(rec.options[: rec.request.top], 1):
        job = f"{o.cost_per_job_usd:,.0f}" if o.cost_per_job_usd is not None else "—"
        lines.append(f"| {i} | {o.count} x {o.gpu}{_format(o)} | {o.acquisition} | "
                     f"{o.fit.per_gpu_bytes / 2**30:,.1f} | {_time_text(o)} | "
                     f"{job} | {o.tco_usd:,.0f} | {o.usd_per_hour:,.2f} | {o.why} |")
        if len(o.fit.workloads) > 1:  # each workload's own memory and speed under its option
            lines += [f"| | ↳ {name}{_format_of(w.settings)} | | {w.per_gpu_bytes / 2**30:,.1f} | "
                      f"{_fit_time_text(w)} | | | | |" for name, w in zip(names, o.fit.workloads, strict=False)]
    noted = [(i, o) for i, o in enumerate(rec.options[: rec.request.top], 1) if o.warnings or o.fit.commands]
    if noted:
        lines += ["", "## What to know about each option", ""]
        for i, o in noted:
            lines += [f"{i}. **{o.count} x {o.gpu} ({o.acquisition})**"] + [f"   - {w}" for w in o.warnings]
            lines += [f"   - reproduce: `{c}`" for c in o.fit.commands]
    if rec.findings:
        lines += ["", "## Findings", ""] + [f"- {f}" for f in rec.findings]
    if not rec.options:
        lines += ["", "Nothing meets every requirement. Nearest:", ""]
        lines += [f"- {r.count} x {r.gpu} ({r.acquisition}): {r.reason}" for r in rec.nearest]
    lines += ["", "## Pareto front (total cost vs time)", "", "| configuration | acquisition | TCO USD | time |",
              "|---|---|---:|---:|"]
    for o in rec.pareto:
        lines.append(f"| {o.count} x {o.gpu} | {o.acquisition} | {o.tco_usd:,.0f} | {_time_text(o)} |")
    lines += ["", "## Rejected", ""]
    for code, n, examples in _groups(rec.rejected):
        lines.append(f"- **{code}** ({n}): " + "; ".join(examples))
    lines += ["", "## Assumptions and sources", ""] + [f"- {a}" for a in rec.assumptions]
    lines += ["- datasheet figures, prices and offers: `gpuwise catalog show GPU` lists each with its source and date",
              "- efficiency factors and cost constants: src/gpuwise/estimate/constants.py, each with its source", ""]
    return "\n".join(lines)


def tco_json(report: TcoReport) -> dict[str, Any]:
    return {
        "gpu": report.gpu.id, "count": report.count, "unit_price_usd": report.unit_price_usd,
        "price_basis": report.price_basis, "usage": report.usage.model_dump(),
        "buy": {**{k: round(v, 2) for k, v in report.buy.__dict__.items()}, "capex_usd": round(report.buy.capex_usd, 2),
                "tco_usd": round(report.buy.tco_usd, 2), "by_year_usd": [round(v, 2) for v in report.buy_by_year_usd],
                "cash_out_by_year_usd": [round(v, 2) for v in report.cash_by_year_usd],
                "residual_by_year_usd": [round(v, 2) for v in report.residual_by_year_usd]},
        "rent": [{"offer": line.offer.id, "provider": line.offer.provider, "instance": line.offer.instance,
                  "tier": line.offer.tier, "region": line.offer.region, "usd_per_hour": round(line.per_hour_usd, 4),
                  "by_year_usd": [round(v, 2) for v in line.by_year_usd],
                  "break_even_hours_per_month": line.break_even_hours_per_month, "as_of": str(line.offer.as_of)}
                 for line in report.rent],
    }


def tco_view(report: TcoReport) -> Group:
    table = Table(title=f"{report.count} x {report.gpu.id}: cumulative cost, buying ({report.unit_price_usd:,.0f} "
                        f"USD each, {report.price_basis}) vs renting, {report.usage.hours_per_day:g} h/day",
                  title_justify="left")
    table.add_column("way")
    for year in range(1, len(report.buy_by_year_usd) + 1):
        table.add_column(f"year {year}", justify="right")
    table.add_column("break-even h/month", justify="right")
    table.add_row("buy: cash out", *[f"{v:,.0f}" for v in report.cash_by_year_usd], "—")
    table.add_row("buy: resale value", *[f"-{v:,.0f}" for v in report.residual_by_year_usd], "—")
    table.add_row("buy: net of resale", *[f"{v:,.0f}" for v in report.buy_by_year_usd], "—")
    for line in report.rent:
        even = f"{line.break_even_hours_per_month:,.0f}" if line.break_even_hours_per_month else "never"
        offer = line.offer
        table.add_row(escape(f"rent {offer.provider} {offer.tier} {offer.instance} ({offer.as_of})"),
                      *[f"{v:,.0f}" for v in line.by_year_usd], even)
    b = report.buy
    detail = (f"buy = cards {b.gpus_usd:,.0f} + host {b.host_usd:,.0f} + energy {b.energy_usd:,.0f} "
              f"({b.wall_kw:,.2f} kW at the wall) + repairs {b.repairs_usd:,.0f} - residual {b.residual_usd:,.0f}")
    return Group(table, detail, "[dim]break-even: hours of use per month above which buying is cheaper over the "
                                "horizon[/dim]")
