"""A serving option checked by the simulation its reproduce command runs: serve-sim's figures, not the closed form's.

The recommender plans every candidate with the closed form of ``estimate/serving/capacity.py``: fast enough for the
whole catalog, and the bracket serve-sim searches in. The figures a user can check are serve-sim's own: the
discrete-event simulation (``estimate/serving/load.py``) of the same replicas, at the same rate, SLO and seed. So an
option that is shown is simulated exactly as its printed command simulates it (the same ``LoadTest``, spelled as the
command's flags), and it is kept only where that simulation meets the request:

- a request rate with P99 SLOs (any of TTFT, TPOT and end-to-end, workload/jobs/slos.py): every P99 at the rate
  meets its SLO, the queue does not grow, and the highest rate within them all is at least the rate; the option
  shows that highest rate, the SLO that binds there, and that SLO's P99 at the rate;
- a rate without an SLO: the queue does not grow at the rate; the option shows the closed form's planning rate
  (serve-sim prints it as the closed form's plan) and the simulated P99 at the rate;
- SLOs without a rate: some rate meets them all; the option shows the highest one and the binding P99 there;
- neither: the closed form's planning rate, simulated, must not grow a queue.

Simulating costs about a tenth of a second per rate tried, so the ranking simulates only what it shows
(``recommend/rank.py``); every other candidate keeps the closed form's figures.
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from dataclasses import replace

from gpuwise.catalog import GPU, Catalog
from gpuwise.estimate.calibration import Calibration
from gpuwise.estimate.serving.load import SloReport, p99_ms, serving_report
from gpuwise.estimate.serving.simulate import LoadResult
from gpuwise.flags import command_line
from gpuwise.recommend.fit import Fit, Rejection
from gpuwise.recommend.request import Workload
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.jobs.load_test import LoadTest
from gpuwise.workload.model.architecture import Architecture

SIMULATIONS: ContextVar[dict[str, SloReport] | None] = ContextVar("gpuwise_simulations", default=None)
"""Set (to a cache of reports by command) while the ranking checks what it shows; None: closed form only."""

RATE_DIGITS = 4  # significant digits of a --qps the command prints (rounded up: never below the rate asked)


def printed_rate(qps: float) -> float:
    """``qps`` rounded up to RATE_DIGITS significant digits: 50 users / 60 s -> 0.8334, 20.0 -> 20."""
    scale = 10.0 ** (RATE_DIGITS - 1 - math.floor(math.log10(qps)))
    return float(math.ceil(qps * scale - 1e-9)) / scale


def load_test(workload: Workload, planned_qps: float) -> LoadTest:
    """What the option's serve-sim command simulates: the workload's rate (or, with none, the closed form's planning
    rate) and its SLO, at serve-sim's default seed and request count."""
    rate = workload.qps if workload.qps is not None else planned_qps
    return LoadTest(qps=printed_rate(rate), ttft_p99_ms=workload.ttft_p99_ms, tpot_p99_ms=workload.tpot_p99_ms,
                    e2e_p99_ms=workload.e2e_p99_ms, turns=workload.turns, think_time_s=workload.think_time_s,
                    system_prompt_len=workload.system_prompt_len, kv_offload_gib=workload.kv_offload_gib)


def serve_command(workload: Workload, job: InferJob, gpu: GPU, planned_qps: float) -> str:
    """The serve-sim line of ``job`` (its count: all the option's GPUs) under the option's ``load_test``."""
    line = command_line(job, command="serve-sim", head=(workload.model, "--gpu", gpu.id))
    load = command_line(load_test(workload, planned_qps), command="serve-sim")
    return line + load.removeprefix("gpuwise serve-sim")


def simulate(arch: Architecture, workload: Workload, job: InferJob, gpu: GPU, catalog: Catalog,
             calibration: Calibration | None, planned: Fit) -> Fit | Rejection:
    """``planned`` (the closed form's option for ``job`` over all its GPUs) as serve-sim simulates it: its figures
    replaced by the simulation's, or why the simulation misses the request. Unchanged when no check is asked
    (SIMULATIONS unset)."""
    cache = SIMULATIONS.get()
    if cache is None or not planned.commands:
        return planned
    command = planned.commands[0]
    if command not in cache:
        cache[command] = serving_report(arch, job, gpu, catalog, load_test(workload, planned.qps_capacity or 0.0),
                                        calibration=calibration)
    report = cache[command]
    miss = _miss(workload, report)
    if miss is not None:
        return miss
    binding = report.binding_slo
    if not workload.slos:
        capacity, shown = report.planned_qps, report.at_rate
    else:
        capacity, shown = report.max_qps or 0.0, report.at_rate if workload.qps is not None else report.at_max
    p99s = _p99s_ms(shown)
    p99, e2e = p99s[workload.slos.headline], p99s["e2e"]
    return replace(planned, qps_capacity=capacity, p99_ms=p99 if math.isfinite(p99) else None,
                   output_tokens_per_s=capacity * job.output_len * (workload.turns or 1), closed_form=False,
                   binding_slo=binding, e2e_p99_ms=e2e if math.isfinite(e2e) else None,
                   busy_fraction=shown.busy_fraction if shown is not None else None,
                   prefill_share=shown.prefill_share if shown is not None else None,
                   simulated_tokens_per_s=shown.throughput_tokens_per_s if shown is not None else None)


def rate_unit(workload: Workload) -> str:
    """What a serving workload's rate counts: requests ('QPS'), or with --turns sessions ('sessions/s')."""
    return "sessions/s" if workload.turns else "QPS"


def _p99s_ms(result: LoadResult | None) -> dict[str, float]:
    return p99_ms(result) if result is not None else {"ttft": math.nan, "tpot": math.nan, "e2e": math.nan}


def _miss(workload: Workload, report: SloReport) -> Rejection | None:
    """Why the simulation misses the request: a growing queue at the rate, a P99 over the SLO at it, or a highest
    rate within the SLO below it (or none at all); None when it meets it."""
    at = report.at_rate
    rate = f"{printed_rate(workload.qps):g}" if workload.qps is not None else "the closed form's planning rate"
    slos, unit = workload.slos, rate_unit(workload)
    if at is not None and at.saturated and (workload.qps is not None or not slos):
        return Rejection("slo", f"serve-sim: the queue keeps growing at {rate} {unit}")
    if not slos:
        return None
    if workload.qps is not None and not slos.met(_p99s_ms(at)):
        missed, gap = slos.miss(_p99s_ms(at))
        return Rejection("slo", f"serve-sim: {missed} at {rate} QPS", gap)
    best = report.max_qps or 0.0
    if best <= 0:
        idle = dict(report.p99_at_capacity_ms)
        missed = f"{slos.miss(idle)[0]} even at a trickle of requests" if idle else f"no rate meets {slos.text()}"
        return Rejection("slo", f"serve-sim: {missed}")
    if workload.qps is not None and best < workload.qps:
        return Rejection("slo", f"serve-sim: {best:,.2f} QPS {slos.within(report.binding_slo)} < "
                                f"{workload.qps:,.2f} QPS needed", workload.qps / best)
    return None
