"""The real card through the public API: doctor, bench, burn-in and monitor, each returning results.

NVML and torch are reached only through ``gpuwise.probe`` (its one door to the hardware); files are written only
after the work they record has succeeded, and atomically.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from gpuwise.api.catalog import CatalogFiles, load_catalog
from gpuwise.errors import ConfigError
from gpuwise.safe_io import check_writable
from gpuwise.workload.flags import build

if TYPE_CHECKING:  # the probe modules load when a hardware command runs, not when gpuwise is imported
    from gpuwise.probe.bench import BenchRun
    from gpuwise.probe.burnin import BurnInResult
    from gpuwise.probe.checks import Report
    from gpuwise.probe.monitor import Round


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
    name, memory_mib, driver, torch_version = probe.device_identity(chosen.device)
    card = catalog.gpu(chosen.gpu) if chosen.gpu else match_catalog(name, memory_mib, catalog)[0]
    link = catalog.interconnects.get(card.native_link) if card else None
    results = probe.run(card, device=chosen.device, quick=chosen.quick, link_gb_s=link.nominal_gb_s if link else None)
    record = probe.calibration_record(name, card.id if card else None, driver, torch_version, results)
    if target is not None:
        record.save(target)
    return BenchRun(name, card.id if card else None, tuple(results), record)


def burn_in(*, timeline: Path | str | None = None, **settings: object) -> BurnInResult:
    """Sustained GEMM + memory pattern test with 1 s telemetry; ``timeline`` (.csv or .html) records the samples.
    ``settings``: minutes, device."""
    from gpuwise.probe import burnin
    from gpuwise.probe.settings import BurnInSettings

    chosen = build(BurnInSettings, settings)
    target = Path(timeline) if timeline is not None else None
    if target is not None:
        check_writable(target, what="timeline")
    result = burnin.on_gpu(seconds=chosen.minutes * 60, device=chosen.device)
    if target is not None:
        burnin.write_timeline(result, target)
    return result


def monitor(**settings: object) -> Iterator[Round]:
    """Readings of every GPU, round by round (``interval`` seconds apart, ``count`` rounds; 0: until stopped)."""
    from gpuwise.probe.monitor import rounds
    from gpuwise.probe.settings import MonitorSettings

    chosen = build(MonitorSettings, settings)
    return rounds(interval_s=chosen.interval, count=chosen.count)
