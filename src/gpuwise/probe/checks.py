"""Rule-based health checks on a snapshot: PASS / WARN / FAIL with the measured value, what was expected, the fix.

Thresholds follow DCGM's diagnostics where it has one (throttle reasons that fail, retired-page and row-remap
limits, PCIe replays) and the verdicts in the research notes (diagnostics.md sec. 5.2) elsewhere. A value the
driver does not report gives N/A: never a PASS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from gpuwise.catalog import GPU, Catalog
from gpuwise.errors import AmbiguousGPU, ConfigError, UnknownGPU
from gpuwise.probe.snapshot import GpuReading, Snapshot

Status = Literal["PASS", "WARN", "FAIL", "N/A"]
FAILING_REASONS = ("hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake")  # DCGM CheckForClocksEvent
MAX_RETIRED_PAGES = 63  # DCGM_LIMIT_MAX_RETIRED_PAGES
MAX_UNCORRECTABLE_REMAPS = 512  # DCGM row-remap limit
MAX_PCIE_REPLAYS = 80  # DCGM max_pcie_replays for the pcie test


@dataclass(frozen=True)
class Check:
    id: str
    gpu: int | None
    status: Status
    measured: str
    expected: str
    fix: str = ""


@dataclass(frozen=True)
class Inventory:
    index: int
    name: str
    uuid: str | None
    serial: str | None
    vbios: str | None
    catalog_id: str | None
    catalog_note: str


def match_catalog(name: str, memory_mib: float | None, catalog: Catalog) -> tuple[GPU | None, str]:
    """The catalog record of an NVML product name; an ambiguous name is settled by memory size."""
    try:
        return catalog.gpu(name), ""
    except AmbiguousGPU as exc:
        # NVML names the variant when it is not the SXM part ("NVIDIA H200 NVL", "NVIDIA H100 PCIe")
        lowered = name.lower()
        candidates = [catalog.gpus[c] for c in exc.candidates
                      if not any(v in c and v not in lowered for v in ("nvl", "pcie"))] or [
            catalog.gpus[c] for c in exc.candidates]
        if memory_mib:
            best = min(candidates, key=lambda g: abs(g.memory_bytes / 2**20 - memory_mib))
            return best, f"matched by memory size among {', '.join(exc.candidates)}"
        return None, f"not in catalog: ambiguous between {', '.join(exc.candidates)}"
    except UnknownGPU as exc:
        return None, "not in catalog" + (f"; nearest {', '.join(exc.suggestions)}" if exc.suggestions else "")


def _na(check_id: str, gpu: int, what: str) -> Check:
    return Check(check_id, gpu, "N/A", f"{what} not reported by the driver", "—")


def pcie_link(g: GpuReading, card: GPU | None) -> Check:
    if g.pcie_width_current is None and g.pcie_width_max is None:
        return _na("pcie_link", g.index, "PCIe link")
    native_w = card.pcie_lanes if card else (g.upstream_width_max or g.pcie_width_max)
    native_g = card.pcie_gen if card else g.pcie_gen_gpu_max
    width = g.pcie_width_current if g.sampled_under_load and g.pcie_width_current else g.pcie_width_max
    gen = g.pcie_gen_current if g.sampled_under_load and g.pcie_gen_current else g.pcie_gen_max
    measured = f"gen{gen} x{width}" + (" under load" if g.sampled_under_load else " (max; idle links drop)")
    expected = f"gen{native_g} x{native_w}" + (f" ({card.id})" if card else "")
    slot = min(filter(None, (g.pcie_width_max, g.upstream_width_max)), default=None)
    if native_w and ((width and width < native_w) or (slot and slot < native_w)):
        return Check("pcie_link", g.index, "FAIL", measured, expected,
                     f"the slot gives x{slot or width} to an x{native_w} card: move it to a CPU-attached x16 slot "
                     "(chipset slots are x4) or check bifurcation and riser settings in the BIOS")
    if native_g and gen and gen < native_g:
        status: Status = "FAIL" if g.sampled_under_load else "WARN"
        return Check("pcie_link", g.index, status, measured, expected,
                     "set the slot to the card's PCIe generation in the BIOS; reseat the card and riser")
    return Check("pcie_link", g.index, "PASS", measured, expected)


def power_limit(g: GpuReading, card: GPU | None) -> Check:
    if g.power_limit_w is None or not g.power_default_limit_w:  # a default of 0 W: the driver does not report one
        return _na("power_limit", g.index, "power limit")
    measured = f"{g.power_limit_w:,.0f} W enforced"
    expected = f"{g.power_default_limit_w:,.0f} W default" + (f", {card.tdp_w:,.0f} W datasheet" if card else "")
    ratio = g.power_limit_w / g.power_default_limit_w
    if ratio < 0.7:
        return Check("power_limit", g.index, "FAIL", measured, expected,
                     "raise it: sudo nvidia-smi -pl <watts>; a BIOS/VBIOS or PSU-sensing cap needs the vendor tool")
    if ratio < 0.95:
        return Check("power_limit", g.index, "WARN", measured, expected,
                     "capped below default (fine if intended: -20% power costs <5% speed, Puget Systems)")
    return Check("power_limit", g.index, "PASS", measured, expected)


def throttling(g: GpuReading, card: GPU | None) -> Check:
    if g.clock_event_reasons is None:
        return _na("throttle_reasons", g.index, "clock event reasons")
    active = [r for r in g.clock_event_reasons if r != "gpu_idle"]
    failing = [r for r in active if r in FAILING_REASONS]
    measured = ", ".join(active) or "none"
    if failing:
        return Check("throttle_reasons", g.index, "FAIL", measured, "no thermal, HW slowdown or power-brake events",
                     "improve airflow or cooling, check the power cables and PSU (HW power brake = the PSU asked "
                     "for it); nvidia-smi -q -d PERFORMANCE shows the reason")
    return Check("throttle_reasons", g.index, "PASS", measured,
                 "software power cap and sync boost are normal under load")


def temperature(g: GpuReading, card: GPU | None) -> Check:
    if g.temperature_c is None:
        return _na("temperature", g.index, "temperature")
    measured = f"{g.temperature_c:.0f} C"
    if g.slowdown_c is None:
        return Check("temperature", g.index, "N/A", measured, "slowdown threshold not reported")
    expected = f"below {g.slowdown_c - 10:.0f} C (slowdown at {g.slowdown_c:.0f} C)"
    if g.temperature_c >= g.slowdown_c:
        return Check("temperature", g.index, "FAIL", measured, expected,
                     "the card is slowing itself down: clean the heatsink, raise fan curves, space the cards")
    if g.temperature_c >= g.slowdown_c - 10:
        return Check("temperature", g.index, "WARN", measured, expected, "close to slowdown: improve airflow")
    return Check("temperature", g.index, "PASS", measured, expected)


def ecc(g: GpuReading, card: GPU | None) -> Check:
    if g.ecc_enabled is None:
        return _na("ecc", g.index, "ECC")
    counts = (f"ECC {'on' if g.ecc_enabled else 'off'}; uncorrected volatile {g.ecc_volatile_uncorrected}, "
              f"aggregate {g.ecc_aggregate_uncorrected}; corrected aggregate {g.ecc_aggregate_corrected}")
    if (g.ecc_volatile_uncorrected or 0) > 0:
        return Check("ecc", g.index, "FAIL", counts, "no uncorrected errors",
                     "uncorrectable memory errors since boot: drain jobs, reset the GPU, RMA if they return")
    if g.ecc_pending is not None and g.ecc_pending != g.ecc_enabled:
        return Check("ecc", g.index, "WARN", counts, "pending mode = current mode", "reboot to apply the ECC change")
    if (g.ecc_aggregate_uncorrected or 0) > 0 or (g.ecc_aggregate_corrected or 0) > 0:
        return Check("ecc", g.index, "WARN", counts, "no lifetime errors",
                     "errors in the card's history (InfoROM): watch them; for a used card ask why")
    if not g.ecc_enabled and card is not None and card.segment == "datacenter":
        return Check("ecc", g.index, "WARN", counts, "ECC on for a data-center card", "sudo nvidia-smi -e 1; reboot")
    return Check("ecc", g.index, "PASS", counts, "no uncorrected errors")


def retired_pages(g: GpuReading, card: GPU | None) -> Check:
    if g.retired_pages_sbe is None and g.retired_pages_dbe is None and g.retired_pages_pending is None:
        return _na("retired_pages", g.index, "page retirement (pre-Ampere)")
    total = (g.retired_pages_sbe or 0) + (g.retired_pages_dbe or 0)
    measured = f"{total} retired" + (", retirement pending" if g.retired_pages_pending else "")
    expected = f"none pending, fewer than {MAX_RETIRED_PAGES}"
    if g.retired_pages_pending or total >= MAX_RETIRED_PAGES:
        return Check("retired_pages", g.index, "FAIL", measured, expected,
                     "reset the GPU (reboot) to retire pending pages; at the limit the card needs replacing")
    if total:
        return Check("retired_pages", g.index, "WARN", measured, expected, "memory has been failing: watch it")
    return Check("retired_pages", g.index, "PASS", measured, expected)


def remapped_rows(g: GpuReading, card: GPU | None) -> Check:
    if g.remapped_rows_pending is None and g.remapped_rows_uncorrectable is None:
        return _na("remapped_rows", g.index, "row remapping (Ampere+)")
    measured = (f"correctable {g.remapped_rows_correctable}, uncorrectable {g.remapped_rows_uncorrectable}, "
                f"pending {g.remapped_rows_pending}, failure {g.remapped_rows_failure}")
    expected = f"no pending remap, no failure, uncorrectable < {MAX_UNCORRECTABLE_REMAPS}"
    if g.remapped_rows_failure or (g.remapped_rows_uncorrectable or 0) >= MAX_UNCORRECTABLE_REMAPS:
        return Check("remapped_rows", g.index, "FAIL", measured, expected,
                     "the row remapper is out of spare rows: the card needs replacing (RMA)")
    if g.remapped_rows_pending:
        return Check("remapped_rows", g.index, "FAIL", measured, expected,
                     "a remap waits for a GPU reset: drain jobs and reset (nvidia-smi -r) or reboot")
    if (g.remapped_rows_uncorrectable or 0) > 0:
        return Check("remapped_rows", g.index, "WARN", measured, expected, "rows were remapped: watch the count")
    return Check("remapped_rows", g.index, "PASS", measured, expected)


def pcie_replays(g: GpuReading, card: GPU | None) -> Check:
    if g.pcie_replay_counter is None:
        return _na("pcie_replays", g.index, "PCIe replay counter")
    measured = f"{g.pcie_replay_counter} replays"
    if g.pcie_replay_counter > MAX_PCIE_REPLAYS:
        return Check("pcie_replays", g.index, "FAIL", measured, f"at most {MAX_PCIE_REPLAYS}",
                     "link errors: reseat the card, drop the riser, try gen-limited BIOS settings")
    if g.pcie_replay_counter > 0:
        return Check("pcie_replays", g.index, "WARN", measured, "0", "some link retries: check the riser/seating")
    return Check("pcie_replays", g.index, "PASS", measured, "0")


def modes(g: GpuReading, card: GPU | None) -> Check:
    if g.compute_mode == "prohibited":
        return Check("modes", g.index, "FAIL", "compute mode prohibited", "default or exclusive_process",
                     "sudo nvidia-smi -c DEFAULT")
    if g.mig_enabled:
        return Check("modes", g.index, "WARN", "MIG enabled", "MIG off for whole-GPU jobs",
                     "PyTorch sees only MIG instances; sudo nvidia-smi -mig 0 to turn it off")
    if g.persistence_mode is False and card is not None and card.segment == "datacenter":
        return Check("modes", g.index, "WARN", "persistence mode off", "on for servers",
                     "sudo nvidia-smi -pm 1 (or enable nvidia-persistenced) to avoid re-initialising per job")
    if g.compute_mode is None and g.persistence_mode is None:
        return _na("modes", g.index, "compute/persistence mode")
    return Check("modes", g.index, "PASS", f"compute {g.compute_mode}, persistence {g.persistence_mode}",
                 "default compute mode")


def processes(g: GpuReading, card: GPU | None) -> Check:
    if g.processes is None:
        return _na("processes", g.index, "process list")
    heavy = [p for p in g.processes if (p.used_mib or 0) > 1024]
    measured = ", ".join(f"{p.name or p.pid} {p.used_mib:,.0f} MiB" for p in heavy) or "none above 1 GiB"
    if heavy:
        return Check("processes", g.index, "WARN", measured, "no other process holding memory",
                     "another process holds GPU memory: stop it or expect less room")
    return Check("processes", g.index, "PASS", measured, "no other process holding memory")


def precision_support(g: GpuReading, card: GPU | None) -> Check:
    """What tensor formats this card runs natively, from its compute capability (catalog)."""
    if card is None or card.compute_capability is None:
        return _na("precisions", g.index, "compute capability (card not in catalog)")
    supported = [name for name, ok in (("TF32/BF16", card.software.bf16), ("FP8", card.software.fp8)) if ok]
    missing = [name for name, ok in (("TF32/BF16", card.software.bf16), ("FP8", card.software.fp8)) if not ok]
    measured = f"sm_{card.compute_capability.replace('.', '')}: " + (", ".join(supported) or "FP16 only")
    fix = ("use --precision fp16 (with a GradScaler) instead of bf16" if "TF32/BF16" in missing else
           "FP8 training needs Ada (sm_89) or Hopper (sm_90) or newer" if missing else "")
    return Check("precisions", g.index, "PASS", measured, "informational", fix)


def peer_checks(snapshot: Snapshot, catalog_cards: dict[int, GPU | None]) -> list[Check]:
    """Multi-GPU paths: NVLink or P2P over PCIe is fast; through the CPU (no P2P) costs all-reduce time."""
    checks = []
    for link in snapshot.peers:
        measured = f"GPU{link.a}<->GPU{link.b}: {link.path or '?'}, P2P {'yes' if link.p2p_read else 'no'}"
        card = catalog_cards.get(link.a)
        if link.p2p_read is None:
            checks.append(Check("topology", None, "N/A", measured, "P2P status not reported"))
        elif link.p2p_read or link.path == "nvlink":
            checks.append(Check("topology", None, "PASS", measured, "NVLink or P2P"))
        elif card is not None and card.segment == "consumer":
            checks.append(Check("topology", None, "PASS", measured, "GeForce: no P2P by design (traffic via host)",
                                "expect slower multi-GPU all-reduce; NCCL_P2P_DISABLE=1 is what NCCL does anyway"))
        else:
            checks.append(Check("topology", None, "WARN", measured, "P2P between data-center/workstation GPUs",
                                "check IOMMU/ACS settings in the BIOS and that the GPUs share a PCIe root"))
    return checks


def _version(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    parts = text.split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return None


def software_checks(snapshot: Snapshot) -> list[Check]:
    sw = snapshot.software
    if sw.torch_version is None:
        return [Check("torch", None, "N/A", "PyTorch not installed", "a CUDA build of torch",
                      "pip install torch (the CUDA build matching your driver)")]
    if sw.torch_cuda is None and sw.torch_hip is None:
        return [Check("torch", None, "FAIL", f"torch {sw.torch_version} is a CPU-only build", "a CUDA build",
                      "reinstall with the CUDA wheel from pytorch.org for your driver")]
    checks = []
    built, driver = _version(sw.torch_cuda), _version(snapshot.cuda_driver_version)
    if built and driver:
        # CUDA minor version compatibility (NVIDIA, "CUDA Compatibility", sec. "Minor Version Compatibility"): a
        # build for 12.x runs on any 12.y driver (>= 525.60.13) without PTX JIT; a newer major needs a newer driver
        status: Status = "FAIL" if built[0] > driver[0] else "WARN" if built[:2] > driver[:2] else "PASS"
        fix = {"PASS": "", "WARN": "runs by CUDA minor version compatibility, without PTX JIT: kernels not built "
                                   "for this GPU fail; upgrade the driver to be safe",
               "FAIL": "upgrade the driver or install a torch wheel built for an older CUDA"}[status]
        checks.append(Check("torch_cuda", None, status, f"torch {sw.torch_version} built for CUDA {sw.torch_cuda}",
                            f"driver supports CUDA {snapshot.cuda_driver_version}", fix))
    if sw.cuda_available is not None:
        checks.append(Check("cuda_available", None, "PASS" if sw.cuda_available else "FAIL",
                            f"torch.cuda.is_available() = {sw.cuda_available}", "True",
                            "" if sw.cuda_available else "check the driver, CUDA_VISIBLE_DEVICES, container runtime"))
    return checks


GPU_CHECKS: tuple[Callable[[GpuReading, GPU | None], Check], ...] = (
    pcie_link, power_limit, throttling, temperature, ecc, retired_pages, remapped_rows, pcie_replays, modes, processes,
    precision_support,
)


@dataclass(frozen=True)
class Report:
    inventory: tuple[Inventory, ...]
    checks: tuple[Check, ...]
    snapshot: Snapshot
    recorded: bool = False  # read back from a saved report: the checks as they were, not re-run

    @property
    def exit_code(self) -> int:
        return 1 if any(c.status in ("WARN", "FAIL") for c in self.checks) else 0


def run_checks(snapshot: Snapshot, catalog: Catalog) -> Report:
    inventory = []
    checks: list[Check] = []
    cards: dict[int, GPU | None] = {}
    for g in snapshot.gpus:
        card, note = match_catalog(g.name, g.memory_total_mib, catalog)
        cards[g.index] = card
        inventory.append(Inventory(g.index, g.name, g.uuid, g.serial, g.vbios, card.id if card else None, note))
        checks += [check(g, card) for check in GPU_CHECKS]
    checks += peer_checks(snapshot, cards)
    checks += software_checks(snapshot)
    return Report(tuple(inventory), tuple(checks), snapshot)


def recorded_report(document: dict[str, object], *, origin: str) -> Report:
    """A `doctor --json` report read back as it was recorded (its checks are not re-run: it has no readings)."""
    try:
        inventory = tuple(Inventory(**item) for item in document.get("inventory", []))  # type: ignore[attr-defined]
        checks = tuple(Check(**item) for item in document.get("checks", []))  # type: ignore[attr-defined]
    except TypeError as exc:
        raise ConfigError(f"{origin}: not a gpuwise doctor report ({exc})") from None
    if any(c.status not in ("PASS", "WARN", "FAIL", "N/A") for c in checks):
        raise ConfigError(f"{origin}: a check's status is not PASS, WARN, FAIL or N/A")
    fields = {k: document.get(k) for k in ("host", "taken_at", "driver_version", "cuda_driver_version")}
    snapshot = Snapshot(**{k: str(v)[:200] for k, v in fields.items() if isinstance(v, str)})
    return Report(inventory, checks, snapshot, recorded=True)
