"""The one door to the hardware: NVML through nvidia-ml-py, or a recorded snapshot replayed from JSON.

Every NVML call goes through :func:`query`, which turns NotSupported, NoPermission and FunctionNotFound into
``None`` (the value is unknown, not zero). Nothing is imported or initialised before ``read_machine`` runs.
"""

from __future__ import annotations

import datetime as dt
import json
import platform
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gpuwise.errors import ConfigError, ProbeUnavailable
from gpuwise.probe.snapshot import GpuReading, PeerLink, Process, Snapshot, Software
from gpuwise.safe_io import atomic_write_text, parse_json, read_text

REASON_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
               0x10: "sync_boost", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake"}
COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}


MAX_SNAPSHOT_BYTES = 20_000_000
REPORT_SCHEMA = "gpuwise.doctor/1"


def read_snapshot(path: Path) -> Snapshot:
    """A snapshot saved by `doctor --save-snapshot`, or the one inside a `doctor --json` report."""
    data = parse_json(read_text(path, what="snapshot", max_bytes=MAX_SNAPSHOT_BYTES), origin=str(path))
    if isinstance(data, dict) and data.get("schema") == REPORT_SCHEMA:
        if "snapshot" not in data:
            raise RecordedReport(data)
        data = data["snapshot"]
    try:
        return Snapshot.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(snapshot)"
        raise ConfigError(f"{path}: field {where!r}: {str(err['msg']).removeprefix('Value error, ')}") from None


class RecordedReport(Exception):
    """A `doctor --json` report written without its snapshot: its checks can be shown as recorded, not re-run."""

    def __init__(self, document: dict[str, Any]) -> None:
        super().__init__("a doctor report without a snapshot")
        self.document = document


def write_snapshot(snapshot: Snapshot, path: Path) -> None:
    atomic_write_text(path, json.dumps(snapshot.model_dump(mode="json"), indent=2) + "\n", what="snapshot")


def query(nvml: Any, name: str, *args: Any) -> Any:
    """Call the NVML function ``name``; unsupported, forbidden or missing queries give None (nvitop's nvmlQuery)."""
    func: Callable[..., Any] | None = getattr(nvml, name, None)
    if func is None:  # not in this binding (old nvidia-ml-py) or removed from NVML
        return None
    try:
        return func(*args)
    except nvml.NVMLError:
        return None
    except TypeError:  # signature differs in this binding version
        return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def _sysfs_width(bus_id: str | None) -> int | None:
    """max_link_width of the port above the GPU (Linux sysfs), the honest slot width."""
    if not bus_id:
        return None
    device = Path("/sys/bus/pci/devices") / bus_id.lower()[-12:]
    try:
        upstream = device.resolve().parent / "max_link_width"
        return int(upstream.read_text().strip())
    except (OSError, ValueError):
        return None


def _reasons(mask: int | None) -> tuple[str, ...] | None:
    if mask is None:
        return None
    return tuple(name for bit, name in REASON_BITS.items() if mask & bit)


def _gpu(nvml: Any, index: int, under_load: bool) -> GpuReading:
    h = nvml.nvmlDeviceGetHandleByIndex(index)

    def q(name: str, *args: Any) -> Any:
        return query(nvml, name, h, *args)

    def const(name: str) -> Any:
        return getattr(nvml, name, 0)

    def mw(value: Any) -> float | None:
        return None if value is None else float(value) / 1000.0

    def ecc_count(kind: str, where: str) -> Any:
        return q("nvmlDeviceGetTotalEccErrors", const(kind), const(where))

    memory = q("nvmlDeviceGetMemoryInfo")
    pci = q("nvmlDeviceGetPciInfo")
    bus = _text(getattr(pci, "busId", None))
    ecc = q("nvmlDeviceGetEccMode")
    remap = q("nvmlDeviceGetRemappedRows")
    mig = q("nvmlDeviceGetMigMode")
    limits = q("nvmlDeviceGetPowerManagementLimitConstraints")
    procs = q("nvmlDeviceGetComputeRunningProcesses")
    reasons = q("nvmlDeviceGetCurrentClocksEventReasons") or q("nvmlDeviceGetCurrentClocksThrottleReasons")
    busy = q("nvmlDeviceGetUtilizationRates")
    return GpuReading(
        index=index, name=_text(q("nvmlDeviceGetName")) or f"GPU {index}", uuid=_text(q("nvmlDeviceGetUUID")),
        serial=_text(q("nvmlDeviceGetSerial")), vbios=_text(q("nvmlDeviceGetVbiosVersion")), pci_bus_id=bus,
        memory_total_mib=memory.total / 2**20 if memory else None,
        memory_used_mib=memory.used / 2**20 if memory else None,
        utilization_gpu_percent=float(busy.gpu) if busy else None,
        pcie_gen_current=q("nvmlDeviceGetCurrPcieLinkGeneration"),
        pcie_width_current=q("nvmlDeviceGetCurrPcieLinkWidth"),
        pcie_gen_max=q("nvmlDeviceGetMaxPcieLinkGeneration"), pcie_width_max=q("nvmlDeviceGetMaxPcieLinkWidth"),
        pcie_gen_gpu_max=q("nvmlDeviceGetGpuMaxPcieLinkGeneration"), upstream_width_max=_sysfs_width(bus),
        sampled_under_load=under_load,
        power_usage_w=mw(q("nvmlDeviceGetPowerUsage")), power_limit_w=mw(q("nvmlDeviceGetEnforcedPowerLimit")),
        power_default_limit_w=mw(q("nvmlDeviceGetPowerManagementDefaultLimit")),
        power_max_limit_w=mw(limits[1]) if limits else None,
        sm_clock_mhz=q("nvmlDeviceGetClockInfo", const("NVML_CLOCK_SM")),
        sm_max_clock_mhz=q("nvmlDeviceGetMaxClockInfo", const("NVML_CLOCK_SM")),
        clock_event_reasons=_reasons(reasons),
        temperature_c=q("nvmlDeviceGetTemperature", const("NVML_TEMPERATURE_GPU")),
        slowdown_c=q("nvmlDeviceGetTemperatureThreshold", const("NVML_TEMPERATURE_THRESHOLD_SLOWDOWN")),
        shutdown_c=q("nvmlDeviceGetTemperatureThreshold", const("NVML_TEMPERATURE_THRESHOLD_SHUTDOWN")),
        ecc_enabled=bool(ecc[0]) if ecc else None, ecc_pending=bool(ecc[1]) if ecc else None,
        ecc_volatile_uncorrected=ecc_count("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", "NVML_VOLATILE_ECC"),
        ecc_aggregate_uncorrected=ecc_count("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", "NVML_AGGREGATE_ECC"),
        ecc_aggregate_corrected=ecc_count("NVML_MEMORY_ERROR_TYPE_CORRECTED", "NVML_AGGREGATE_ECC"),
        remapped_rows_correctable=remap[0] if remap else None, remapped_rows_uncorrectable=remap[1] if remap else None,
        remapped_rows_pending=bool(remap[2]) if remap else None,
        remapped_rows_failure=bool(remap[3]) if remap else None,
        pcie_replay_counter=q("nvmlDeviceGetPcieReplayCounter"),
        persistence_mode=None if (p := q("nvmlDeviceGetPersistenceMode")) is None else bool(p),
        compute_mode=COMPUTE_MODES.get(q("nvmlDeviceGetComputeMode") or 0),
        mig_enabled=bool(mig[0]) if mig else None,
        processes=None if procs is None else tuple(
            Process(pid=p.pid, used_mib=(p.usedGpuMemory or 0) / 2**20) for p in procs),
    )


TOPOLOGY = {0: "nvlink", 10: "pix", 20: "pxb", 30: "phb", 40: "node", 50: "sys"}


def read_peers(nvml: Any, count: int) -> tuple[PeerLink, ...]:
    """Every GPU pair's path and whether peer-to-peer reads work (NVML P2P status index 0 = read)."""
    links = []
    for a in range(count):
        for b in range(a + 1, count):
            ha, hb = nvml.nvmlDeviceGetHandleByIndex(a), nvml.nvmlDeviceGetHandleByIndex(b)
            level = query(nvml, "nvmlDeviceGetTopologyCommonAncestor", ha, hb)
            status = query(nvml, "nvmlDeviceGetP2PStatus", ha, hb, 0)
            links.append(PeerLink(a=a, b=b, path=TOPOLOGY.get(level) if level is not None else None,
                                  p2p_read=None if status is None else status == 0))
    return tuple(links)


def read_software() -> Software:
    try:
        import torch
    except ImportError:
        return Software()
    cuda = getattr(torch.version, "cuda", None)
    available = bool(torch.cuda.is_available())
    nccl = None
    if available:
        try:
            nccl = ".".join(str(v) for v in torch.cuda.nccl.version())  # type: ignore[no-untyped-call,unused-ignore]
        except (RuntimeError, AttributeError):
            nccl = None
    return Software(torch_version=torch.__version__, torch_cuda=cuda, torch_hip=getattr(torch.version, "hip", None),
                    cuda_available=available, nccl_version=nccl,
                    arch_list=tuple(torch.cuda.get_arch_list()) if available else None)


def _load(seconds: float) -> threading.Thread | None:
    """A short matmul loop on every GPU so that PCIe links leave their idle power state while NVML samples."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None

    def spin() -> None:
        import time

        stop = time.perf_counter() + seconds
        tensors = [torch.randn(4096, 4096, device=f"cuda:{i}", dtype=torch.float16)
                   for i in range(torch.cuda.device_count())]
        while time.perf_counter() < stop:
            for t in tensors:
                t @ t
            torch.cuda.synchronize()

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    return thread


def _amd_snapshot() -> Snapshot | None:
    from gpuwise.probe.amd import read_amd

    gpus = read_amd()
    if not gpus:
        return None
    return Snapshot(taken_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), host=platform.node(),
                    os=platform.platform(), gpus=gpus, software=read_software())


def read_machine(*, load_seconds: float = 2.0) -> Snapshot:
    """Read this machine through NVML; ProbeUnavailable (exit code 3) says whether the driver or the GPU is missing."""
    try:
        import pynvml as nvml
    except ImportError:
        amd = _amd_snapshot()
        if amd is not None:
            return amd
        raise ProbeUnavailable("doctor needs nvidia-ml-py for NVIDIA GPUs (pip install 'gpuwise[probe]') or "
                               "amdsmi from ROCm for AMD GPUs") from None
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        amd = _amd_snapshot()
        if amd is not None:
            return amd
        raise ProbeUnavailable(f"no NVIDIA driver ({exc}): install the NVIDIA driver (nvidia-smi must work), or "
                               "pass the GPU into the container (--gpus all)") from None
    try:
        count = nvml.nvmlDeviceGetCount()
        if count == 0:
            raise ProbeUnavailable("the NVIDIA driver is loaded but sees no GPU: check the card, its power cables "
                                   "and lspci | grep -i nvidia")
        thread = _load(load_seconds) if load_seconds > 0 else None
        if thread is not None:
            import time

            time.sleep(min(1.0, load_seconds / 2))
        gpus = tuple(_gpu(nvml, i, thread is not None) for i in range(count))
        if thread is not None:
            thread.join()
        cuda = query(nvml, "nvmlSystemGetCudaDriverVersion")
        return Snapshot(
            taken_at=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), host=platform.node(),
            os=platform.platform(), driver_version=_text(query(nvml, "nvmlSystemGetDriverVersion")),
            cuda_driver_version=f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
            nvml_version=_text(query(nvml, "nvmlSystemGetNVMLVersion")), gpus=gpus, peers=read_peers(nvml, count),
            software=read_software(),
        )
    finally:
        query(nvml, "nvmlShutdown")
