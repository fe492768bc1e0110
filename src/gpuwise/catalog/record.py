"""The base of every catalog record: frozen, no unknown keys, printable text, figures within sane bounds."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from gpuwise.safe_io import outside
from gpuwise.text import printable

Dtype = Literal["fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "fp4"]


def _printable_value(value: Any) -> Any:
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_printable_value(x) for x in value)
    return value  # nested records clean their own text


FIGURE_MAX = 1e9  # no datasheet figure, price or count in the catalog's units comes near a billion
FIGURE_MIN = 1e-3  # nor is any above zero this small (0.001 TFLOPS, GB, W, USD): such a figure is a typo


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, str_max_length=2000)

    @model_validator(mode="before")
    @classmethod
    def _printable_text(cls, data: Any) -> Any:
        """Text read from files is text: control characters are dropped before a record holds them (issue 37)."""
        return {k: _printable_value(v) for k, v in data.items()} if isinstance(data, dict) else data

    @model_validator(mode="after")
    def _sane_figures(self) -> Any:
        problem = outside(self, 0, FIGURE_MAX)
        if problem:
            raise ValueError(problem)
        for name, value in self:
            if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < FIGURE_MIN:
                raise ValueError(f"{name} {value:g} is above 0 but below {FIGURE_MIN:g}: a typo in its units?")
        return self
