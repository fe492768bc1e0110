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
