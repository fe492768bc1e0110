"""The fleet report as JSON, a table and a self-contained HTML page (plotly bundled: one chart per metric across
the nodes, the median of each GPU model drawn as a line)."""

from __future__ import annotations

import html
from dataclasses import asdict
from typing import Any

from rich.table import Table

from gpuwise.api.fleet import FleetReport

_STYLE = {"PASS": "green", "WARN": "yellow", "FAIL": "bold red"}


def fleet_json(report: FleetReport) -> dict[str, Any]:
    return {
        "schema": "gpuwise.fleet/1",
        "nodes": [{"name": n.name, "verdict": n.verdict, "gpu_model": n.gpu_model, "host": n.host,
                   "taken_at": n.taken_at, "values": dict(n.values),
                   "outliers": [asdict(o) for o in n.outliers]} for n in report.nodes],
        "medians": {model: dict(m) for model, m in report.medians.items()},
        "fleet_findings": list(report.fleet_findings),
        "summary": {v: sum(n.verdict == v for n in report.nodes) for v in ("PASS", "WARN", "FAIL")},
    }


def fleet_view(report: FleetReport) -> Table:
    table = Table(title=f"{len(report.nodes)} nodes", title_justify="left")
    for header in ("node", "GPU", "verdict", "outliers"):
        table.add_column(header, overflow="fold")
    for n in report.nodes:
        style = _STYLE[n.verdict]
        why = "; ".join(f"{o.metric} ({o.against}): {o.detail}" for o in n.outliers) or "—"
        table.add_row(n.name, n.gpu_model, f"[{style}]{n.verdict}[/{style}]", why)
    if report.fleet_findings:
        table.caption = "fleet-wide: " + "; ".join(report.fleet_findings)
    return table


def fleet_html(report: FleetReport) -> str:
    """One page: the verdict table, then a bar chart per metric (one bar per node, red where it is an outlier)."""
    import plotly.graph_objects as go

    rows = "".join(
        f"<tr><td>{html.escape(n.name)}</td><td>{html.escape(n.gpu_model)}</td><td class='{n.verdict}'>{n.verdict}"
        f"</td><td>{html.escape('; '.join(f'{o.metric}: {o.detail}' for o in n.outliers) or '—')}</td></tr>"
        for n in report.nodes)
    charts = []
    flagged_metrics = {o.metric for n in report.nodes for o in n.outliers}
    metrics = sorted({k for n in report.nodes for k in n.values}, key=lambda k: (k not in flagged_metrics,
                                                                                 not k.startswith("gemm"), k))
    for i, metric in enumerate(metrics):
        nodes = [n for n in report.nodes if metric in n.values]
        flagged = {n.name for n in nodes for o in n.outliers if o.metric == metric}
        figure = go.Figure(go.Bar(x=[n.name for n in nodes], y=[n.values[metric] for n in nodes],
                                  marker_color=["#c0392b" if n.name in flagged else "#2e86c1" for n in nodes]))
        for model, medians in report.medians.items():
            if metric in medians:
                figure.add_hline(y=medians[metric], line_dash="dash", annotation_text=f"median {model}")
        figure.update_layout(title={"text": metric}, xaxis={"title": {"text": "node"}},
                             yaxis={"title": {"text": metric}}, height=320, margin={"t": 50, "b": 40})
        charts.append(figure.to_html(full_html=False, include_plotlyjs=(i == 0)))
    return ("<!doctype html><html><head><meta charset='utf-8'><title>gpuwise fleet report</title><style>"
            "body{font-family:sans-serif;margin:2em}td,th{padding:4px 10px;border-bottom:1px solid #ddd}"
            "td:nth-child(-n+3){white-space:nowrap}"
            ".PASS{color:#1e8449}.WARN{color:#b9770e}.FAIL{color:#c0392b;font-weight:bold}</style></head><body>"
            f"<h1>Fleet report: {len(report.nodes)} nodes</h1><table><tr><th>node</th><th>GPU</th><th>verdict</th>"
            f"<th>outliers</th></tr>{rows}</table>"
            + (f"<p>Fleet-wide: {html.escape('; '.join(report.fleet_findings))}</p>" if report.fleet_findings else "")
            + "".join(charts) + "</body></html>")
