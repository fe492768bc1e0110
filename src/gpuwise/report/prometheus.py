"""One machine as Prometheus metrics: what NVML reads (the doctor snapshot), every doctor check, and the last
bench's ratios to the catalog.

Names follow dcgm-exporter's where a metric means the same (its default counters file,
``etc/default-counters.csv``), with the ``gpuwise_`` prefix and Prometheus base units in the name, so both
exporters can run side by side on one node. ``DCGM_EQUIVALENT`` is that mapping; the README prints it.
Every GPU series carries ``gpu`` (index), ``uuid``, ``catalog_id`` and ``hostname``. A reading the driver did not
give is left out (no series), never exported as 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric

from gpuwise.api.reporting import DoctorReport, GpuReading

GPU_LABELS = ("gpu", "uuid", "catalog_id", "hostname")
STATUS_VALUE = {"PASS": 0, "WARN": 1, "FAIL": 2, "N/A": 3}

# gpuwise metric -> (help, what it reads from a GpuReading, the dcgm-exporter field that means the same or "")
_GAUGES: dict[str, tuple[str, Callable[[GpuReading], float | None], str]] = {
    "gpuwise_gpu_temperature_celsius": ("GPU temperature.", lambda g: g.temperature_c, "DCGM_FI_DEV_GPU_TEMP"),
    "gpuwise_power_usage_watts": ("Power draw.", lambda g: g.power_usage_w, "DCGM_FI_DEV_POWER_USAGE"),
    "gpuwise_power_limit_watts": ("Enforced power limit.", lambda g: g.power_limit_w,
                                  "DCGM_FI_DEV_POWER_MGMT_LIMIT"),
    "gpuwise_power_default_limit_watts": ("Default power limit.", lambda g: g.power_default_limit_w, ""),
    "gpuwise_sm_clock_hertz": ("SM clock.", lambda g: _mhz(g.sm_clock_mhz), "DCGM_FI_DEV_SM_CLOCK (MHz)"),
    "gpuwise_sm_max_clock_hertz": ("Maximum SM clock.", lambda g: _mhz(g.sm_max_clock_mhz), ""),
    "gpuwise_gpu_utilization_ratio": ("Share of the last sample period a kernel ran (NVML utilization.gpu).",
                                      lambda g: _share(g.utilization_gpu_percent), "DCGM_FI_DEV_GPU_UTIL (%)"),
    "gpuwise_memory_used_bytes": ("Device memory in use.", lambda g: _mib(g.memory_used_mib),
                                  "DCGM_FI_DEV_FB_USED (MiB)"),
    "gpuwise_memory_total_bytes": ("Device memory.", lambda g: _mib(g.memory_total_mib), ""),
    "gpuwise_pcie_link_gen": ("PCIe generation the link trained at.", lambda g: g.pcie_gen_current, ""),
    "gpuwise_pcie_link_gen_max": ("Highest PCIe generation of the GPU and its slot.", lambda g: g.pcie_gen_max, ""),
    "gpuwise_pcie_link_width": ("PCIe lanes the link trained at.", lambda g: g.pcie_width_current, ""),
    "gpuwise_pcie_link_width_max": ("Most PCIe lanes of the GPU and its slot.", lambda g: g.pcie_width_max, ""),
    "gpuwise_pcie_replay_total": ("PCIe replays since the driver loaded.", lambda g: g.pcie_replay_counter,
                                  "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"),
    "gpuwise_ecc_uncorrected_volatile_total": ("Uncorrected ECC errors since the driver loaded.",
                                               lambda g: g.ecc_volatile_uncorrected, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"),
    "gpuwise_ecc_uncorrected_aggregate_total": ("Uncorrected ECC errors over the card's life.",
                                                lambda g: g.ecc_aggregate_uncorrected, "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"),
    "gpuwise_ecc_corrected_aggregate_total": ("Corrected ECC errors over the card's life.",
                                              lambda g: g.ecc_aggregate_corrected, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL"),
    "gpuwise_retired_pages_sbe": ("Pages retired for single-bit errors (pre-Ampere).",
                                  lambda g: g.retired_pages_sbe, "DCGM_FI_DEV_RETIRED_SBE"),
    "gpuwise_retired_pages_dbe": ("Pages retired for double-bit errors (pre-Ampere).",
                                  lambda g: g.retired_pages_dbe, "DCGM_FI_DEV_RETIRED_DBE"),
    "gpuwise_remapped_rows_correctable": ("Rows remapped for correctable errors (Ampere+).",
                                          lambda g: g.remapped_rows_correctable,
                                          "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"),
    "gpuwise_remapped_rows_uncorrectable": ("Rows remapped for uncorrectable errors (Ampere+).",
                                            lambda g: g.remapped_rows_uncorrectable,
                                            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"),
    "gpuwise_row_remap_pending": ("A row remap waits for a GPU reset (1) or not (0).",
                                  lambda g: _flag(g.remapped_rows_pending), ""),
    "gpuwise_row_remap_failure": ("A row remap failed (1): the card needs service.",
                                  lambda g: _flag(g.remapped_rows_failure), "DCGM_FI_DEV_ROW_REMAP_FAILURE"),
    "gpuwise_xid_last": ("The last Xid the driver logged for this GPU, when readable.", lambda g: g.xid_last,
                         "DCGM_FI_DEV_XID_ERRORS"),
}
DCGM_EQUIVALENT = {name: dcgm for name, (_, _, dcgm) in _GAUGES.items() if dcgm}
THROTTLE_REASONS = ("gpu_idle", "sw_power_cap", "hw_slowdown", "sync_boost", "sw_thermal", "hw_thermal",
                    "hw_power_brake", "applications_clocks")


def _mhz(value: float | None) -> float | None:
    return None if value is None else value * 1e6


def _mib(value: float | None) -> float | None:
    return None if value is None else value * 2**20


def _share(percent: float | None) -> float | None:
    return None if percent is None else percent / 100


def _flag(value: bool | None) -> float | None:
    return None if value is None else float(value)


def families(report: DoctorReport, bench_ratios: Mapping[str, float] | None = None) -> list[Metric]:
    """Every gauge of the machine ``report`` read, its checks' statuses, and ``bench_ratios`` (metric -> measured /
    catalog) of its last bench."""
    host = report.snapshot.host or ""
    catalog = {i.index: i.catalog_id or "" for i in report.inventory}
    labels = {i.index: [str(i.index), i.uuid or "", i.catalog_id or "", host] for i in report.inventory}
    labels.update({g.index: [str(g.index), g.uuid or "", catalog.get(g.index, ""), host] for g in report.snapshot.gpus})
    out: list[Metric] = [_info(report, labels)]
    for name, (help_text, read, _) in _GAUGES.items():
        family = GaugeMetricFamily(name, help_text, labels=GPU_LABELS)
        for g in report.snapshot.gpus:
            value = read(g)
            if value is not None:
                family.add_metric(labels[g.index], float(value))
        out.append(family)
    out += [_throttle(report, labels), _checks(report, host, labels)]
    if bench_ratios:
        out.append(_bench(bench_ratios, host))
    return out


def _info(report: DoctorReport, labels: Mapping[int, list[str]]) -> Metric:
    s = report.snapshot
    family = GaugeMetricFamily("gpuwise_gpu_info", "Always 1: the GPU's name and the driver, as labels.",
                               labels=(*GPU_LABELS, "name", "driver_version"))
    for g in s.gpus:
        family.add_metric([*labels[g.index], g.name, s.driver_version or ""], 1.0)
    return family


def _throttle(report: DoctorReport, labels: Mapping[int, list[str]]) -> Metric:
    family = GaugeMetricFamily("gpuwise_clock_event_active", "1 while NVML reports this clock-event (throttle) "
                               "reason; dcgm-exporter packs them into DCGM_FI_DEV_CLOCK_THROTTLE_REASONS.",
                               labels=(*GPU_LABELS, "reason"))
    for g in report.snapshot.gpus:
        if g.clock_event_reasons is not None:
            for reason in THROTTLE_REASONS:
                family.add_metric([*labels[g.index], reason], float(reason in g.clock_event_reasons))
    return family


def _checks(report: DoctorReport, host: str, labels: Mapping[int, list[str]]) -> Metric:
    family = GaugeMetricFamily("gpuwise_check_status", "Each doctor check: 0 pass, 1 warn, 2 fail, 3 n/a.",
                               labels=(*GPU_LABELS, "check"))
    for c in report.checks:
        where = labels.get(c.gpu, ["", "", "", host]) if c.gpu is not None else ["", "", "", host]
        family.add_metric([*where, c.id], float(STATUS_VALUE[c.status]))
    return family


def _bench(ratios: Mapping[str, float], host: str) -> Metric:
    family = GaugeMetricFamily("gpuwise_bench_ratio", "The last `gpuwise bench`: measured / the catalog's figure.",
                               labels=("metric", "hostname"))
    for metric, ratio in sorted(ratios.items()):
        family.add_metric([metric, host], ratio)
    return family


class Collector:
    """A prometheus_client collector that reads the machine afresh at each scrape (``read`` returns the report and
    the bench ratios), at most once per ``min_interval_s``: a scrape storm does not hammer NVML."""

    def __init__(self, read: Callable[[], tuple[DoctorReport, Mapping[str, float] | None]], min_interval_s: float,
                 clock: Callable[[], float]) -> None:
        self._read, self._interval, self._clock = read, min_interval_s, clock
        self._cached: list[Metric] | None = None
        self._at = -1e18

    def collect(self) -> Iterable[Any]:
        now = self._clock()
        if self._cached is None or now - self._at >= self._interval:
            report, ratios = self._read()
            self._cached, self._at = families(report, ratios), now
        return list(self._cached)
