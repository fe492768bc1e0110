"""What the report layer formats besides the public result types: the parts of those results it reads by their own
type (a serving simulation's load point, an option of a recommendation, a doctor check's report), and the few
pure helpers and constants it needs to say them (a figure's likely range, an HPC job's size and work, a card's
price). Together with the types ``gpuwise.api`` exports (Estimate, FitReport, ServingReport, Recommendation ...)
this is the surface ``gpuwise.report`` reads; an import-linter contract keeps report from reaching past it.

Not part of the Python API (``gpuwise.api.__all__``). Each name is imported the first time it is used (PEP 562), as
``gpuwise.api``'s are, so formatting one kind of result loads only the package that made it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_FROM: dict[str, tuple[str, str]] = {
    # an estimate: its cost figures, the likely range of a predicted figure (perf.*.band), how the parameters
    # were counted (Architecture.resolved_as when the module tree was built)
    "CostFigures": ("gpuwise.estimate.cost.price", "CostFigures"),
    "band": ("gpuwise.estimate.speed.bands", "band"),
    "band_percentiles": ("gpuwise.estimate.speed.bands", "band_percentiles"),
    "DERIVED": ("gpuwise.workload.model.module_tree", "DERIVED"),
    # serving and scaling: one load point of a serve-sim, the network assumed between nodes when none is given
    "LoadResult": ("gpuwise.estimate.serving.simulate", "LoadResult"),
    "STEADY_FACTOR": ("gpuwise.estimate.serving.simulate", "STEADY_FACTOR"),
    "SESSION_STEADY_FACTOR": ("gpuwise.estimate.serving.simulate", "SESSION_STEADY_FACTOR"),
    # energy per output token at a load (an estimate's, a load point's, a recommended option's)
    "Energy": ("gpuwise.estimate.cost.energy", "Energy"),
    # several SLOs at once: serve-sim's report of them, and their names as the text says them
    "SloReport": ("gpuwise.estimate.serving.load", "SloReport"),
    "SLO_LABELS": ("gpuwise.workload.jobs.slos", "LABELS"),
    "DEFAULT_NETWORK": ("gpuwise.estimate.speed.parallel", "DEFAULT_NETWORK"),
    # a traced step (--trace) and its kernel-by-kernel time
    "Trace": ("gpuwise.workload.trace.steps", "Trace"),
    "TracedTime": ("gpuwise.estimate.speed.traced", "TracedTime"),
    # scientific computing: a job's problem size and its work per run, in the application's own unit
    "size_of": ("gpuwise.workload.hpc.apps", "size_of"),
    "work_of": ("gpuwise.workload.hpc.apps", "work_of"),
    # a recommendation: a ranked option, a rejected candidate, an option's figures for one workload
    "Option": ("gpuwise.recommend.engine", "Option"),
    "Rejected": ("gpuwise.recommend.engine", "Rejected"),
    "Fit": ("gpuwise.recommend.fit", "Fit"),
    # the catalog: a cloud offer, a side-by-side comparison, a card's list price
    "CloudOffer": ("gpuwise.catalog", "CloudOffer"),
    "Comparison": ("gpuwise.catalog", "Comparison"),
    "price_usd": ("gpuwise.catalog", "price_usd"),
    # the real card: a bench figure, the doctor's checks, a monitor round, one GPU's NVML reading
    "BenchResult": ("gpuwise.probe.bench", "Result"),
    "DoctorReport": ("gpuwise.probe.checks", "Report"),
    "MonitorRound": ("gpuwise.probe.monitor", "Round"),
    "GpuReading": ("gpuwise.probe.snapshot", "GpuReading"),
}

__all__ = sorted(_FROM)


def __getattr__(name: str) -> Any:
    """Import a name on first use (PEP 562)."""
    where = _FROM.get(name)
    if where is None:
        raise AttributeError(f"module 'gpuwise.api.reporting' has no attribute {name!r}")
    value = getattr(importlib.import_module(where[0]), where[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # what type checkers see: the same names, imported eagerly
    from gpuwise.catalog import CloudOffer as CloudOffer
    from gpuwise.catalog import Comparison as Comparison
    from gpuwise.catalog import price_usd as price_usd
    from gpuwise.estimate.cost.energy import Energy as Energy
    from gpuwise.estimate.cost.price import CostFigures as CostFigures
    from gpuwise.estimate.serving.load import SloReport as SloReport
    from gpuwise.estimate.serving.simulate import SESSION_STEADY_FACTOR as SESSION_STEADY_FACTOR
    from gpuwise.estimate.serving.simulate import STEADY_FACTOR as STEADY_FACTOR
    from gpuwise.estimate.serving.simulate import LoadResult as LoadResult
    from gpuwise.estimate.speed.bands import band as band
    from gpuwise.estimate.speed.bands import band_percentiles as band_percentiles
    from gpuwise.estimate.speed.parallel import DEFAULT_NETWORK as DEFAULT_NETWORK
    from gpuwise.estimate.speed.traced import TracedTime as TracedTime
    from gpuwise.probe.bench import Result
    from gpuwise.probe.checks import Report
    from gpuwise.probe.monitor import Round
    from gpuwise.probe.snapshot import GpuReading as GpuReading
    from gpuwise.recommend.engine import Option as Option
    from gpuwise.recommend.engine import Rejected as Rejected
    from gpuwise.recommend.fit import Fit as Fit
    from gpuwise.workload.hpc.apps import size_of as size_of
    from gpuwise.workload.hpc.apps import work_of as work_of
    from gpuwise.workload.jobs.slos import LABELS
    from gpuwise.workload.model.module_tree import DERIVED as DERIVED
    from gpuwise.workload.trace.steps import Trace as Trace

    BenchResult = Result  # the probe's names, said as what they are beside the others
    DoctorReport = Report
    MonitorRound = Round
    SLO_LABELS = LABELS
