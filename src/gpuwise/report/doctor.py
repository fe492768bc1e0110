"""The doctor report: inventory and checks as a rich report and as stable JSON."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table

from gpuwise.api.reporting import DoctorReport, MonitorRound
from gpuwise.report.format import number

_STYLE = {"PASS": "green", "WARN": "yellow", "FAIL": "bold red", "N/A": "dim"}


def doctor_json(report: DoctorReport) -> dict[str, Any]:
    s = report.snapshot
    return {
        "schema": "gpuwise.doctor/1",
        "host": s.host, "taken_at": s.taken_at, "driver_version": s.driver_version,
        "cuda_driver_version": s.cuda_driver_version,
        "inventory": [i.__dict__ for i in report.inventory],
        "checks": [c.__dict__ for c in report.checks],
        "summary": {status: sum(1 for c in report.checks if c.status == status)
                    for status in ("PASS", "WARN", "FAIL", "N/A")},
        "exit_code": report.exit_code,
        **({} if report.recorded else {"snapshot": s.model_dump(mode="json")}),
    }


def doctor_view(report: DoctorReport) -> Group:
    s = report.snapshot
    inventory = Table(title=f"{s.host or 'this machine'}: driver {s.driver_version}, CUDA {s.cuda_driver_version}",
                      title_justify="left")
    for header in ("GPU", "name", "UUID", "VBIOS", "catalog"):
        inventory.add_column(header)
    for i in report.inventory:
        inventory.add_row(str(i.index), i.name, (i.uuid or "—")[:20], i.vbios or "—",
                          (i.catalog_id or "—") + (f" [dim]({i.catalog_note})[/dim]" if i.catalog_note else ""))
    checks = Table(title="checks", title_justify="left")
    for header in ("GPU", "check", "status", "measured", "expected", "fix"):
        checks.add_column(header, overflow="fold")
    for c in report.checks:
        style = _STYLE[c.status]
        checks.add_row("—" if c.gpu is None else str(c.gpu), c.id, f"[{style}]{c.status}[/{style}]", c.measured,
                       c.expected, c.fix)
    counts = doctor_json(report)["summary"]
    verdict = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
    parts: list[Any] = [inventory, checks, f"[bold]{verdict}[/bold] (N/A: the driver does not report it; never a "
                                              "pass)"]
    if report.recorded:
        parts.append(f"[dim]a saved report, shown as recorded on {s.taken_at or 'an unknown date'}: its checks were "
                     "not re-run (save a snapshot with --save-snapshot to re-check one)[/dim]")
    return Group(*parts)


def monitor_table(round_: MonitorRound) -> Table:
    """One round of `gpuwise monitor` as a table with a hint per GPU."""
    table = Table(title="gpuwise monitor (Ctrl-C to stop)", title_justify="left")
    for header in ("GPU", "util %", "memory MiB", "power W", "temp C", "SM MHz", "throttle", "hint"):
        table.add_column(header, overflow="fold")
    for r, hints in zip(round_.readings, round_.hints, strict=True):
        memory = f"{r.memory_used_mib:,.0f}/{r.memory_total_mib:,.0f}" if r.memory_total_mib and \
            r.memory_used_mib is not None else "—"
        power = f"{r.power_w:,.0f}/{r.power_limit_w:,.0f}" if r.power_w and r.power_limit_w else "—"
        table.add_row(f"{r.index} {r.name}", number(r.utilization_pct), memory, power, number(r.temperature_c),
                      number(r.sm_clock_mhz), ", ".join(r.reasons) or "—", "; ".join(hints) or "—")
    return table
