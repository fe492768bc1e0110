"""The parts a parameter count is split into (embedding, block linears, head, other), and the config read every
counter shares. :mod:`gpuwise.workload.model.params` counts each family; vision counters (SAM, convolutional
networks) build on these types too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuwise.errors import ConfigError

Config = Mapping[str, Any]


@dataclass(frozen=True)
class Linear:
    """One kind of linear layer inside a block: ``count`` of them per layer, each ``d_in`` x ``d_out``."""

    name: str
    d_in: int
    d_out: int
    group: str  # "attn" or "mlp"
    count: int = 1  # per layer (experts: E)
    layers: int = 0  # how many layers hold it


@dataclass(frozen=True)
class ParamCount:
    embedding: int
    linear: int
    head: int
    other: int
    active: int
    linears: tuple[Linear, ...]
    tower: int = 0  # of ``other``: a vision encoder and its projector
    mtp: int = 0  # multi-token-prediction layers the checkpoint holds beside the model (not in total)

    @property
    def total(self) -> int:
        return self.embedding + self.linear + self.head + self.other


def need(config: Config, *keys: str) -> Any:
    """The first of ``keys`` present in the config; a ConfigError naming them when none is."""
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    raise ConfigError(f"config.json of model_type {config.get('model_type')!r} lacks {' or '.join(keys)!r}")
