"""The real card through the public API: doctor, bench, burn-in and monitor, each returning results.

NVML and torch are reached only through ``gpuwise.probe`` (its one door to the hardware); files are written only
after the work they record has succeeded, and atomically.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpuwise.api.catalog import CatalogFiles, load_catalog
from gpuwise.errors import ConfigError
from gpuwise.flags import build
from gpuwise.safe_io import check_writable

if TYPE_CHECKING:  # the probe modules load when a hardware command runs, not when gpuwise is imported
    from gpuwise.probe.bench import BenchRun
    from gpuwise.probe.burnin import BurnInResult
    from gpuwise.probe.checks import Report
    from gpuwise.probe.collective import CollectiveResult
    from gpuwise.probe.monitor import Round


def node_stamp() -> tuple[str, str]:
    """This node's name and the time now (ISO 8601, UTC, seconds): what bench and burn-in results carry."""
    import socket
    from datetime import datetime, timezone

    return socket.gethostname()[:255], datetime.now(timezone.utc).isoformat(timespec="seconds")


def doctor(*, snapshot_file: Path | str | None = None, save_snapshot: Path | str | None = None,
           catalog_files: CatalogFiles = (), **settings: object) -> Report:
    """Check this machine's GPUs (or a saved snapshot, or a saved `doctor --json` report, shown as recorded).
    ``save_snapshot`` writes what the checks read, once they have run. ``settings``: load_seconds."""
    from gpuwise.probe.backend import RecordedReport, read_machine, read_snapshot, write_snapshot
    from gpuwise.probe.checks import recorded_report, run_checks
    from gpuwise.probe.settings import DoctorSettings

    chosen = build(DoctorSettings, settings)
    target = Path(save_snapshot) if save_snapshot is not None else None
    if target is not None:
        check_writable(target, what="snapshot")
    catalog = load_catalog(catalog_files=catalog_files)
    if snapshot_file is None:
        snapshot = read_machine(load_seconds=chosen.load_seconds)
    else:
        try:
            snapshot = read_snapshot(Path(snapshot_file))
        except RecordedReport as recorded:
            if target is not None:
                raise ConfigError(f"{snapshot_file}: a doctor report without its readings has no snapshot to save"
                                  ) from None
            return recorded_report(recorded.document, origin=str(snapshot_file))
    report = run_checks(snapshot, catalog)
    if target is not None:
        write_snapshot(snapshot, target)
    return report


def bench(*, save: Path | str | None = None, catalog_files: CatalogFiles = (), **settings: object) -> BenchRun:
    """Measure the card (GEMM per dtype, memory, host links, peers) against the catalog; ``save`` writes the
    calibration record `estimate --calibration` reads. ``settings``: device, quick, gpu."""
    from gpuwise.probe import bench as probe
    from gpuwise.probe.bench import BenchRun
    from gpuwise.probe.checks import match_catalog
    from gpuwise.probe.settings import BenchSettings

    chosen = build(BenchSettings, settings)
    target = Path(save) if save is not None else None
    if target is not None:
        check_writable(target, what="calibration record")
    catalog = load_catalog(catalog_files=catalog_files)
    named = catalog.gpu(chosen.gpu) if chosen.gpu else None  # an unknown --gpu is bad input, whatever the machine
    name, memory_mib, driver, torch_version = probe.device_identity(chosen.device)
    card = named or match_catalog(name, memory_mib, catalog)[0]
    link = catalog.interconnects.get(card.native_link) if card else None
    host, started = node_stamp()
    results = probe.run(card, device=chosen.device, quick=chosen.quick, link_gb_s=link.nominal_gb_s if link else None)
    record = probe.calibration_record(name, card.id if card else None, driver, torch_version, results, host=host,
                                      taken_at=started)
    if target is not None:
        record.save(target)
    return BenchRun(name, card.id if card else None, tuple(results), record, host, started)


def burn_in(*, timeline: Path | str | None = None, **settings: object) -> BurnInResult:
    """Sustained GEMM + memory pattern test with 1 s telemetry; ``timeline`` (.csv or .html) records the samples.
    ``settings``: minutes, device."""
    from gpuwise.probe import burnin
    from gpuwise.probe.settings import BurnInSettings

    chosen = build(BurnInSettings, settings)
    target = Path(timeline) if timeline is not None else None
    if target is not None:
        check_writable(target, what="timeline")
    host, started = node_stamp()
    result = replace(burnin.on_gpu(seconds=chosen.minutes * 60, device=chosen.device), host=host, taken_at=started)
    if target is not None:
        burnin.write_timeline(result, target)
    return result


def monitor(**settings: object) -> Iterator[Round]:
    """Readings of every GPU, round by round (``interval`` seconds apart, ``count`` rounds; 0: until stopped)."""
    from gpuwise.probe.monitor import rounds
    from gpuwise.probe.settings import MonitorSettings

    chosen = build(MonitorSettings, settings)
    return rounds(interval_s=chosen.interval, count=chosen.count)


def exporter_reader(*, snapshot_file: Path | str | None = None, bench_file: Path | str | None = None,
                    catalog_files: CatalogFiles = ()) -> Callable[[], tuple[Report, dict[str, float]]]:
    """What `gpuwise exporter` serves at each scrape: the doctor report of this machine (or of a recorded snapshot,
    read once: a replay does not change; a `doctor --json` report without readings gives its recorded checks and
    no gauges) and the ratios measured / catalog of a saved bench. Bad files fail here, before any server starts."""
    from gpuwise.api.fleet import bench_values, read_json_file
    from gpuwise.probe.backend import RecordedReport, read_machine, read_snapshot
    from gpuwise.probe.checks import recorded_report, run_checks

    catalog = load_catalog(catalog_files=catalog_files)
    document = None
    if bench_file is not None:
        document = read_json_file(Path(bench_file), "bench result")
        if document is None:
            raise ConfigError(f"--bench {str(bench_file)!r}: no such file (write one with `gpuwise bench --json`)")

    def ratios(report: Report) -> dict[str, float]:
        if document is None:
            return {}
        named = document.get("catalog_id")
        card = named if isinstance(named, str) and named else next(
            (i.catalog_id for i in report.inventory if i.catalog_id), None)
        return {k: v / ref for k, (v, ref) in bench_values(document, card, catalog).items() if ref}

    if snapshot_file is not None:
        try:
            replay = run_checks(read_snapshot(Path(snapshot_file)), catalog)
        except RecordedReport as recorded:  # a report without readings: its checks as recorded, no gauges
            replay = recorded_report(recorded.document, origin=str(snapshot_file))
        replayed = ratios(replay)
        return lambda: (replay, replayed)

    def live() -> tuple[Report, dict[str, float]]:
        report = run_checks(read_machine(load_seconds=0.0), catalog)
        return report, ratios(report)

    return live


def bench_collective(*, catalog_files: CatalogFiles = (), **settings: object) -> CollectiveRun:
    """All-reduce, all-gather and reduce-scatter bus bandwidth over ``nproc`` processes started by torch.distributed's
    launcher, with the catalog's link figures for these GPUs beside them (none on CPU). ``settings``: nproc,
    backend, size_mb, iterations, gpu."""
    from gpuwise.probe.checks import match_catalog
    from gpuwise.probe.collective import CollectiveResult, launch
    from gpuwise.probe.settings import CollectiveSettings

    chosen = build(CollectiveSettings, settings)
    catalog = load_catalog(catalog_files=catalog_files)
    named = catalog.gpu(chosen.gpu) if chosen.gpu else None  # an unknown --gpu fails before anything starts
    data = launch(nproc=chosen.nproc, backend=chosen.backend, size_mb=chosen.size_mb, iterations=chosen.iterations)
    device = str(data.get("device", "cpu"))
    card = named or (match_catalog(device, None, catalog)[0] if chosen.backend == "nccl" else None)
    link = catalog.interconnects.get(card.native_link) if card is not None and card.native_link else None
    rows = tuple(CollectiveResult(**r) for r in data.get("results", []))
    return CollectiveRun(int(data.get("ranks", chosen.nproc)), chosen.backend, device, card.id if card else None,
                         link.id if link else None, link.nominal_gb_s if link else None,
                         link.achieved_gb_s if link else None, rows)


@dataclass(frozen=True)
class CollectiveRun:
    ranks: int
    backend: str
    device: str
    catalog_id: str | None
    link: str | None
    link_nominal_gb_s: float | None
    link_achieved_gb_s: float | None  # what a collective benchmark typically measures on that link (catalog)
    results: tuple[CollectiveResult, ...]
