"""The defaults behind a recommendation's cost that the user left free, said before the answer (issue 36).

A ranking by total cost rests on how many hours a day the hardware runs, for how many years, at what electricity
price, and on the size of the work: the tokens of one training job, the prompt and answer of one request. When the
request did not give them, the answer names the values it assumed and the flag that changes each.
"""

from __future__ import annotations

from gpuwise.recommend.request import Request, Workload
from gpuwise.workload.jobs.job import InferJob


def left_free(request: Request) -> tuple[str, ...]:
    """'24 h/day (a service runs around the clock; --hours-per-day)', ... for each cost driver left at its default."""
    usage, given = request.usage, request.usage_given
    out: list[str] = []
    if usage.pattern == "ongoing":
        if "hours_per_day" not in given:
            why = ("a service runs around the clock" if any(w.is_service for w in request.workloads) else
                   "a workstation's working day")
            out.append(f"{usage.hours_per_day:g} h/day ({why}; --hours-per-day)")
        if "years" not in given:
            out.append(f"{usage.years:g} years of use (--years)")
        if "pattern" not in given and any(w.task in ("train", "hpc") for w in request.workloads):
            out.append("costed over the hardware's life, not as one job (--usage one-off)")
    if "usd_per_kwh" not in given and any(a.startswith("buy") for a in request.acquisitions):
        out.append(f"{usage.usd_per_kwh:g} USD/kWh (--usd-per-kwh)")
    named = len(request.workloads) > 1
    for workload in request.workloads:
        out += _job_sizes(workload, f" of {workload.model}" if named else "")
    return tuple(out)


def _job_sizes(workload: Workload, of: str) -> list[str]:
    """The size of a workload's work when left free: a training job's tokens, a request's prompt and answer."""
    if workload.tokens_left_free:
        return [f"{workload.tokens:,.0f} tokens per training job{of} (--tokens)"]
    job = workload.job
    if not isinstance(job, InferJob):
        return []
    free = [(f"{length:,} tokens {way}", flag) for length, way, flag, name in (
        (job.input_len, "in", "--input-len", "input_len"), (job.output_len, "out", "--output-len", "output_len"))
        if name not in job.model_fields_set]
    if not free:
        return []
    return [f"{' and '.join(size for size, _ in free)} per request{of} ({', '.join(flag for _, flag in free)})"]
