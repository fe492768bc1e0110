"""Why did it fail: known error signatures in a log, weighed by doctor facts, with a memory plan for OOM logs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuwise.api.catalog import CatalogFiles, load_catalog
from gpuwise.errors import ConfigError, GpuwiseError
from gpuwise.workload.model.presets import hub_index

if TYPE_CHECKING:  # the knowledge base loads when a log is diagnosed, not when gpuwise is imported
    from gpuwise.troubleshoot.context import RunContext
    from gpuwise.troubleshoot.matcher import Match

MAX_LOG_CHARS = 50_000_000


@dataclass(frozen=True)
class Diagnosis:
    matches: tuple[Match, ...]
    checklist: tuple[str, ...]
    context: RunContext
    memory_advice: str | None = None


def _doctor_facts(report: object) -> dict[str, str]:
    """Worst status per check id in a `gpuwise doctor --json` document."""
    checks = report.get("checks") if isinstance(report, dict) else None
    if not isinstance(checks, list) or not all(isinstance(c, dict) for c in checks):
        raise ConfigError("the doctor report is not a `gpuwise doctor --json` document (an object whose 'checks' is "
                          "a list of {id, status, ...}); run `gpuwise doctor --json > report.json`")
    order = {"FAIL": 3, "WARN": 2, "PASS": 1, "N/A": 0}
    facts: dict[str, str] = {}
    for check in checks:
        cid, status = str(check.get("id"))[:100], str(check.get("status"))[:10]
        if order.get(status, 0) > order.get(facts.get(cid, "N/A"), 0):
            facts[cid] = status
    return facts


def _memory_advice(context: RunContext, catalog_files: CatalogFiles) -> str | None:
    from gpuwise.api.jobs import fit

    if context.model is None or (context.capacity_gib is None and context.gpu is None):
        return None
    cat = load_catalog(catalog_files=catalog_files)
    card = cat.gpus[context.gpu] if context.gpu else min(  # the card the log names, else one of its capacity
        cat.gpus.values(), key=lambda g: abs(g.memory_bytes / 2**30 - (context.capacity_gib or 0.0)))
    options: dict[str, Any] = {"method": context.method}
    if context.batch:
        options["batch"] = context.batch
    if context.seq:
        options["seq"] = context.seq
    try:
        report = fit(context.model, gpu=card.id, **options)
    except GpuwiseError:
        return None
    memory = report.estimate.memory
    capacity = context.capacity_gib or card.usable_memory_bytes / 2**30
    named = f"the log's {context.gpu_name}, {card.id}" if context.gpu else f"sized like a {card.id}"
    line = (f"{context.model} ({context.method}, batch {context.batch or 1}, seq {context.seq or 2048}) needs about "
            f"{memory.per_gpu_bytes / 2**30:,.1f} GiB per GPU; the card has {capacity:,.1f} GiB ({named})")
    if report.plan:
        line += f"; the smallest change that fits: {' '.join(report.plan)}"
    return line


def diagnose(text: str, *, doctor_report: Mapping[str, object] | None = None,
             catalog_files: CatalogFiles = ()) -> Diagnosis:
    """Known error signatures in a log, best first, with evidence; doctor facts confirm or rule out causes."""
    from gpuwise.troubleshoot.context import read_context
    from gpuwise.troubleshoot.matcher import GENERIC_CHECKLIST, diagnose_text

    if len(text) > MAX_LOG_CHARS:
        raise ConfigError(f"the log has {len(text):,} characters; diagnose reads at most {MAX_LOG_CHARS:,} (give "
                          "the part around the first error)")
    facts = _doctor_facts(dict(doctor_report)) if doctor_report is not None else None
    context = read_context(text, dict(hub_index()), lambda: load_catalog(catalog_files=catalog_files))
    matches = diagnose_text(text, facts=facts, oom=context.oom)  # the OOM message read once, by the context
    advice = None
    if any("oom" in m.entry.id or "out-of-memory" in m.entry.id for m in matches):
        advice = _memory_advice(context, catalog_files)
    return Diagnosis(tuple(matches), () if matches else GENERIC_CHECKLIST, context, advice)
