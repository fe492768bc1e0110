"""A layer split (``gpuwise estimate --task infer --gpu a,b``) as a table and JSON."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table

from gpuwise.api import LayerSplit
from gpuwise.report.perf import energy_json, energy_line

GIB = 2**30


def split_json(split: LayerSplit) -> dict[str, Any]:
    return {"split": "layer", "fits": split.fits, "tpot_ms": round(split.tpot_ms, 3),
            "tokens_per_s": round(split.tokens_per_s, 2), "ttft_ms": round(split.ttft_ms, 1),
            "cards": [{"gpu": c.gpu, "layers": c.layers, "per_gpu_gib": round(c.per_gpu_bytes / GIB, 3),
                       "capacity_gib": round(c.capacity_bytes / GIB, 3), "fits": c.fits} for c in split.cards],
            "energy": energy_json(split.energy)}


def split_view(split: LayerSplit, model: str) -> Group:
    table = Table(title=f"{model}: one copy split by layers", title_justify="left")
    for name, justify in (("card", "left"), ("layers", "right"), ("GiB", "right"), ("of GiB", "right"),
                          ("fits", "left")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for card in split.cards:
        table.add_row(card.gpu, str(card.layers), f"{card.per_gpu_bytes / GIB:,.2f}",
                      f"{card.capacity_bytes / GIB:,.1f}", "yes" if card.fits else "NO")
    verdict = "fits" if split.fits else "[red]does not fit[/red]: a card holds more than it has"
    speed = (f"one user: {split.tokens_per_s:,.1f} tokens/s (TPOT {split.tpot_ms:,.1f} ms), TTFT "
             f"{split.ttft_ms:,.0f} ms; the layers run one card after another, so the cards add room, not speed")
    how = ("[dim]layers in proportion to each card's free memory, llama.cpp's default without --tensor-split "
           "(src/llama-model.cpp, 'default split, by free memory')[/dim]")
    energy = [energy_line(split.energy, "for one user")] if split.energy is not None else []
    return Group(table, verdict, speed, *energy, how)
