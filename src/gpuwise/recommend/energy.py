"""A recommended option's energy per output token at the rate it is planned for (estimate/cost/energy.py)."""

from __future__ import annotations

from gpuwise.catalog import Catalog
from gpuwise.estimate.cost.energy import Energy, energy_at, token_prefill_share
from gpuwise.recommend.engine import Option
from gpuwise.recommend.request import Request
from gpuwise.workload.jobs.job import InferJob


def option_energy(option: Option, catalog: Catalog, request: Request) -> Energy | None:
    """Serving: the option's cards busy the whole time at the planned rate (recommend plans each replica at its SLO's
    highest rate or at 80 % of saturation, where continuous batching keeps requests in flight: with L of them on
    average and Poisson arrivals the engine idles e^-L of the time, under 1 % from L = 5), prefilling for the prompt
    tokens' share of the tokens it processes (their phases' times are not kept by the closed form); one user: busy
    while decoding, each of a layer split's equal cards for its own layers, 1 / count of the time. None for
    training, scientific jobs and models that make no tokens."""
    tokens = option.fit.output_tokens_per_s
    if not tokens:
        return None
    served = [w.job for w in request.workloads if isinstance(w.job, InferJob)]
    if option.fit.qps_capacity is None or not served:
        share = 0.0  # one user: the option's speed is its decode rate
    else:
        share = token_prefill_share(sum(j.input_len for j in served), sum(j.output_len for j in served))
    layered = any(s.get("split") == "layer" for s in option.fit.settings)
    return energy_at(catalog.gpus[option.gpu], option.count, busy_fraction=1 / option.count if layered else 1.0,
                     prefill_share=share, output_tokens_per_s=tokens, usage=request.usage,
                     usd_per_mtok=option.usd_per_mtok)
