"""Benchmark figures of one card, each with its source and date: the matmul rates the speed model plans with.

A card's ``measured.gemm`` gives, per dtype, the best dense matmul rate a published benchmark reached on that very
card. The speed model (estimate/roofline.py) plans the card's matmuls at that fraction of dense peak; a card
with none in a dtype borrows the figure of its architecture's reference card of the same segment (the one record
whose ``stands_for`` says why), else a stated default.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import Field, model_validator

from gpuwise.catalog.record import Dtype, Record


class GemmMeasurement(Record):
    """The best dense matmul rate a published benchmark reached on this very card in one dtype.

    Give the rate (``achieved_tflops``: the fraction is it over the record's own dense peak of that dtype, so the
    arithmetic stays in the file) or, where the rate cannot be set against the datasheet (a GeForce boost clock
    beats the spec), the ``fraction`` of dense peak itself, with the measurement quoted in ``source``."""

    achieved_tflops: float | None = Field(default=None, gt=0, description="measured TFLOPS, dense")
    fraction: float | None = Field(default=None, gt=0, le=1, description="of the record's dense peak of the dtype")
    source: str = Field(min_length=3, description="where it was published (URL or repository path), the figure quoted")
    as_of: dt.date = Field(description="when it was measured or published; where the source gives no date, when "
                                       "gpuwise read it")
    note: str | None = None

    @model_validator(mode="after")
    def _one_figure(self) -> GemmMeasurement:
        if (self.achieved_tflops is None) == (self.fraction is None):
            raise ValueError("give achieved_tflops (the measured rate) or fraction (of dense peak), one of them")
        return self

    def fraction_of(self, peak_tflops: float) -> float:
        """The fraction of ``peak_tflops`` (the card's dense peak of the dtype) it reached."""
        if self.achieved_tflops is not None:
            return self.achieved_tflops / peak_tflops
        assert self.fraction is not None  # one of the two, by _one_figure
        return self.fraction


class Measured(Record):
    """What benchmarks measured on this card, each figure with its source. The speed model plans a card's matmuls at
    its own measured fraction of dense peak; a card without one borrows that of its architecture's reference card of
    the same segment (the card whose ``stands_for`` is set), else a stated default (estimate/roofline.py)."""

    gemm: dict[Dtype, GemmMeasurement] = Field(min_length=1, description="dtype -> the best matmul rate measured")
    stands_for: str | None = Field(
        default=None, description="set on one card per architecture and segment: why its measurements stand for the "
                                  "unmeasured cards of both. A measurement stands only for its own segment: GeForce "
                                  "boost clocks run above the spec, data-center parts at their rated power")

    def __hash__(self) -> int:  # the mapping is read-only by convention; a GPU stays hashable as a frozen record
        return hash((tuple(sorted(self.gemm.items())), self.stands_for))


@dataclass(frozen=True)
class GemmReference:
    """The measured matmul fractions of a card's architecture reference (``Measured.stands_for``), by dtype."""

    gpu_id: str
    fractions: Mapping[Dtype, float]
