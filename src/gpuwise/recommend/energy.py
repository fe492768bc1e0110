"""A recommended option's energy per output token at the load it serves (estimate/cost/energy.py)."""

from __future__ import annotations

import math

from gpuwise.catalog import Catalog
from gpuwise.estimate.cost.energy import Energy, energy_at, token_prefill_share
from gpuwise.recommend.engine import Option
from gpuwise.recommend.low_power import needed_rate
from gpuwise.recommend.request import Request
from gpuwise.workload.jobs.job import InferJob


def option_energy(option: Option, catalog: Catalog, request: Request) -> Energy | None:
    """Serving at the request's rate (or, with none, the planned one). Where serve-sim simulated the option at that
    rate (the ranking's top options), its busy and prefilling shares, as the option's own serve-sim command reports
    them. Otherwise each replica holds L = its request rate (sessions x turns) x the P99 time in the system there
    (Little's law, P99 for the mean: an upper bound) requests on average, and with Poisson arrivals has none, so
    idles, e^-L of the time (M/G/inf); at the planned rate, busy throughout; prefilling for the prompt tokens' share
    of the tokens it processes. The electricity's share is of the cost per Mtok at the same load. One user: busy while
    decoding, each of a layer split's equal cards for its own layers, 1 / count of the time. None for training,
    scientific jobs and models that make no tokens."""
    tokens = option.fit.output_tokens_per_s
    if not tokens:
        return None
    gpu = catalog.gpus[option.gpu]
    served = [w for w in request.workloads if isinstance(w.job, InferJob)]
    if option.fit.qps_capacity is None or not served:  # one user: the option's speed is its decode rate
        layered = any(s.get("split") == "layer" for s in option.fit.settings)
        return energy_at(gpu, option.count, busy_fraction=1 / option.count if layered else 1.0, prefill_share=0.0,
                         output_tokens_per_s=tokens, usage=request.usage, usd_per_mtok=option.usd_per_mtok)
    jobs = [w.job for w in served if isinstance(w.job, InferJob)]
    share = token_prefill_share(sum(j.input_len for j in jobs), sum(j.output_len for j in jobs))
    needed, busy, per_mtok = needed_rate(request), 1.0, option.usd_per_mtok
    turns = served[0].turns or 1  # --turns: the rate counts sessions, each of `turns` requests
    in_system_ms = option.fit.e2e_p99_ms or option.fit.p99_ms
    if needed is not None and len(served) == 1 and needed < option.fit.qps_capacity and in_system_ms:
        replicas = max(option.count // max(option.fit.tp, 1), 1)
        busy = 1 - math.exp(-needed * turns / replicas * in_system_ms / 1e3)
        tokens = needed * jobs[0].output_len * turns
        per_mtok = option.usd_per_hour / (tokens * 3600) * 1e6
    fit = option.fit
    if fit.busy_fraction is not None and fit.simulated_tokens_per_s:  # as the option's serve-sim command reports
        busy, tokens = fit.busy_fraction, fit.simulated_tokens_per_s  # (all its replicas' tokens)
        share = fit.prefill_share if fit.prefill_share is not None else share
        per_mtok = option.usd_per_hour / (tokens * 3600) * 1e6 if needed is not None else per_mtok
    return energy_at(gpu, option.count, busy_fraction=busy, prefill_share=share, output_tokens_per_s=tokens,
                     usage=request.usage, usd_per_mtok=per_mtok)
