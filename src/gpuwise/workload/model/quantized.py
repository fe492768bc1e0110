"""Pre-quantized checkpoints of the presets (``quantized.yaml``): for a preset and a weight format, the Hugging Face
repository an engine downloads, what it is a quantization of, how engines recognise it, and the page that shows it
exists. ``--emit`` names only these; a format missing here is not guessed."""

from __future__ import annotations

import datetime
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

from gpuwise.errors import ConfigError
from gpuwise.workload.model.resolve import HUB_ID

METHODS = frozenset({"compressed-tensors", "awq", "gptq", "fp8", "modelopt_fp4", "gguf"})
"""How an engine recognises a checkpoint: config.json's quantization_config.quant_method (compressed-tensors, awq,
gptq, fp8), ModelOpt's hf_quant_config.json (modelopt_fp4), or the GGUF file format."""
GGUF_TAGS = {"gguf-q4_k_m": "Q4_K_M", "gguf-q8_0": "Q8_0"}  # llama.cpp's names for the GGUF formats gpuwise models


@dataclass(frozen=True)
class QuantizedCheckpoint:
    """One published quantization of a preset in one weight format (``quant``, a --quant value)."""

    preset: str
    quant: str
    repo: str
    quantizes: str  # the repository it is a quantization of (its model card's base model)
    method: str  # one of METHODS
    source: str  # the model card
    as_of: str
    seen: str = ""  # the page read for this entry, where it is not the model card
    tag: str | None = None  # GGUF: llama-server -hf <repo>:<tag>

    def other_model(self, hub_ids: tuple[str, ...]) -> bool:
        """Whether it quantizes a model other than the preset's own first repository (e.g. its Instruct model)."""
        return not hub_ids or self.quantizes.lower() != hub_ids[0].lower()


def _entry(preset: str, quant: str, record: Mapping[str, Any]) -> QuantizedCheckpoint:
    where = f"quantized.yaml {preset} {quant}"
    fields = {k: str(record[k]) for k in ("repo", "quantizes", "method", "source", "as_of") if k in record}
    missing = {"repo", "quantizes", "method", "source", "as_of"} - set(fields)
    if missing:
        raise ConfigError(f"{where}: lacks {', '.join(sorted(missing))}")
    checkpoint = QuantizedCheckpoint(preset, quant, seen=str(record.get("seen", "")),
                                     tag=str(record["tag"]) if record.get("tag") else None, **fields)
    _check(where, checkpoint)
    return checkpoint


def _check(where: str, c: QuantizedCheckpoint) -> None:
    if not HUB_ID.fullmatch(c.repo) or not HUB_ID.fullmatch(c.quantizes):
        raise ConfigError(f"{where}: {c.repo!r} / {c.quantizes!r} is not a <user>/<model> repository id")
    if c.method not in METHODS:
        raise ConfigError(f"{where}: method {c.method!r} is not one of {', '.join(sorted(METHODS))}")
    if not c.source.startswith("https://huggingface.co/"):
        raise ConfigError(f"{where}: source {c.source!r} is not a Hugging Face model card")
    if c.tag is not None and c.method != "gguf":
        raise ConfigError(f"{where}: a quant tag belongs to a GGUF repository only")
    if c.quant in GGUF_TAGS and (c.method != "gguf" or c.tag != GGUF_TAGS[c.quant]):
        raise ConfigError(f"{where}: a {c.quant} checkpoint is a GGUF file with tag {GGUF_TAGS[c.quant]}")
    datetime.date.fromisoformat(c.as_of)


@functools.lru_cache(maxsize=1)
def quantized_checkpoints() -> Mapping[tuple[str, str], QuantizedCheckpoint]:
    """Every listed checkpoint by (preset id, weight format), read once per process."""
    text = resources.files("gpuwise.workload.model").joinpath("quantized.yaml").read_text(encoding="utf-8")
    table = yaml.safe_load(text)["checkpoints"]
    return {(preset, quant): _entry(preset, quant, record)
            for preset, formats in table.items() for quant, record in formats.items()}


def quantized_checkpoint(preset: str, quant: str) -> QuantizedCheckpoint | None:
    """The listed quantization of ``preset`` in ``quant``, or None where none is known."""
    return quantized_checkpoints().get((preset, quant))


def listed_for(preset: str) -> list[QuantizedCheckpoint]:
    """Every listed checkpoint of ``preset``, one per weight format."""
    return [c for (name, _), c in quantized_checkpoints().items() if name == preset]
