"""One copy of a model split by layers over 2-4 cards, equal or not: llama.cpp's default multi-GPU mode
(``--split-mode layer``), exllamav2's ``gpu_split`` and vLLM's pipeline parallelism at one sequence.

Each card holds a contiguous block of layers. llama.cpp sizes the blocks in proportion to each device's free memory
when ``--tensor-split`` is not given (src/llama-model.cpp, ``load_tensors``: the default split is each device's free
memory); here the free memory is the card's capacity less what it holds whatever its share (runtime, allocator
reserve). A token passes through the blocks in turn, so one user's decode step is the sum of each card's share of its
own whole-model step, plus one hand-off of the hidden state per boundary. Worked check: two equal cards take exactly
one card's time (no speed-up, only room); a 24 GB card with a 12 GB card holds about two thirds of the layers on
the larger one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuwise.catalog import GPU, Catalog
from gpuwise.errors import ConfigError
from gpuwise.estimate import constants as C
from gpuwise.estimate.calibration import Calibration
from gpuwise.estimate.cost.energy import Energy
from gpuwise.estimate.estimate import estimate
from gpuwise.estimate.speed.inference import InferPerf
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.architecture import Architecture

SPLIT_MAX_CARDS = 4  # llama.cpp and exllamav2 users split over 2-4 cards; beyond that a server engine is the tool
_SCALES = ("weights", "kv_cache", "activations", "allocator_reserve")  # held in proportion to its layers


@dataclass(frozen=True)
class SplitCard:
    gpu: str
    layers: int
    per_gpu_bytes: float
    capacity_bytes: float
    tpot_ms: float = 0.0  # this card's part of each decode step (its layers' share of its own whole-model step)
    ttft_ms: float = 0.0  # and of the prefill

    @property
    def fits(self) -> bool:
        return self.per_gpu_bytes <= self.capacity_bytes


@dataclass(frozen=True)
class LayerSplit:
    cards: tuple[SplitCard, ...]
    tpot_ms: float
    ttft_ms: float
    energy: Energy | None = None  # one user's joules per output token, the cards taking turns (serving/energy.py)

    @property
    def fits(self) -> bool:
        return all(card.fits for card in self.cards)

    @property
    def tokens_per_s(self) -> float:
        return 1e3 / self.tpot_ms


def _layer_counts(free_bytes: Sequence[float], layers: int) -> list[int]:
    """Whole layers per card in proportion to ``free_bytes`` (largest remainder), each card at least one."""
    total = sum(max(f, 0.0) for f in free_bytes) or 1.0
    exact = [max(f, 0.0) / total * layers for f in free_bytes]
    counts = [max(1, int(e)) for e in exact]
    order = sorted(range(len(exact)), key=lambda i: exact[i] - int(exact[i]), reverse=True)
    for step in range(layers):  # bounded: hand out what rounding down left, largest remainder first
        if sum(counts) >= layers:
            break
        counts[order[step % len(order)]] += 1
    while sum(counts) > layers:  # the at-least-one rule overshot: take from the largest
        counts[counts.index(max(counts))] -= 1
    return counts


def _one_machine(gpus: Sequence[GPU]) -> None:
    """The cards of one llama.cpp process: PCIe cards in one machine, one backend (a Mac, a DGX Spark or a Jetson
    is a whole computer; CUDA and ROCm cards do not share one process's backend)."""
    whole = [g.id for g in gpus if g.form_factor in ("soc", "module", "superchip")]
    if whole:
        raise ConfigError(f"{whole[0]} is a whole computer, not a card to split a model onto; a layer split runs on "
                          "2-4 PCIe cards in one machine")
    if len({g.form_factor for g in gpus}) > 1:
        raise ConfigError("SXM/OAM modules and PCIe cards do not sit in one machine; split over cards of one kind")
    stacks = sorted({g.software.stack for g in gpus})
    if len(stacks) > 1:
        raise ConfigError(f"the cards need different backends ({', '.join(stacks)}): one llama.cpp process splits "
                          "over one backend's devices; give cards of one vendor")


def layer_split(arch: Architecture, job: InferJob, gpus: Sequence[GPU], catalog: Catalog, *,
                calibration: Calibration | None = None) -> LayerSplit:
    """``job`` (one sequence) on one copy of ``arch`` split by layers over ``gpus`` in order."""
    if not 2 <= len(gpus) <= SPLIT_MAX_CARDS:
        raise ConfigError(f"a layer split runs on 2 to {SPLIT_MAX_CARDS} cards, got {len(gpus)}")
    _one_machine(gpus)
    one = job.updated(tp=1, count=1, batch=1)
    whole = [estimate(arch, one, gpu, catalog, calibration=calibration) for gpu in gpus]
    scaled = [sum(w.memory.breakdown_bytes.get(k, 0.0) for k in _SCALES) for w in whole]
    fixed = [w.memory.per_gpu_bytes - s for w, s in zip(whole, scaled, strict=True)]
    free = [g.usable_memory_bytes - f for g, f in zip(gpus, fixed, strict=True)]
    counts = _layer_counts(free, arch.layers)
    cards, tpot, ttft = [], 0.0, 0.0
    for gpu, result, part, rest, n in zip(gpus, whole, scaled, fixed, counts, strict=True):
        share = n / arch.layers
        perf = result.perf
        assert isinstance(perf, InferPerf) and perf.tpot_ms is not None and perf.ttft_ms is not None
        cards.append(SplitCard(gpu.id, n, rest + share * part, gpu.usable_memory_bytes, share * perf.tpot_ms,
                               share * perf.ttft_ms))
        tpot += share * perf.tpot_ms
        ttft += share * perf.ttft_ms
    hand_offs_ms = (len(gpus) - 1) * C.COLLECTIVE_LATENCY.value * 1e3  # the hidden state, a few KB, per boundary
    return LayerSplit(tuple(cards), tpot + hand_offs_ms, ttft + hand_offs_ms)
