"""AMD GPUs through amdsmi (ROCm 6.x), read into the same snapshot as NVML so that the same checks apply.

Field mapping (research notes diagnostics.md sec. 2.6): amdsmi_get_gpu_asic_info -> name, amdsmi_get_pcie_info ->
pcie_static.max_pcie_width / max_pcie_speed and pcie_metric.pcie_width / pcie_speed / pcie_replay_count,
amdsmi_get_power_cap_info -> power limits (micro-watts), amdsmi_get_temp_metric -> edge/hotspot temperature and
the critical threshold, amdsmi_get_gpu_total_ecc_count -> ECC counts. Unsupported queries give None.
"""

from __future__ import annotations

from typing import Any

from gpuwise.probe.snapshot import GpuReading

_SPEED_TO_GEN = {2500: 1, 5000: 2, 8000: 3, 16000: 4, 32000: 5, 64000: 6}  # MT/s per lane -> PCIe generation


def _call(amd: Any, name: str, *args: Any) -> Any:
    func = getattr(amd, name, None)
    if func is None:
        return None
    try:
        return func(*args)
    except Exception:  # amdsmi raises AmdSmiLibraryException for unsupported queries
        return None


def _gen(speed: Any) -> int | None:
    return _SPEED_TO_GEN.get(int(speed)) if isinstance(speed, (int, float)) else None


def read_amd() -> tuple[GpuReading, ...]:
    """Every AMD GPU amdsmi sees; an empty tuple when amdsmi is not installed or finds none."""
    try:
        import amdsmi as amd
    except ImportError:
        return ()
    if _call(amd, "amdsmi_init") is None and not hasattr(amd, "amdsmi_get_processor_handles"):
        return ()
    handles = _call(amd, "amdsmi_get_processor_handles") or []
    readings = []
    for index, h in enumerate(handles):
        asic = _call(amd, "amdsmi_get_gpu_asic_info", h) or {}
        pcie = _call(amd, "amdsmi_get_pcie_info", h) or {}
        static, metric = pcie.get("pcie_static", {}), pcie.get("pcie_metric", {})
        power = _call(amd, "amdsmi_get_power_cap_info", h) or {}
        ecc = _call(amd, "amdsmi_get_gpu_total_ecc_count", h) or {}
        temp_type = getattr(getattr(amd, "AmdSmiTemperatureType", None), "HOTSPOT", None)
        metric_type = getattr(amd, "AmdSmiTemperatureMetric", None)
        current = getattr(metric_type, "CURRENT", None)
        critical = getattr(metric_type, "CRITICAL", None)
        readings.append(GpuReading(
            index=index, name=str(asic.get("market_name") or f"AMD GPU {index}"),
            pcie_width_current=metric.get("pcie_width"), pcie_gen_current=_gen(metric.get("pcie_speed")),
            pcie_width_max=static.get("max_pcie_width"), pcie_gen_max=_gen(static.get("max_pcie_speed")),
            sampled_under_load=False, pcie_replay_counter=metric.get("pcie_replay_count"),
            power_limit_w=power["power_cap"] / 1e6 if "power_cap" in power else None,
            power_default_limit_w=power["default_power_cap"] / 1e6 if "default_power_cap" in power else None,
            temperature_c=_call(amd, "amdsmi_get_temp_metric", h, temp_type, current),
            slowdown_c=_call(amd, "amdsmi_get_temp_metric", h, temp_type, critical),
            ecc_volatile_uncorrected=ecc.get("uncorrectable_count"),
            ecc_aggregate_corrected=ecc.get("correctable_count"),
        ))
    _call(amd, "amdsmi_shut_down")
    return tuple(readings)
