"""What a log says about the run itself: the model, batch, sequence length, method and the card's capacity.

Used to add a memory breakdown and the smallest change that fits when the log is an out-of-memory error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_BATCH = re.compile(r"(?:per_device_train_batch_size|micro_batch_size|train_batch_size|batch_size|--batch)"
                    r"[\"']?\s*[=:]?\s*(\d+)", re.IGNORECASE)
_SEQ = re.compile(r"(?:max_seq_length|max_seq_len|seq_len|sequence_length|block_size|max_length|--seq)"
                  r"[\"']?\s*[=:]?\s*(\d+)", re.IGNORECASE)
_CAPACITY = re.compile(r"total capacity (?:of |; )?([\d.]+) GiB", re.IGNORECASE)


@dataclass(frozen=True)
class RunContext:
    model: str | None
    batch: int | None
    seq: int | None
    method: str
    capacity_gib: float | None


def read_context(text: str, model_names: dict[str, str]) -> RunContext:
    """``model_names`` maps lower-case preset and hub ids to preset ids; the longest one found in the log wins."""
    lowered = text.lower()
    model = None
    for name in sorted(model_names, key=len, reverse=True):
        if ("/" in name or "-" in name) and len(name) > 4 and name in lowered:
            model = model_names[name]
            break
    method = "qlora" if ("load_in_4bit" in lowered or "qlora" in lowered) else (
        "lora" if ("loraconfig" in lowered or "peft" in lowered or " lora" in lowered) else "full")
    batch = _BATCH.search(text)
    seq = _SEQ.search(text)
    capacity = _CAPACITY.search(text)
    return RunContext(model, int(batch.group(1)) if batch else None, int(seq.group(1)) if seq else None, method,
                      float(capacity.group(1)) if capacity else None)
