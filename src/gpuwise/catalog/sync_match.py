"""Which catalog GPU a price file's accelerator stands for: its name, the memory the row states and the form factor
its names mention, checked against the card's datasheet memory.

Price files name the same card many ways ("H100", "H100_SXM5", "H100-80G-PCIe", "RTX5090_PCIE_BAREMETAL") and state
its memory in as many (SkyPilot's ``GpuInfo`` gives ``SizeInMiB`` per GPU on most clouds, for all the instance's GPUs
on Vast.ai and Prime Intellect, and in GB under that key on Shadeform and RunPod). A name is matched to the catalog
by its loose lookup after dropping words that name a packaging rather than a chip; a name several cards share
("H100", "A100") is settled by the stated memory, then by the form factor the names mention, then by the SXM part
(SkyPilot's convention: a bare "A100" is the 40 GB SXM4). A row whose stated memory is off the card's by more than
:data:`MEMORY_TOLERANCE` is not placed (a 48 GB "RTX 4090" is a modified board, not the catalog's 24 GB card).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

from gpuwise.catalog.catalog import Catalog
from gpuwise.catalog.schema import GPU
from gpuwise.errors import AmbiguousGPU, UnknownGPU

MEMORY_TOLERANCE = 0.12
"""Relative difference between a row's memory and the card's ``memory_gb`` (GiB) still taken as the same card:
B300 is sold as 288 GB of stacks and listed as 270 GB usable (6.7 %), L40S reports 45 of 48 GiB (6.3 %)."""

SKYPILOT_NAMES = {"H100-MEGA": "H100 SXM"}
"""SkyPilot's own accelerator names that no vendor uses: GCP's a3-megagpu machines carry H100 SXM 80 GB
(cloud.google.com/compute/docs/gpus#h100-gpus) and SkyPilot lists their GPUs as H100-MEGA."""

_PACKAGING = {"baremetal", "nvlink", "secure", "community", "pcie", "sxm", "sxm4", "sxm5", "sxm6", "wk"}
_SPLIT = re.compile(r"[\s_\-]+")
_SIZE_MIB = re.compile(r"""['"]SizeInMiB['"]\s*:\s*([0-9]{1,9}(?:\.[0-9]{1,6})?)""")
_TOTAL_MIB = re.compile(r"""['"]TotalGpuMemoryInMiB['"]\s*:\s*([0-9]{1,9}(?:\.[0-9]{1,6})?)""")
_INFO_NAME = re.compile(r"""['"]Name['"]\s*:\s*['"]([^'"]{1,80})['"]""")
_TRAILING_SIZE = re.compile(r"[\s_\-]*(\d{2,3})\s*G(?:B|iB)?$", re.IGNORECASE)
MIN_HINT_GIB = 1.0  # a stated size below 1 GiB is a size in GB under a MiB key (Shadeform, RunPod): no hint


@dataclass(frozen=True)
class Hints:
    """What a row says besides the accelerator's name: per-GPU memory candidates (GiB) and a form factor."""

    memory_gib: tuple[float, ...] = ()
    form_factor: str | None = None


@functools.lru_cache(maxsize=4096)  # a file repeats a few GpuInfo texts over thousands of rows
def skypilot_hints(gpu_info: str | None, count: int, *names: str) -> Hints:
    """Hints from SkyPilot's ``GpuInfo`` (a Python or JSON literal, read by pattern only) and the row's names."""
    info = (gpu_info or "")[:4000]
    sizes = [float(m) for m in _SIZE_MIB.findall(info)[:1]] + [float(m) / count for m in _TOTAL_MIB.findall(info)[:1]]
    sizes += [sizes[0] / count] if sizes and count > 1 else []
    memory = tuple(sorted({round(s / 1024, 2) for s in sizes if s / 1024 >= MIN_HINT_GIB}))
    info_name = _INFO_NAME.search(info)
    return Hints(memory, form_factor_of(*names, info_name.group(1) if info_name else ""))


@functools.lru_cache(maxsize=4096)
def form_factor_of(*texts: str) -> str | None:
    """The package a name mentions: ``pcie``, ``sxm`` or ``nvl`` (H100 NVL), else None."""
    words = {w for text in texts for w in _SPLIT.split(text.lower())}
    if "nvl" in words:
        return "nvl"
    if words & {"sxm", "sxm4", "sxm5", "sxm6"} or any(w.startswith("sxm") for w in words):
        return "sxm"
    return "pcie" if "pcie" in words or "pci" in words else None


def matcher(catalog: Catalog) -> Callable[[str, Hints], GPU | None]:
    """:func:`match_gpu` with its answers kept: a price file repeats a few names over thousands of rows."""
    seen: dict[tuple[str, Hints], GPU | None] = {}

    def match(name: str, hints: Hints) -> GPU | None:
        key = (name, hints)
        if key not in seen:
            if len(seen) > 100_000:
                seen.clear()
            seen[key] = match_gpu(name, hints, catalog)
        return seen[key]

    return match


def match_gpu(name: str, hints: Hints, catalog: Catalog) -> GPU | None:
    """The catalog GPU an accelerator name stands for, or None when no card fits the name and the stated memory."""
    gpu = _by_name(SKYPILOT_NAMES.get(name, name), hints, catalog)
    if gpu is None or not hints.memory_gib or any(_close(gpu, m) for m in hints.memory_gib):
        return gpu
    return None


def _candidates(name: str) -> list[str]:
    """The name, then with its size moved apart ("A100-80GB" -> "A100 80GB"), then without packaging words."""
    words = [w for w in _SPLIT.split(name.strip()) if w]
    out = [name, " ".join(words), re.sub(r"(\d+)GB$", r" \1GB", name)]
    while words and words[-1].lower() in _PACKAGING:
        words.pop()
        out.append(" ".join(words))
    sized = _TRAILING_SIZE.sub("", " ".join(words))
    return [*out, sized] if sized else out


def _by_name(name: str, hints: Hints, catalog: Catalog) -> GPU | None:
    for candidate in _candidates(name):
        try:
            return catalog.gpu(candidate)
        except AmbiguousGPU as exc:
            return _settle([catalog.gpus[c] for c in exc.candidates], hints)
        except UnknownGPU:
            continue
    return None


def _settle(cards: list[GPU], hints: Hints) -> GPU | None:
    """One of the cards a shared name fits: nearest stated memory, then the named form factor, then SXM."""
    def form_rank(gpu: GPU) -> int:
        nvl = "nvl" in gpu.id.split("-")
        if hints.form_factor == "nvl":
            return 0 if nvl else 1
        if nvl:
            return 2  # an NVL part is named as such; a bare name is not one
        return 0 if gpu.form_factor == (hints.form_factor or "sxm") else 1

    def memory_gap(gpu: GPU) -> float:
        return min((abs(gpu.memory_gb - m) / gpu.memory_gb for m in hints.memory_gib), default=0.0)

    if not hints.memory_gib:  # a bare "A100" or "V100" is the base part: the smallest memory of its form
        return min(cards, key=lambda g: (form_rank(g), g.memory_gb))
    return min(cards, key=lambda g: (round(memory_gap(g), 2), form_rank(g), g.memory_gb))


def _close(gpu: GPU, memory_gib: float) -> bool:
    return abs(gpu.memory_gb - memory_gib) <= MEMORY_TOLERANCE * gpu.memory_gb
