"""The one serving-capacity model (estimate/serving/capacity.py) against independent derivations: hand-worked
Poisson quantiles and batch queues, and serve-sim's discrete-event simulation of the same replica.

The closed form replaced a P99 = 1.2 x mean factor whose only source was our own simulator; its tail is now the
99th percentile of the Poisson number of interfering arrivals. Here it must agree with the simulation, which
models each iteration, the batch limit and the KV cache, on runs long enough to reach steady state.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from gpuwise import api
from gpuwise.catalog import Catalog
from gpuwise.estimate.serving.capacity import batch_capacity, capacity, latency_at, poisson_quantile, replica
from gpuwise.estimate.serving.simulate import poisson_requests, simulate
from gpuwise.probe.bench import CalibrationRecord
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.jobs.parse import make_job
from gpuwise.workload.model.resolve import resolve_model
from plans import infer_plan


def test_poisson_quantiles_by_hand() -> None:
    # P(N <= 3) = e^-1 (1 + 1 + 1/2 + 1/6) = 0.981 < 0.99 <= P(N <= 4) = 0.996
    assert poisson_quantile(1.0) == 4
    # Poisson(10): P(N <= 17) = 0.9857, P(N <= 18) = 0.9928 (standard tables)
    assert poisson_quantile(10.0) == 18
    assert poisson_quantile(0.0) == 0
    # mean 1000: normal approximation 1000 + 2.326 x sqrt(1000) - 0.5 = 1073.1 -> 1074
    assert poisson_quantile(1000.0) == 1074


def test_a_batch_server_by_hand() -> None:
    # batches of 32 taking 0.1 s each; at 100 requests/s, q99(Poisson(100 x 0.1)) = 18 arrived during the batch in
    # flight, so a request waits for that batch, then rides in the next: P99 = 0.1 x (1 + ceil(19 / 32)) = 0.2 s
    planned, p99 = batch_capacity(seconds_per_batch=0.1, batch=32, slo_s=None)
    assert p99(100.0) == pytest.approx(0.2)
    assert planned == pytest.approx(0.8 * 320)  # no SLO: 80 % of the stable 32 / 0.1 s
    assert math.isinf(p99(320.0))
    within, _ = batch_capacity(seconds_per_batch=0.1, batch=32, slo_s=0.25)
    assert p99(within) <= 0.25 < p99(within * 1.05)


def _simulated_p99_ms(rep, rate: float, requests: int = 1500) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    job = rep.job
    stream = poisson_requests(rate, requests, job.input_len, job.output_len, seed=1)
    result = simulate(stream, decode_step=rep.decode_step, prefill=rep.prefill, max_batch=rep.max_num_seqs,
                      kv_capacity_tokens=rep.kv_capacity_tokens, policy=rep.policy, mixed_step=rep.mixed_step)
    return result.e2e_ms[2], result.mean_batch


@pytest.mark.parametrize("gpu", ["h100-sxm-80gb", "a100-sxm-80gb", "l40s", "rtx-4090"])
def test_closed_form_p99_agrees_with_the_simulation(gpu: str, shipped: Catalog) -> None:
    # at 20 %, 50 % and 80 % of the replica's stable rate; measured 0.77-0.97x (2026-12-01) on these cards: the
    # closed form is a little optimistic near saturation, where the simulated batch swings around its mean
    job = make_job("infer", input_len=512, output_len=128)
    assert isinstance(job, InferJob)
    rep = replica(infer_plan(resolve_model("llama-3.1-8b"), job, gpu), shipped)
    stable = capacity(rep).stable_qps
    for share in (0.2, 0.5, 0.8):
        rate = share * stable
        closed = latency_at(rep, rate)
        assert closed is not None
        simulated, batch = _simulated_p99_ms(rep, rate)
        assert 4 * batch <= 1500  # the run is long enough to stand for steady state
        assert 0.7 <= closed.p99_e2e_s * 1e3 / simulated <= 1.25, (gpu, share, closed, simulated)


@pytest.mark.parametrize(("gpu", "p99_ms"), [("h100-sxm-80gb", 3000), ("a100-sxm-80gb", 5000), ("l40s", 5000)])
def test_capacity_at_an_slo_agrees_with_serve_sim(gpu: str, p99_ms: float) -> None:
    # the recommender's rate against serve-sim's search over simulated rates (its bracket comes from the closed
    # form, so the search itself is what is checked: it must land near, not on, the closed form's answer);
    # measured 1.04-1.10x (2026-12-01)
    report = api.serve_sim("llama-3.1-8b", gpu=gpu, qps=1, p99_ms=p99_ms, input_len=512, output_len=128,
                           requests=1500)
    assert report.max_qps and 0.8 <= report.planned_qps / report.max_qps <= 1.25
    assert report.at_max is not None and report.at_max.steady


def test_the_recommender_shows_the_capacity_serve_sim_simulates(shipped: Catalog) -> None:
    # issue 36: a shown option's capacity is serve-sim's highest simulated rate within the SLO, at serve-sim's own
    # settings (400 requests, seed 0), not the closed form that sized it
    report = api.serve_sim("llama-3.1-8b", gpu="h100-sxm-80gb", qps=1, p99_ms=3000)
    # one rented H100 (an SXM module is bought only on a 4- or 8-GPU board), bf16 as serve-sim runs it
    rec = api.recommend({"workloads": [{"model": "llama-3.1-8b", "task": "infer", "qps": 1, "p99_ms": 3000,
                                        "options": {"quant": "bf16"}}],
                         "gpus": ["h100-sxm-80gb"], "acquisitions": ["rent"], "constraints": {"max_gpus": 1}})
    assert rec.options[0].fit.qps_capacity == pytest.approx(report.max_qps)


def test_calibration_reaches_serve_sim_and_recommend(tmp_path: Path, shipped: Catalog) -> None:
    # a card measured at a third of the table's matmul rate prefills slower: less capacity in both commands
    record = tmp_path / "slow.json"
    CalibrationRecord(gpu="h100-sxm-80gb", name="NVIDIA H100 80GB HBM3", date="2026-12-01",
                      gemm_tflops={"fp16": 250.0, "bf16": 250.0}, memory_gb_s=1500.0).save(record)
    base = api.serve_sim("llama-3.1-8b", gpu="h100-sxm-80gb", qps=1, requests=100)
    slow = api.serve_sim("llama-3.1-8b", gpu="h100-sxm-80gb", qps=1, requests=100, calibration=record)
    assert slow.planned_qps < 0.7 * base.planned_qps
    request = {"workloads": [{"model": "llama-3.1-8b", "task": "infer", "qps": 1, "options": {"quant": "bf16"}}],
               "gpus": ["h100-sxm-80gb"], "acquisitions": ["rent"], "constraints": {"max_gpus": 1}}
    fast_rec, slow_rec = api.recommend(request), api.recommend(request, calibration=[record])
    assert slow_rec.options[0].fit.qps_capacity < 0.7 * fast_rec.options[0].fit.qps_capacity
    assert json.loads(record.read_text())["gpu"] == "h100-sxm-80gb"
