"""Everything `gpuwise doctor` reads from a machine, as plain values that can be saved and replayed.

``None`` always means "the driver did not say" (NVML NotSupported, no permission, no such sysfs file);
a check on a ``None`` reads N/A, never PASS. Units are in the names; NVML's mW and MiB are converted at
the backend. ``doctor --save-snapshot`` writes this model as JSON; ``doctor --from`` reads it back.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuwise.safe_io import outside

READING_MAX = 1e15  # no counter, clock, temperature or size NVML reports comes near this


class _Plain(BaseModel):
    """A plain value read from a driver or a saved file: finite, never negative, strings of sane length."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, str_max_length=4096)

    @model_validator(mode="after")
    def _physical(self) -> Any:
        problem = outside(self, 0, READING_MAX)
        if problem:
            raise ValueError(problem)
        return self


class Process(_Plain):
    pid: int
    name: str | None = None
    used_mib: float | None = None


class GpuReading(_Plain):
    """One GPU as NVML (and sysfs) describe it; nvidia-smi equivalents in the field descriptions."""

    index: int
    name: str
    uuid: str | None = None
    serial: str | None = None
    vbios: str | None = None
    pci_bus_id: str | None = None
    memory_total_mib: float | None = None
    memory_used_mib: float | None = None
    utilization_gpu_percent: float | None = Field(default=None, le=100, description="nvidia-smi utilization.gpu")
    pcie_gen_current: int | None = Field(default=None, description="nvidia-smi -q: PCIe Generation Current")
    pcie_width_current: int | None = None
    pcie_gen_max: int | None = Field(default=None, description="min(GPU, slot): NVML GetMaxPcieLinkGeneration")
    pcie_width_max: int | None = Field(default=None, description="min(GPU, slot): x4 in a chipset slot")
    pcie_gen_gpu_max: int | None = Field(default=None, description="the GPU's own maximum generation")
    upstream_width_max: int | None = Field(default=None, description="sysfs max_link_width of the upstream port")
    sampled_under_load: bool = False
    power_usage_w: float | None = None
    power_limit_w: float | None = Field(default=None, description="enforced power limit")
    power_default_limit_w: float | None = None
    power_max_limit_w: float | None = None
    sm_clock_mhz: float | None = None
    sm_max_clock_mhz: float | None = None
    clock_event_reasons: tuple[str, ...] | None = Field(
        default=None, description="active: gpu_idle, sw_power_cap, hw_slowdown, sync_boost, sw_thermal, "
                                  "hw_thermal, hw_power_brake, applications_clocks")
    temperature_c: float | None = None
    slowdown_c: float | None = None
    shutdown_c: float | None = None
    ecc_enabled: bool | None = None
    ecc_pending: bool | None = None
    ecc_volatile_uncorrected: int | None = None
    ecc_aggregate_uncorrected: int | None = None
    ecc_aggregate_corrected: int | None = None
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    pcie_replay_counter: int | None = None
    xid_last: int | None = Field(default=None, description="the last Xid the kernel log shows for this GPU; NVML "
                                                           "polling does not report Xids, so gpuwise leaves it unset")
    persistence_mode: bool | None = None
    compute_mode: str | None = Field(default=None, description="default, exclusive_process, prohibited")
    mig_enabled: bool | None = None
    processes: tuple[Process, ...] | None = Field(default=None, max_length=100_000)


class PeerLink(_Plain):
    """How two GPUs reach each other (nvidia-smi topo -m): NVLink, a PCIe switch, the host bridge or the CPU link."""

    a: int
    b: int
    path: str | None = Field(default=None, description="nvlink, pix, pxb, phb, node, sys")
    p2p_read: bool | None = None


class Software(_Plain):
    torch_version: str | None = None
    torch_cuda: str | None = Field(default=None, description="torch.version.cuda; None for CPU-only builds")
    torch_hip: str | None = None
    cuda_available: bool | None = None
    nccl_version: str | None = None
    arch_list: tuple[str, ...] | None = Field(default=None, description="torch.cuda.get_arch_list()")


class Snapshot(_Plain):
    """A whole machine: driver, GPUs, software stack. ``problem`` is set when no GPU could be read."""

    gpuwise_version: str | None = None
    taken_at: str | None = None
    host: str | None = None
    os: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = Field(default=None, description="e.g. '12.8' (nvidia-smi 'CUDA Version')")
    nvml_version: str | None = None
    gpus: tuple[GpuReading, ...] = Field(default=(), max_length=1024)
    peers: tuple[PeerLink, ...] = Field(default=(), max_length=1024 * 1024)
    software: Software = Software()
    problem: str | None = Field(default=None, description="no_driver or no_gpu, with the reason in detail")
    problem_detail: str | None = None
