"""What a log says about the run itself: the model, batch, sequence length, method, the card and its capacity, and
the figures of its out-of-memory message.

Used to add a memory breakdown and the smallest change that fits when the log is an out-of-memory error.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from gpuwise.catalog import Catalog
from gpuwise.catalog.device_names import match_device
from gpuwise.errors import ConfigError
from gpuwise.troubleshoot.oom import OomFigures, read_oom

_BATCH = re.compile(r"(?:per_device_train_batch_size|micro_batch_size|train_batch_size|batch_size|--batch)"
                    r"[\"']?\s*[=:]?\s*(\d+)", re.IGNORECASE)
_SEQ = re.compile(r"(?:max_seq_length|max_seq_len|seq_len|sequence_length|block_size|max_length|--seq)"
                  r"[\"']?\s*[=:]?\s*(\d+)", re.IGNORECASE)
_CAPACITY = re.compile(r"(?:total capac\w* (?:of |; )?([\d.]+) GiB|([\d.]+) GiB total capacity)", re.IGNORECASE)
# what the log states outright: `method=lora`, LLaMA-Factory's `finetuning_type: lora`, axolotl's `adapter: qlora`
_STATED = re.compile(r"\b(?:method|finetuning_type|finetune_type|adapter|training_type)[\"']?[ \t]*[=:]?[ \t]*[\"']?"
                     r"(full|q?lora)\b", re.IGNORECASE)
# a 4-bit base: QLoRA's bitsandbytes settings, LLaMA-Factory's `quantization_bit: 4`
_FOUR_BIT = re.compile(r"\bqlora\b|load_in_4bit[\"']?\s*[=:]\s*[\"']?true|bnb_4bit_quant_type|"
                       r"quantization_bit[\"']?[ \t]*[=:]?[ \t]*[\"']?4\b", re.IGNORECASE)
# adapters: the word, PEFT's config and its fields; an environment dump's `PEFT version: 0.15.0` says only that
# PEFT is installed
_ADAPTERS = re.compile(r"\blora\b|\bpeft\b(?![\s:]*version)|loraconfig|lora_r\b|lora_rank|lora_alpha|use_peft",
                       re.IGNORECASE)
# a card as nvidia-smi, `nvidia-smi -L`, torch.cuda.get_device_name or rocm-smi print it: a vendor word, then up to
# six words each one space apart (nvidia-smi's table pads the name with several, `-L` ends it with a bracket)
_CARD = re.compile(r"\b(?:NVIDIA|Tesla|Quadro|GeForce|RTX|AMD|Radeon|Instinct)\b(?:[ \t]?[\w.+-]+){1,6}")
_CARDS_TRIED = 50  # names looked up at most: a log that repeats a banner costs no more
# literal text each pattern's matches contain: a C-speed substring test spares a long log the regex (matcher.py)
_NEEDLES = {_BATCH: ("batch",), _SEQ: ("seq", "block_size", "max_length"), _CAPACITY: ("capac",),
            _STATED: ("method", "finetun", "adapter", "training_type"),
            _FOUR_BIT: ("qlora", "4bit", "quantization_bit"), _ADAPTERS: ("lora", "peft"),
            _CARD: ("nvidia", "tesla", "quadro", "geforce", "rtx", "amd", "radeon", "instinct")}


def _search(pattern: re.Pattern[str], text: str, lowered: str) -> re.Match[str] | None:
    return pattern.search(text) if any(n in lowered for n in _NEEDLES[pattern]) else None


@dataclass(frozen=True)
class RunContext:
    model: str | None
    batch: int | None
    seq: int | None
    method: str
    capacity_gib: float | None
    gpu: str | None = None  # the catalog id of the card the log names
    gpu_name: str | None = None  # the name as the log prints it
    oom: OomFigures | None = None


def read_method(text: str, lowered: str | None = None) -> str:
    """full, lora or qlora: what the log states (``method=lora``, ``finetuning_type: lora``), else lora where it
    shows adapters (a PEFT config dump, ``lora_r``); adapters on a 4-bit base (``load_in_4bit: true``,
    ``quantization_bit: 4``) are qlora; full when it shows neither."""
    lowered = text.lower() if lowered is None else lowered
    stated = _search(_STATED, text, lowered)
    method = stated.group(1).lower() if stated else ("lora" if _search(_ADAPTERS, text, lowered) else "full")
    return "qlora" if method != "full" and _search(_FOUR_BIT, text, lowered) else method


def read_gpu(text: str, catalog: Catalog | Callable[[], Catalog], capacity_gib: float | None) -> tuple[str, str] | None:
    """(catalog id, name as printed) of the first card the log names that the catalog knows: the longest run of
    words after a vendor word that resolves (``NVIDIA GeForce RTX 4090 Off`` -> rtx-4090) through the table of
    names as tools print them (catalog/device_names.py); a name several records share is settled by the capacity
    the log reports. ``catalog`` may be its loader, called only when the log names a vendor."""
    if _search(_CARD, text, text.lower()) is None:
        return None
    catalog = catalog if isinstance(catalog, Catalog) else catalog()
    for found, _ in zip(_CARD.finditer(text), range(_CARDS_TRIED), strict=False):
        words = found.group(0).split()
        for end in range(len(words), 1, -1):
            name = " ".join(words[:end])
            if not any(c.isdigit() for c in name):
                break
            if (card := _card_named(name, catalog, capacity_gib)) is not None:
                return card, name
    return None


def _card_named(name: str, catalog: Catalog, capacity_gib: float | None) -> str | None:
    from gpuwise.probe.checks import match_catalog

    try:
        return match_device(name, catalog).gpu
    except ConfigError:  # unknown, or several cards: the log's capacity may settle which
        card, _ = match_catalog(name, capacity_gib * 1024 if capacity_gib else None, catalog)
        return card.id if card is not None else None


def read_context(text: str, model_names: dict[str, str],
                 catalog: Catalog | Callable[[], Catalog] | None = None) -> RunContext:
    """``model_names`` maps lower-case preset and hub ids to preset ids; the longest one found in the log wins.
    With ``catalog``, the card the log names is read too."""
    lowered = text.lower()
    model = None
    for name in sorted(model_names, key=len, reverse=True):
        if ("/" in name or "-" in name) and len(name) > 4 and name in lowered:
            model = model_names[name]
            break
    batch = _search(_BATCH, text, lowered)
    seq = _search(_SEQ, text, lowered)
    oom = read_oom(text)
    capacity = _search(_CAPACITY, text, lowered)
    capacity_gib = float(capacity.group(1) or capacity.group(2)) if capacity else None
    card = read_gpu(text, catalog, capacity_gib) if catalog is not None else None
    return RunContext(model, int(batch.group(1)) if batch else None, int(seq.group(1)) if seq else None,
                      read_method(text, lowered), capacity_gib, card[0] if card else None,
                      card[1] if card else None, oom)
