"""A fleet: one folder per node of `doctor --json`, `bench --json` (or `bench --save`) and `burn-in --json`, judged
against the catalog and against the fleet's own median of the same GPU model; and the readings the Prometheus
exporter serves.

A node is an outlier where it stands apart: a bench figure under the datasheet's pass line (the same lines `bench`
uses), a figure 10 % or more below the median of the nodes with its GPU model (20 % or more: FAIL), a doctor
check that fails, a burn-in that did not pass. A doctor WARN that every node shares (one PCIe replay each, say) is a
condition of the fleet, listed once under ``fleet_findings``, not an outlier of each node.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuwise.api.catalog import CatalogFiles, load_catalog
from gpuwise.catalog import GPU, Catalog
from gpuwise.errors import ConfigError
from gpuwise.probe.bench import GEMM_FAIL, GEMM_PASS, LINK_FAIL, LINK_PASS, MEMORY_FAIL, MEMORY_PASS
from gpuwise.safe_io import parse_json, read_text

MAX_NODES = 10_000
MAX_NODE_FILE_BYTES = 20_000_000
FLEET_WARN_SHORTFALL = 0.10  # gpuwise policy: a tenth below its peers is more than run-to-run noise (bench repeats
FLEET_FAIL_SHORTFALL = 0.20  # vary by a few percent on one card); a fifth below is a node that slows a whole job
_PASS_LINES = {"gemm": (GEMM_PASS, GEMM_FAIL), "memory": (MEMORY_PASS, MEMORY_FAIL), "h2d": (LINK_PASS, LINK_FAIL),
               "d2h": (LINK_PASS, LINK_FAIL)}  # the lines `bench` itself judges by


@dataclass(frozen=True)
class Outlier:
    metric: str  # a bench metric (gemm_fp16 ...), a doctor check id, burn_in, pcie_width
    severity: str  # WARN or FAIL
    against: str  # catalog, fleet, doctor or burn-in
    value: float | None
    reference: float | None
    detail: str


@dataclass(frozen=True)
class Node:
    name: str
    gpu_model: str
    host: str | None
    taken_at: str | None
    values: Mapping[str, float]
    outliers: tuple[Outlier, ...] = ()

    @property
    def verdict(self) -> str:
        severities = {o.severity for o in self.outliers}
        return "FAIL" if "FAIL" in severities else ("WARN" if severities else "PASS")


@dataclass(frozen=True)
class FleetReport:
    nodes: tuple[Node, ...]
    medians: Mapping[str, Mapping[str, float]]  # GPU model -> metric -> median over its nodes
    fleet_findings: tuple[str, ...] = field(default=())


def read_json_file(path: Path, what: str) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    data = parse_json(read_text(path, what=what, max_bytes=MAX_NODE_FILE_BYTES), origin=str(path))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a gpuwise {what} (a JSON object)")
    return data


def bench_values(document: Mapping[str, Any], card_id: str | None, catalog: Catalog) -> dict[str, tuple[float,
                                                                                                         float | None]]:
    """metric -> (measured, catalog figure) from `bench --json` (its results) or `bench --save` (a calibration
    record: GEMM TFLOPS per dtype and copy bandwidth). A figure the file lacks (a card bench could not match) is
    taken from the catalog record of ``card_id``."""
    measured: dict[str, tuple[float, float | None]] = {}
    if isinstance(document.get("results"), list):
        for r in document["results"][:1000]:
            value = _positive(r.get("value")) if isinstance(r, dict) else None
            if value is not None and isinstance(r.get("metric"), str):
                measured[r["metric"][:60]] = (value, _positive(r.get("reference")))
    gemm = document.get("gemm_tflops")
    for dtype, rate in (gemm.items() if isinstance(gemm, dict) else ()):
        if (value := _positive(rate)) is not None:
            measured[f"gemm_{dtype}"[:60]] = (value, None)
    if (copy := _positive(document.get("memory_gb_s"))) is not None:
        measured["memory_copy"] = (copy, None)
    card = catalog.gpus.get(card_id) if isinstance(card_id, str) else None
    return {k: (v, ref if ref is not None else _reference(k, card, catalog)) for k, (v, ref) in measured.items()}


def _positive(value: object) -> float | None:
    """A measurement from a file: a finite number above zero (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 < value < 1e15 else None


def _reference(metric: str, card: GPU | None, catalog: Catalog) -> float | None:
    """The datasheet figure `bench` compares ``metric`` with (probe/bench.py ``run``)."""
    if card is None:
        return None
    kind, _, rest = metric.partition("_")
    if kind == "gemm" and rest in ("fp32", "tf32", "fp16", "bf16", "fp8", "int8"):
        peak = card.peak_flops(rest)  # type: ignore[arg-type]
        return peak / 1e12 if peak else None
    if kind == "memory":
        return card.memory_bandwidth_gb_s
    link = catalog.interconnects.get(card.native_link) if card.native_link else None
    return link.nominal_gb_s if link is not None and metric in ("h2d_pinned", "d2h_pinned") else None


def _catalog_outliers(values: Mapping[str, tuple[float, float | None]]) -> list[Outlier]:
    out = []
    for metric, (value, reference) in values.items():
        lines = _PASS_LINES.get(metric.split("_")[0])
        if lines is None or not reference:
            continue
        ratio = value / reference
        if ratio < lines[0]:
            severity = "FAIL" if ratio < lines[1] else "WARN"
            out.append(Outlier(metric, severity, "catalog", value, reference,
                               f"{ratio:.0%} of the datasheet's {reference:,.1f} (bench passes at {lines[0]:.0%})"))
    return out


def _doctor_findings(doctor: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(check id, status, measured) of every WARN or FAIL check."""
    checks = doctor.get("checks")
    found = []
    for c in (checks if isinstance(checks, list) else [])[:10_000]:
        if isinstance(c, dict) and c.get("status") in ("WARN", "FAIL"):
            gpu = c.get("gpu")
            found.append((f"{c.get('id')}" + ("" if gpu is None else f"[gpu {gpu}]"), str(c["status"]),
                          str(c.get("measured", ""))[:200]))
    return found


def _model(doctor: Mapping[str, Any] | None, bench: Mapping[str, Any] | None) -> str:
    inventory = (doctor or {}).get("inventory")
    if isinstance(inventory, list) and inventory and isinstance(inventory[0], dict):
        return str(inventory[0].get("catalog_id") or inventory[0].get("name") or "unknown")[:100]
    return str((bench or {}).get("catalog_id") or (bench or {}).get("device") or (bench or {}).get("gpu")
               or "unknown")[:100]


@dataclass
class _Raw:
    name: str
    doctor: dict[str, Any] | None
    bench: dict[str, Any] | None
    burn_in: dict[str, Any] | None
    validated: list[dict[str, Any]] = field(default_factory=list)


MAX_VALIDATE_FILES = 100
VALIDATE_PREFIX = "validate "  # a metric from a `validate --save` record: the job's steps per second


def _validate_records(folder: Path) -> list[dict[str, Any]]:
    """The node's `validate --save` records (validate*.json), at most MAX_VALIDATE_FILES."""
    found = []
    for path in sorted(folder.glob("validate*.json"))[:MAX_VALIDATE_FILES]:
        doc = read_json_file(path, "validate record")
        if doc is not None and doc.get("kind") == "gpuwise-validate":
            found.append(doc)
    return found


def validate_values(records: list[dict[str, Any]]) -> dict[str, tuple[float, float | None]]:
    """metric -> (steps per second, None) per job a node validated: the same model, job class and settings on the
    same card compare across nodes (a step time far above the median is a slow node)."""
    values: dict[str, tuple[float, float | None]] = {}
    for doc in records:
        measured: dict[str, Any] = doc["measured"] if isinstance(doc.get("measured"), dict) else {}
        step = _positive(measured.get("step_s"))
        job: dict[str, Any] = doc["job"] if isinstance(doc.get("job"), dict) else {}
        shape = "x".join(str(job.get(k)) for k in ("batch", "seq", "input_len", "output_len") if job.get(k))
        if step is not None:
            key = f"{VALIDATE_PREFIX}{str(doc.get('model'))[:60]} {str(doc.get('job_class'))[:20]} {shape[:40]}"
            values[key] = (1 / step, None)
    return values


def _nodes(directory: Path) -> list[_Raw]:
    if not directory.is_dir():
        raise ConfigError(f"{directory}: not a folder; give a folder with one subfolder per node, each holding "
                          "doctor.json, bench.json and optionally burnin.json")
    folders = sorted(p for p in directory.iterdir() if p.is_dir())[:MAX_NODES + 1]
    if len(folders) > MAX_NODES:
        raise ConfigError(f"{directory}: more than {MAX_NODES:,} node folders; report on a part of the fleet")
    raw = [_Raw(f.name, read_json_file(f / "doctor.json", "doctor report"),
                read_json_file(f / "bench.json", "bench result"), read_json_file(f / "burnin.json", "burn-in result"),
                _validate_records(f))
           for f in folders]
    raw = [r for r in raw if r.doctor is not None or r.bench is not None or r.validated]
    if not raw:
        raise ConfigError(f"{directory}: no node folder holds doctor.json, bench.json or validate*.json (write them "
                          "with `gpuwise doctor --json > NODE/doctor.json`, `gpuwise bench --json > NODE/bench.json`, "
                          "`gpuwise validate ... --save NODE/validate.json`)")
    return raw


def fleet_report(directory: Path | str, *, catalog_files: CatalogFiles = ()) -> FleetReport:
    """Judge every node folder under ``directory`` against the catalog and against its GPU model's median."""
    catalog = load_catalog(catalog_files=catalog_files)
    raw = _nodes(Path(directory))
    models = {r.name: _model(r.doctor, r.bench or (r.validated[0] if r.validated else None)) for r in raw}
    values = {r.name: bench_values(r.bench, models[r.name], catalog) if r.bench else {} for r in raw}
    for r in raw:
        values[r.name].update(validate_values(r.validated))
    for r in raw:
        if (ratio := _positive((r.burn_in or {}).get("clock_ratio"))) is not None:
            values[r.name]["burn_in_clock_ratio"] = (ratio, None)
    medians: dict[str, dict[str, float]] = {}
    for model in sorted(set(models.values())):
        members = [values[n] for n, m in models.items() if m == model]
        metrics = sorted({k for v in members for k in v})
        medians[model] = {k: statistics.median(v[k][0] for v in members if k in v) for k in metrics}
    findings = {r.name: _doctor_findings(r.doctor) if r.doctor else [] for r in raw}
    shared = set.intersection(*({(c, s) for c, s, _ in f} for f in findings.values())) if len(raw) > 1 else set()
    nodes = [_judge(r, models[r.name], values[r.name], medians[models[r.name]], findings[r.name], shared) for r in raw]
    fleet = tuple(f"{check} {status} on every node" for check, status in sorted(shared) if status == "WARN")
    return FleetReport(tuple(nodes), medians, fleet)


def _judge(raw: _Raw, model: str, values: Mapping[str, tuple[float, float | None]], medians: Mapping[str, float],
           findings: list[tuple[str, str, str]], shared: set[tuple[str, str]]) -> Node:
    outliers = _catalog_outliers(values)
    for metric, (value, _) in values.items():
        median = medians.get(metric)
        if median and value < median * (1 - FLEET_WARN_SHORTFALL):
            short = 1 - value / median
            detail = (f"step {1 / value:,.3f} s against the {model} nodes' median {1 / median:,.3f} s "
                      f"({short:.0%} fewer steps per second)" if metric.startswith(VALIDATE_PREFIX) else
                      f"{short:.0%} below the median of the {model} nodes ({median:,.1f})")
            outliers.append(Outlier(metric, "FAIL" if short >= FLEET_FAIL_SHORTFALL else "WARN", "fleet", value,
                                    median, detail))
    for check, status, measured in findings:
        if status == "FAIL" or (check, status) not in shared:
            outliers.append(Outlier(check, status, "doctor", None, None, measured))
    burned = (raw.burn_in or {}).get("status")
    if burned not in (None, "PASS"):
        reasons = (raw.burn_in or {}).get("reasons")
        outliers.append(Outlier("burn_in", "FAIL", "burn-in", None, None,
                                "; ".join(map(str, reasons))[:300] if isinstance(reasons, list) else str(burned)))
    doc = raw.doctor or raw.bench or (raw.validated[0] if raw.validated else {})
    return Node(raw.name, model, _text(doc.get("host")), _text(doc.get("taken_at")),
                {k: v for k, (v, _) in values.items()}, tuple(outliers))


def _text(value: object) -> str | None:
    return str(value)[:200] if isinstance(value, str) else None
