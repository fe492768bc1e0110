"""Benchmark results against the catalog, as a table and JSON."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from gpuwise.api.hardware import CollectiveRun
from gpuwise.api.reporting import BenchResult

_STYLE = {"PASS": "green", "WARN": "yellow", "FAIL": "bold red", "N/A": "dim"}


def bench_json(name: str, card: str | None, results: list[BenchResult], *, host: str | None = None,
               taken_at: str | None = None) -> dict[str, Any]:
    return {"device": name, "catalog_id": card, "host": host, "taken_at": taken_at, "results": [
        {"metric": r.metric, "value": round(r.value, 3), "unit": r.unit, "reference": r.reference,
         "percent_of_reference": None if r.percent is None else round(r.percent, 1), "verdict": r.verdict,
         "settings": r.settings} for r in results]}


def bench_view(name: str, card: str | None, results: list[BenchResult]) -> Table:
    table = Table(title=f"{name} ({card or 'not in catalog'}): measured vs datasheet", title_justify="left")
    for header in ("metric", "measured", "datasheet", "%", "verdict", "settings"):
        table.add_column(header, justify="right" if header in ("measured", "datasheet", "%") else "left")
    for r in results:
        style = _STYLE[r.verdict]
        table.add_row(r.metric, f"{r.value:,.1f} {r.unit}", "—" if r.reference is None else f"{r.reference:,.1f}",
                      "—" if r.percent is None else f"{r.percent:.0f}%", f"[{style}]{r.verdict}[/{style}]",
                      r.settings)
    return table


def collective_json(run: CollectiveRun) -> dict[str, Any]:
    """nccl-tests' names: ``allreduce_busbw_gb_s`` ... beside each row, and the catalog's link for the GPUs."""
    out: dict[str, Any] = {"ranks": run.ranks, "backend": run.backend, "device": run.device,
                           "catalog_id": run.catalog_id, "link": run.link, "link_nominal_gb_s": run.link_nominal_gb_s,
                           "link_achieved_gb_s": run.link_achieved_gb_s, "results": []}
    for r in run.results:
        key = r.op.replace("_", "")
        out[f"{key}_busbw_gb_s"] = round(r.busbw_gb_s, 3)
        out["results"].append({"op": r.op, "size_bytes": r.size_bytes, "time_us": round(r.seconds * 1e6, 1),
                               "algbw_gb_s": round(r.algbw_gb_s, 3), "busbw_gb_s": round(r.busbw_gb_s, 3),
                               "percent_of_link": None if not run.link_achieved_gb_s else
                               round(100 * r.busbw_gb_s / run.link_achieved_gb_s, 1)})
    return out


def collective_view(run: CollectiveRun) -> Table:
    link = (f"{run.link}: {run.link_achieved_gb_s:,.0f} GB/s typically measured, {run.link_nominal_gb_s:,.0f} "
            "nominal per direction" if run.link and run.link_achieved_gb_s and run.link_nominal_gb_s
            else "no catalog link to compare with")
    table = Table(title=f"{run.ranks} x {run.device} over {run.backend} ({link})", title_justify="left")
    for header in ("collective", "size", "time", "algbw GB/s", "busbw GB/s", "% of link"):
        table.add_column(header, justify="left" if header == "collective" else "right")
    for row in collective_json(run)["results"]:
        table.add_row(row["op"], f"{row['size_bytes'] / 2**20:,.0f} MiB", f"{row['time_us']:,.0f} us",
                      f"{row['algbw_gb_s']:,.2f}", f"{row['busbw_gb_s']:,.2f}",
                      "—" if row["percent_of_link"] is None else f"{row['percent_of_link']:.0f}%")
    return table
