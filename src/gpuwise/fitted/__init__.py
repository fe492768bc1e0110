"""Global parameters of gpuwise's speed mechanisms, fitted on the public measurement corpus.

Each parameter is one number of one mechanism (the bandwidth fraction memory-bound kernels reach, the FLOPs at which a
GEMM reaches half its best rate, the host seconds an eager runtime spends per dispatched operator, ...), bounded by
physics, with a prior from a paper, a datasheet or code. ``benchmarks/fit.py`` chooses which parameters to free by
leave-one-source-out cross-validation over ``benchmarks/data/corpus`` and writes the chosen values to
``parameters.yaml`` beside this module, with the sources that informed each one. Never a factor per model, per GPU or
per case: every estimate reads the same value.

The estimators read a parameter through :class:`FittedConstant` (``constants.MEMORY_EFFICIENCY.value``) or
:func:`value`; ``benchmarks/fit.py`` tries candidate values with :func:`overrides`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml

_OVERRIDES: dict[str, float] = {}


@dataclass(frozen=True)
class Parameter:
    """One fitted global parameter: its value, bounds, prior and where the value comes from."""

    name: str
    value: float
    unit: str
    low: float
    high: float
    prior: float
    prior_source: str
    mechanism: str
    freed: bool  # False: leave-one-source-out kept the prior (freeing it did not lower the held-out error)
    informed_by: tuple[str, ...]  # corpus sources whose cases the parameter moves
    loso_low: float  # the range of values the leave-one-source-out folds chose
    loso_high: float

    @property
    def source(self) -> str:
        if not self.freed:
            return f"{self.prior_source} (prior kept by benchmarks/fit.py: freeing it did not help out of sample)"
        one = " (informed by one source only)" if len(self.informed_by) == 1 else ""
        return (f"fitted by benchmarks/fit.py on the public corpus, {len(self.informed_by)} sources{one}; "
                f"leave-one-source-out folds chose {self.loso_low:g}-{self.loso_high:g}; prior {self.prior:g}: "
                f"{self.prior_source}")


def _parameter(name: str, raw: Mapping[str, Any]) -> Parameter:
    low, high = float(raw["bounds"][0]), float(raw["bounds"][1])
    value = float(raw["value"])
    if not low <= value <= high:
        raise ValueError(f"fitted parameter {name} = {value} lies outside its bounds {low}-{high}")
    loso = raw.get("loso_range") or [value, value]
    return Parameter(name, value, str(raw["unit"]), low, high, float(raw["prior"]), str(raw["prior_source"]),
                     str(raw["mechanism"]), bool(raw.get("freed", False)), tuple(raw.get("informed_by") or ()),
                     float(loso[0]), float(loso[1]))


@functools.lru_cache(maxsize=1)
def parameters() -> Mapping[str, Parameter]:
    """Every fitted parameter, by name (parameters.yaml, written by benchmarks/fit.py)."""
    text = (resources.files("gpuwise.fitted") / "parameters.yaml").read_text("utf-8")
    document = yaml.safe_load(text)
    return {name: _parameter(name, raw) for name, raw in document["parameters"].items()}


def value(name: str) -> float:
    """The parameter's value: an override in effect (benchmarks/fit.py trying a candidate), else the fitted one."""
    if name in _OVERRIDES:
        return _OVERRIDES[name]
    return parameters()[name].value


@contextmanager
def overrides(values: Mapping[str, float]) -> Iterator[None]:
    """Estimate with candidate values for some parameters (within their bounds), then restore the fitted ones."""
    known = parameters()
    for name, candidate in values.items():
        if name not in known:
            raise KeyError(f"no fitted parameter named {name!r}; known: {', '.join(sorted(known))}")
        if not known[name].low <= candidate <= known[name].high:
            raise ValueError(f"{name} = {candidate} is outside its bounds {known[name].low}-{known[name].high}")
    saved = dict(_OVERRIDES)
    _OVERRIDES.update(values)
    try:
        yield
    finally:
        _OVERRIDES.clear()
        _OVERRIDES.update(saved)


class FittedConstant:
    """A constant whose value benchmarks/fit.py chose: reads the fitted parameter each time it is used."""

    __slots__ = ("name", "unit")

    def __init__(self, name: str, unit: str) -> None:
        self.name = name
        self.unit = unit

    @property
    def value(self) -> float:
        return value(self.name)

    @property
    def source(self) -> str:
        return parameters()[self.name].source

    def __repr__(self) -> str:
        return f"FittedConstant({self.name}={self.value:g} {self.unit})"
