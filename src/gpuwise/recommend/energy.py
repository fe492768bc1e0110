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
    """Serving at the request's rate (or, with none, the planned one): each replica holds L = its rate x the P99
    latency there (Little's law, P99 for the mean: an upper bound) requests on average, and with Poisson arrivals
    has none, so idles, e^-L of the time (M/G/inf); at the planned rate, busy throughout. Prefilling for the prompt
    tokens' share of the tokens it processes (the closed form keeps no phase times). The electricity's share is of
    the cost per Mtok at the same load. One user: busy while decoding, each of a layer split's equal cards for its
    own layers, 1 / count of the time. None for training, scientific jobs and models that make no tokens."""
    tokens = option.fit.output_tokens_per_s
    if not tokens:
        return None
    gpu = catalog.gpus[option.gpu]
    served = [w.job for w in request.workloads if isinstance(w.job, InferJob)]
    if option.fit.qps_capacity is None or not served:  # one user: the option's speed is its decode rate
        layered = any(s.get("split") == "layer" for s in option.fit.settings)
        return energy_at(gpu, option.count, busy_fraction=1 / option.count if layered else 1.0, prefill_share=0.0,
                         output_tokens_per_s=tokens, usage=request.usage, usd_per_mtok=option.usd_per_mtok)
    share = token_prefill_share(sum(j.input_len for j in served), sum(j.output_len for j in served))
    needed, busy, per_mtok = needed_rate(request), 1.0, option.usd_per_mtok
    if needed is not None and len(served) == 1 and needed < option.fit.qps_capacity and option.fit.p99_ms:
        replicas = max(option.count // max(option.fit.tp, 1), 1)
        busy = 1 - math.exp(-needed / replicas * option.fit.p99_ms / 1e3)
        tokens = needed * served[0].output_len
        per_mtok = option.usd_per_hour / (tokens * 3600) * 1e6
    return energy_at(gpu, option.count, busy_fraction=busy, prefill_share=share, output_tokens_per_s=tokens,
                     usage=request.usage, usd_per_mtok=per_mtok)
