"""serve-sim --disagg XPYD: prefill and decode on separate replicas (estimate/serving/disagg.py)."""

from __future__ import annotations

import pytest

from gpuwise import api
from gpuwise.errors import ConfigError
from gpuwise.workload.jobs.job import InferJob

LONG_PROMPTS = {"engine": "vllm", "quant": "bf16", "input_len": 4096, "output_len": 512, "count": 4}


def _at(disagg: str | None, concurrency: int = 64, **job: object) -> object:
    load = {"concurrency": concurrency} | ({"disagg": disagg} if disagg else {})
    report = api.serve_sim("llama-3.1-8b", gpu="h100-sxm-80gb", job=InferJob(**(LONG_PROMPTS | job)), **load)
    return report.at_concurrency


def test_decode_replicas_step_without_prompts_in_their_batches() -> None:
    """Aggregated, a closed loop of long prompts puts prefill chunks into decode iterations; disaggregated, a decode
    replica's step holds only decoding sequences, so its time per token is the plain decode step at its batch."""
    together, apart = _at(None), _at("1P3D")
    assert apart.tpot_mean_ms < together.tpot_mean_ms  # type: ignore[attr-defined]


def test_the_rate_through_both_pools_is_the_clients_over_their_cycle() -> None:
    """A closed loop of C clients: rate = C / (TTFT + KV transfer + (output - 1) x TPOT), the same rate that reaches
    the prefill pool (rate matching)."""
    result = _at("2P2D")
    cycle_s = (result.ttft_mean_ms + 511 * result.tpot_mean_ms) / 1e3  # type: ignore[attr-defined]
    assert result.requests_per_s == pytest.approx(64 / cycle_s, rel=0.02)  # type: ignore[attr-defined]
    assert result.throughput_tokens_per_s == pytest.approx(result.requests_per_s * 512)  # type: ignore[attr-defined]


def test_one_prefill_replica_for_three_decode_ones_waits_longer_for_the_first_token() -> None:
    assert _at("1P3D").ttft_mean_ms > _at("2P2D").ttft_mean_ms  # type: ignore[attr-defined]


@pytest.mark.parametrize(("changes", "load", "message"), [
    ({}, {"disagg": "1P2D", "concurrency": 8}, "needs 3 replicas"),
    ({}, {"disagg": "1P3D", "qps": 2.0}, "closed loop"),
    ({"engine": "hf"}, {"disagg": "1P3D", "concurrency": 8}, "no separate prefill and decode"),
])
def test_a_layout_the_engine_or_the_count_cannot_run_is_refused(changes: dict[str, object], load: dict[str, object],
                                                                message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        api.serve_sim("llama-3.1-8b", gpu="h100-sxm-80gb", job=InferJob(**(LONG_PROMPTS | changes)), **load)


def _flat_replica(prefill_s: float, step: object, limit: int, output_len: int) -> object:
    """A replica whose prefill takes ``prefill_s`` and whose decode step is ``step(batch)``: the closed form's
    inputs, with nothing else of a model behind them."""
    from gpuwise.estimate.serving.capacity import Replica

    job = InferJob(engine="vllm", input_len=1000, output_len=output_len)
    return Replica(job, None, 1e12, limit, limit, lambda tokens: prefill_s,  # type: ignore[arg-type]
                   lambda batch, context: step(batch))  # type: ignore[operator]


def test_a_split_balances_the_pools_saturation_rates() -> None:
    """Hand-worked: prefill 0.1 s (10 prompts/s a prefill replica), decode step 10 ms + 0.1 ms a sequence, at most
    256 sequences, 101 output tokens: a decode replica saturates at 256 / (100 x 35.6 ms) = 71.9 requests/s. Four
    replicas balance at 4 x 71.9 / (10 + 71.9) = 3.5 prefill ones: 3P1D holds min(30, 71.9) = 30 requests/s, 4P0D
    is no split and 2P2D 20. With no SLO the plan is 80 % of that (SERVING_PLANNING_UTILISATION)."""
    from gpuwise.estimate.serving.disagg_plan import plan_split

    rep = _flat_replica(0.1, lambda batch: 0.010 + 1e-4 * batch, 256, 101)
    planned = plan_split(rep, 4, kv_s=0.0)  # type: ignore[arg-type]
    assert planned is not None
    assert (planned.pools.prefill, planned.pools.decode) == (3, 1)
    assert planned.rate_qps == pytest.approx(0.8 * 30, rel=1e-3)


def test_a_planned_split_meets_its_ttft_slo() -> None:
    """P99 TTFT = the prompt in flight + its own prefill x (1 + q99(Poisson(rate x P))): at a 350 ms SLO on 0.1 s
    prefills, q99 may be at most 1 (0.1 + 0.1 x 2 = 0.3 s; with 2 it is 0.4 s), so each prefill replica takes at most
    the rate whose Poisson(r x 0.1) has P(N <= 1) >= 0.99: r x 0.1 = 0.1486, 1.486 prompts/s."""
    from gpuwise.estimate.serving.disagg_plan import plan_split
    from gpuwise.workload.jobs.slos import Slos

    rep = _flat_replica(0.1, lambda batch: 0.010, 256, 101)
    planned = plan_split(rep, 4, kv_s=0.0, slos=Slos(ttft_ms=350))  # type: ignore[arg-type]
    assert planned is not None
    assert planned.rate_qps == pytest.approx(planned.pools.prefill * 1.486, rel=0.01)
    assert planned.p99s_ms(planned.rate_qps * 0.99)["ttft"] <= 350 and planned.binding == "ttft"


def test_recommend_disagg_auto_keeps_the_layout_that_sustains_more(shipped: object) -> None:
    """Qwen3-235B-A22B on 32 B200s, 4,000 -> 1,000 tokens, P99 end-to-end 20 s: with prompts and decoding on the
    same replicas each prompt stalls every decoding sequence for its prefill; apart, the decode replicas step at the
    SLO's pace. --disagg auto offers the split when it carries more, and its P99 stays within the SLO."""
    from gpuwise.recommend.evaluate import evaluate
    from gpuwise.recommend.fit import Fit
    from gpuwise.recommend.request import Workload
    from gpuwise.workload.model.resolve import resolve_model

    job = InferJob(engine="vllm", quant="nvfp4", input_len=4000, output_len=1000)
    arch = resolve_model("qwen3-235b-a22b")
    card = shipped.gpu("b200-sxm-180gb")  # type: ignore[attr-defined]
    outcome = {}
    for mode in ("off", "auto"):
        workload = Workload(model="qwen3-235b-a22b", task="infer", options=job, qps=20, p99_ms=20_000, disagg=mode)
        outcome[mode] = evaluate({"qwen3-235b-a22b": arch}, (workload,), card, shipped, 32)  # type: ignore[arg-type]
    auto = outcome["auto"]
    assert isinstance(auto, Fit) and auto.qps_capacity is not None and auto.qps_capacity >= 20
    off = outcome["off"]
    assert not isinstance(off, Fit) or (off.qps_capacity or 0) <= auto.qps_capacity
    split = next(s["disagg"] for s in auto.settings if "disagg" in s)
    prefill, decode = (int(n) for n in str(split).removesuffix("D").split("P"))
    assert (prefill + decode) * auto.tp == 32 and auto.p99_ms is not None and auto.p99_ms <= 20_000


def test_pods_without_a_network_are_never_split_into_pools(shipped: object) -> None:
    """Prefill replicas hand each prompt's KV cache to a decode replica: 32 one-GPU cloud pods with no cluster
    network between them have no link to carry it, so --disagg auto keeps them aggregated."""
    from gpuwise.recommend.evaluate import evaluate
    from gpuwise.recommend.fit import Fit
    from gpuwise.recommend.machines import Machines
    from gpuwise.recommend.request import Workload
    from gpuwise.workload.model.resolve import resolve_model

    job = InferJob(engine="vllm", quant="nvfp4", input_len=4000, output_len=1000)
    workload = Workload(model="qwen3-235b-a22b", task="infer", options=job, qps=1, p99_ms=60_000, disagg="auto")
    pods = Machines(nodes=32, gpus_per_node=1, network=None, linked=False)
    outcome = evaluate({"qwen3-235b-a22b": resolve_model("qwen3-235b-a22b")}, (workload,),
                       shipped.gpu("b200-sxm-180gb"), shipped, 32, machines=pods)  # type: ignore[attr-defined,arg-type]
    assert isinstance(outcome, Fit) and not any("disagg" in s for s in outcome.settings)
