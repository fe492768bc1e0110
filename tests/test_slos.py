"""Several SLOs at once (issue 40 point 2): P99 TTFT, TPOT and end-to-end in any combination; capacity is the highest
rate meeting all of them, and the answer names the one that binds.

TPOT is each request's (end-to-end - TTFT) / (output tokens - 1), its P99 over requests, as vllm bench serve
(vllm-project/vllm@def9ce85 vllm/benchmarks/serve.py calculate_metrics) and AIPerf (ai-dynamo/aiperf@d2d69500
src/aiperf/metrics/types/inter_token_latency_metric.py) compute it. The closed-form cases are worked by hand on a
replica whose step model is written out below (a flat prefill, a decode step linear in the batch).
"""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.cli.main import app
from gpuwise.errors import ConfigError
from gpuwise.estimate.serving.capacity import Replica, capacity, latency_at
from gpuwise.estimate.serving.load import highest_rate
from gpuwise.estimate.serving.simulate import Policy, poisson_requests, simulate
from gpuwise.recommend.request import parse_request
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.jobs.load_test import LoadTest
from gpuwise.workload.jobs.slos import Slos

runner = CliRunner()
MODEL, GPU = "llama-3.1-8b", "h100-sxm-80gb"


def _replica(step: Any, *, prefill_s: float = 0.1, output_len: int = 101) -> Replica:
    """A replica whose prompt takes ``prefill_s`` whatever its length and whose decode step is ``step(batch)``
    seconds. A prompt run in the same forward as B decoding sequences adds P(I + B) - P(B) = 0 to it (the engine
    mixes prefills, Policy's default), so no prompt stalls a decode and the closed form reduces to
        T = P + (O - 1) S(B),  B = r T  (Little's law),  P99 TPOT = S(B),  P99 TTFT = S(B) + P (the step in flight)."""
    job = InferJob(engine="vllm", input_len=1000, output_len=output_len)
    return Replica(job, None, 1e12, 256, 256, lambda tokens: prefill_s,  # type: ignore[arg-type]
                   lambda batch, context: step(batch), policy=Policy())


LINEAR = _replica(lambda batch: 0.010 + 0.001 * batch)  # S(B) = 10 ms + 1 ms a sequence; 100 steps after the first


def test_tpot_at_a_rate_is_the_decode_step_at_the_batch_the_rate_implies() -> None:
    """At 2 requests/s: T = 0.1 + 100 x S(B) and B = 2 T. At B = 3 (rounded), S = 13 ms, T = 1.4 s, B = 2.8 -> 3:
    consistent. P99 TPOT = S(3) = 13 ms; P99 TTFT = 13 + 100 = 113 ms; P99 end-to-end = 13 + 100 + 100 x 13 =
    1,413 ms. Idle: no step in flight, B = 1: TTFT 100 ms, TPOT S(1) = 11 ms, end-to-end 0.1 + 1.1 = 1.2 s."""
    at = latency_at(LINEAR, 2.0)
    assert at is not None
    assert at.mean_batch == pytest.approx(2.8, rel=1e-3)
    assert at.p99_ms == pytest.approx({"ttft": 113.0, "tpot": 13.0, "e2e": 1413.0}, rel=1e-6)
    idle = latency_at(LINEAR, 0.0)
    assert idle is not None and idle.p99_ms == pytest.approx({"ttft": 100.0, "tpot": 11.0, "e2e": 1200.0}, rel=1e-6)


def test_a_tpot_target_below_the_batch_one_step_has_no_rate_and_is_named() -> None:
    """S(1) = 11 ms already misses a 10 ms TPOT target, whatever the TTFT target allows."""
    planned = capacity(LINEAR, slos=Slos(ttft_ms=5000, tpot_ms=10))
    assert planned.rate_qps == 0.0 and planned.binding == "tpot"
    assert planned.slos.miss(planned.idle_p99_ms)[0] == "P99 TPOT 11 ms > SLO 10 ms"


def test_tpot_binds_where_the_batch_passes_its_step() -> None:
    """TPOT <= 13.5 ms holds while the batch rounds to 3 or less: B = 1.4 r < 3.5, r < 2.5 requests/s (at B = 4,
    T = 1.5 s and B = 1.5 r = 3.75 stays at 4: 14 ms). TTFT there is 113 ms, far within 500 ms: TPOT binds."""
    planned = capacity(LINEAR, slos=Slos(ttft_ms=500, tpot_ms=13.5))
    assert planned.rate_qps == pytest.approx(2.5, rel=2e-3)
    assert planned.binding == "tpot"


def test_ttft_binds_where_the_step_in_flight_passes_it() -> None:
    """TTFT = P + S(B) <= 112.5 ms holds while S(B) <= 12 ms, B rounding to 2: T = 0.1 + 100 x 0.012 = 1.3 s, B = 1.3 r
    < 2.5, r < 1.923 requests/s; TPOT there is 12 ms, within 50 ms: TTFT binds. The conjunction is the lower of the
    two single-SLO rates where both P99s rise with the rate (TPOT <= 13.5 ms alone: 2.5 requests/s, above)."""
    both = capacity(LINEAR, slos=Slos(ttft_ms=112.5, tpot_ms=13.5))
    ttft_only = capacity(LINEAR, slos=Slos(ttft_ms=112.5))
    tpot_only = capacity(LINEAR, slos=Slos(tpot_ms=13.5))
    assert ttft_only.rate_qps == pytest.approx(2.5 / 1.3, rel=2e-3)
    assert both.binding == "ttft"
    assert both.rate_qps <= min(ttft_only.rate_qps, tpot_only.rate_qps)
    assert both.rate_qps == pytest.approx(min(ttft_only.rate_qps, tpot_only.rate_qps), rel=1e-6)


def test_the_simulated_tpot_is_the_decode_step_and_the_search_names_it() -> None:
    """With a flat 10 ms decode step and prompts that add nothing to a mixed forward, every request's
    (e2e - TTFT) / (output - 1) is 10 ms at any rate: a 9.9 ms TPOT target is met by no rate (named: TPOT), and a
    10.1 ms one never binds beside a TTFT target."""
    flat = _replica(lambda batch: 0.010)

    def run(rate: float) -> Any:
        stream = poisson_requests(rate, 200, 1000, 101, seed=0)
        return simulate(stream, decode_step=flat.decode_step, prefill=flat.prefill, max_batch=flat.max_num_seqs,
                        kv_capacity_tokens=flat.kv_capacity_tokens, policy=flat.policy, mixed_step=flat.mixed_step)

    at = run(2.0)
    assert at.tpot_ms[2] == pytest.approx(10.0, rel=1e-6) and at.tpot_mean_ms == pytest.approx(10.0, rel=1e-6)
    rate, idle = highest_rate(run, slos=Slos(tpot_ms=9.9), low=0.5, high=4.0, iterations=2)
    assert rate == 0.0 and idle is not None
    assert Slos(tpot_ms=9.9, ttft_ms=1e6).binding({"ttft": idle.ttft_ms[2], "tpot": idle.tpot_ms[2]}) == "tpot"
    rate, best = highest_rate(run, slos=Slos(ttft_ms=150, tpot_ms=10.1), low=0.5, high=4.0, iterations=6)
    assert rate > 0 and best is not None and best.ttft_ms[2] <= 150 and best.tpot_ms[2] <= 10.1


@pytest.mark.parametrize("gpu", ["h100-sxm-80gb", "rtx-4090"])
def test_the_closed_form_tpot_agrees_with_the_simulation(gpu: str, shipped: Any) -> None:
    """Two derivations of P99 TPOT on Llama-3.1-8B, 512+128 tokens: the closed form's S(B) + stalls against serve-sim's
    per-request (e2e - TTFT) / (output - 1), at 20, 50 and 80 % of the stable rate; measured 0.81-0.97x on H100, A100,
    L40S and RTX 4090 (2026-12-06): like its end-to-end P99, a little optimistic where the batch swings."""
    from gpuwise.estimate.serving.capacity import replica
    from gpuwise.workload.jobs.parse import make_job
    from gpuwise.workload.model.resolve import resolve_model
    from plans import infer_plan

    job = make_job("infer", input_len=512, output_len=128)
    assert isinstance(job, InferJob)
    rep = replica(infer_plan(resolve_model(MODEL), job, gpu), shipped)
    stable = capacity(rep).stable_qps
    for share in (0.2, 0.5, 0.8):
        closed = latency_at(rep, share * stable)
        stream = poisson_requests(share * stable, 1500, 512, 128, seed=1)
        simulated = simulate(stream, decode_step=rep.decode_step, prefill=rep.prefill, max_batch=rep.max_num_seqs,
                             kv_capacity_tokens=rep.kv_capacity_tokens, policy=rep.policy, mixed_step=rep.mixed_step)
        assert closed is not None
        assert 0.75 <= closed.p99_tpot_s * 1e3 / simulated.tpot_ms[2] <= 1.1, (gpu, share)


def test_p99_ms_is_e2e_p99_ms_and_with_slo_ttft_is_ttft_p99_ms() -> None:
    assert LoadTest(p99_ms=3000).slos == LoadTest(e2e_p99_ms=3000).slos == Slos(e2e_ms=3000)
    assert LoadTest(p99_ms=800, slo="ttft").slos == LoadTest(ttft_p99_ms=800).slos == Slos(ttft_ms=800)
    old = api.serve_sim(MODEL, gpu=GPU, qps=2, p99_ms=3000)
    new = api.serve_sim(MODEL, gpu=GPU, qps=2, e2e_p99_ms=3000)
    assert old == new and old.max_qps


def test_the_conjunction_is_at_most_each_single_slo_and_their_minimum() -> None:
    """serve-sim's search: the rate meeting TTFT <= 300 ms and TPOT <= 12 ms at once is within each one's rate, and
    is the lower of the two (both P99s rise with the rate); 1 % is the search's resolution (8 halvings of a 4x
    bracket, 0.5 %)."""
    both = api.serve_sim(MODEL, gpu=GPU, qps=2, ttft_p99_ms=300, tpot_p99_ms=12)
    ttft = api.serve_sim(MODEL, gpu=GPU, qps=2, ttft_p99_ms=300)
    tpot = api.serve_sim(MODEL, gpu=GPU, qps=2, tpot_p99_ms=12)
    assert both.max_qps and ttft.max_qps and tpot.max_qps
    assert both.max_qps <= min(ttft.max_qps, tpot.max_qps) * 1.01
    assert both.max_qps == pytest.approx(min(ttft.max_qps, tpot.max_qps), rel=0.01)
    assert both.at_max is not None and both.at_max.ttft_ms[2] <= 300 and both.at_max.tpot_ms[2] <= 12


def _serve_sim(*flags: str) -> Any:
    return runner.invoke(app, ["serve-sim", MODEL, "--gpu", GPU, "--qps", "2", *flags])


def test_the_binding_slo_is_named_in_text_and_json() -> None:
    done = _serve_sim("--ttft-p99-ms", "300", "--tpot-p99-ms", "12", "--json")
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    slos = doc["slos"]
    assert set(slos) == {"ttft_p99_ms", "tpot_p99_ms", "binding"}
    assert slos["ttft_p99_ms"]["target"] == 300 and slos["tpot_p99_ms"]["target"] == 12
    at = {name: slos[f"{name}_p99_ms"]["at_capacity"] for name in ("ttft", "tpot")}
    assert at["ttft"] <= 300 and at["tpot"] <= 12
    assert slos["binding"] == max(at, key=lambda n: at[n] / {"ttft": 300, "tpot": 12}[n])
    assert doc["closed_form"]["binding_slo"] == slos["binding"]  # the recommender's closed form agrees on it
    text = " ".join(_serve_sim("--ttft-p99-ms", "300", "--tpot-p99-ms", "12").stdout.split())
    assert "highest rate meeting P99 TTFT <= 300 ms and TPOT <= 12 ms:" in text
    assert f"({'TPOT' if slos['binding'] == 'tpot' else 'TTFT'} binds:" in text
    none = " ".join(_serve_sim("--ttft-p99-ms", "300", "--tpot-p99-ms", "1").stdout.split())
    assert "none: even a trickle of requests misses TPOT" in none


def test_conflicting_slo_flags_are_one_line_errors() -> None:
    done = _serve_sim("--p99-ms", "3000", "--e2e-p99-ms", "2000")
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1
    assert "--p99-ms" in done.output and "--e2e-p99-ms" in done.output
    done = _serve_sim("--p99-ms", "3000", "--tpot-p99-ms", "20", "--json")
    assert done.exit_code == 2 and json.loads(done.stdout)["exit_code"] == 2
    assert "--tpot-p99-ms" in json.loads(done.stdout)["error"]
    done = runner.invoke(app, ["recommend", MODEL, "--task", "infer", "--qps", "1", "--p99-ms", "900",
                               "--slo", "ttft", "--ttft-p99-ms", "500"])
    assert done.exit_code == 2 and len(done.output.strip().splitlines()) == 1
    with pytest.raises(ConfigError, match="--p99-ms is the older spelling of one SLO; with --e2e-p99-ms"):
        parse_request({"workloads": [{"model": MODEL, "task": "infer", "p99_ms": 900, "e2e_p99_ms": 800}]})


def test_a_recommended_option_reproduces_with_two_slos() -> None:
    """Each shown option's serve-sim command carries both SLO flags and, run as printed, meets both at the rate;
    the option says which SLO binds, as the command does. Cards too slow for a 1 ms TPOT are rejected naming it."""
    rec = api.recommend({"workloads": [{"model": MODEL, "task": "infer", "qps": 2, "ttft_p99_ms": 300,
                                        "tpot_p99_ms": 25}],
                         "gpus": ["h100-sxm-80gb", "l4", "rtx-4090"], "acquisitions": ["rent"], "top": 2})
    assert rec.options
    for option in rec.options[:2]:  # the shown ones: simulated as their command simulates them
        assert not option.fit.closed_form
        command = option.fit.commands[0]
        assert "--ttft-p99-ms 300" in command and "--tpot-p99-ms 25" in command
        done = runner.invoke(app, [*shlex.split(command)[1:], "--json"])
        assert done.exit_code == 0, done.output
        doc = json.loads(done.stdout)
        assert doc["at_rate"]["ttft_ms"]["p99"] <= 300 and doc["at_rate"]["tpot_ms"]["p99"] <= 25
        assert doc["max_qps"] >= 2 and doc["slos"]["binding"] == option.fit.binding_slo
        assert option.fit.qps_capacity == pytest.approx(doc["max_qps"], rel=1e-6)
    tight = api.recommend({"workloads": [{"model": MODEL, "task": "infer", "qps": 2, "ttft_p99_ms": 300,
                                          "tpot_p99_ms": 1}], "gpus": ["l4"], "acquisitions": ["rent"]})
    assert not tight.options
    assert any("P99 TPOT" in r.reason for r in tight.rejected), [r.reason for r in tight.rejected][:3]


def test_scenario_files_and_the_mcp_tool_take_the_same_slos(tmp_path: Any) -> None:
    """A scenario workload's ttft_p99_ms/tpot_p99_ms are the flags' fields; its p99_ms is e2e_p99_ms; the MCP
    serve_sim tool takes the same fields and answers the same slos document as `serve-sim --json`."""
    from gpuwise.cli import mcp_server
    from gpuwise.recommend.request import load_scenario

    path = tmp_path / "two-slos.yaml"
    path.write_text(f"workloads:\n  - model: {MODEL}\n    task: infer\n    qps: 2\n    ttft_p99_ms: 300\n"
                    "    tpot_p99_ms: 12\n  - model: qwen2.5-7b\n    task: infer\n    p99_ms: 4000\n")
    first, second = load_scenario(path).workloads
    assert first.slos == Slos(ttft_ms=300, tpot_ms=12) and second.slos == Slos(e2e_ms=4000)
    answer = mcp_server.TOOLS["serve_sim"][2]({"model": MODEL, "gpu": GPU, "qps": 2, "ttft_p99_ms": 300,
                                               "tpot_p99_ms": 12})
    done = _serve_sim("--ttft-p99-ms", "300", "--tpot-p99-ms", "12", "--json")
    assert answer["slos"] == json.loads(done.stdout)["slos"]


def test_a_model_that_answers_at_once_has_no_tpot() -> None:
    """An encoder's answer comes whole: TTFT and end-to-end bound the same latency (the tighter holds), and a TPOT
    target is refused, naming the flag that bounds it."""
    req = {"model": "resnet-50", "task": "infer", "qps": 100}
    tpot = api.recommend({"workloads": [{**req, "tpot_p99_ms": 5}], "gpus": ["l4"], "acquisitions": ["rent"]})
    assert not tpot.options and all("--tpot-p99-ms bounds generated tokens" in r.reason
                                    for r in tpot.rejected if r.code == "slo")
    both = api.recommend({"workloads": [{**req, "ttft_p99_ms": 20, "e2e_p99_ms": 50}], "gpus": ["l4"],
                          "acquisitions": ["rent"], "top": 1})
    tight = api.recommend({"workloads": [{**req, "e2e_p99_ms": 20}], "gpus": ["l4"], "acquisitions": ["rent"],
                           "top": 1})
    assert both.options and tight.options
    assert both.options[0].fit.qps_capacity == tight.options[0].fit.qps_capacity
    assert both.options[0].fit.p99_ms is not None and both.options[0].fit.p99_ms <= 20
