"""Which catalog system bought cards go into (``data/systems.yaml``): the smallest that takes the card and holds
every card in one machine, else several of the largest that take it, split evenly. SXM/OAM modules go only on
their own baseboards (``GPU.board_gpus``); passive data-center cards only into servers (they need its airflow)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpuwise.catalog.schema import GPU, System, SystemKind

ALL_KINDS: tuple[SystemKind, ...] = ("desktop", "workstation", "pcie-server", "board-server")


@dataclass(frozen=True)
class SystemChoice:
    system: System
    machines: int
    gpus_per_machine: int

    @property
    def host_usd(self) -> float:
        return self.system.host_cost_usd(self.gpus_per_machine) * self.machines


def takes(system: System, gpu: GPU) -> bool:
    """Whether ``gpu`` goes into ``system`` at all."""
    if gpu.form_factor not in system.form_factors or gpu.segment not in system.segments:
        return False
    if system.gpus is not None and gpu.id not in system.gpus:
        return False
    return not (gpu.cooling == "passive" and system.kind in ("desktop", "workstation"))


def split(system: System, gpu: GPU, count: int) -> tuple[int, int] | None:
    """(machines, most GPUs in one machine) of ``system`` holding ``count`` GPUs, or None (a board not filled)."""
    if system.kind == "board-server":
        boards = sorted(gpu.board_gpus or (system.gpu_slots,))
        if count in boards:
            return 1, count
        size = next((b for b in reversed(boards) if count % b == 0), None)
        return None if size is None else (count // size, size)
    machines = -(-count // system.gpu_slots)
    return machines, -(-count // machines)  # 13 cards: 7 + 6 (a training job that needs even nodes says so)


def candidates(systems: Iterable[System], gpu: GPU, kinds: Iterable[str] = ALL_KINDS) -> list[System]:
    """The systems of ``kinds`` that take ``gpu``, smallest first."""
    wanted = set(kinds)
    return sorted((s for s in systems if s.kind in wanted and takes(s, gpu)), key=lambda s: (s.gpu_slots, s.id))


def choose(systems: Iterable[System], gpu: GPU, count: int, kinds: Iterable[str] = ALL_KINDS) -> (
        SystemChoice | System | None):
    """The system for ``count`` x ``gpu``: a choice; the largest system when the count does not split evenly over
    it (so the caller can say why); None when no system takes the card."""
    fitting = candidates(systems, gpu, kinds)
    if not fitting:
        return None
    one = next((s for s in fitting if split(s, gpu, count) == (1, count) and s.gpu_slots >= count), None)
    system = one or fitting[-1]
    machines = split(system, gpu, count)
    return system if machines is None else SystemChoice(system, *machines)
