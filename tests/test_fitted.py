"""The fitted global parameters, the corpus they were fitted on, and the bands their out-of-sample errors give.

Truths used: decode at batch 1 reads every weight once per token, so its rate scales with the bandwidth fraction
(bandwidth / bytes per token); nccl-tests' bus bandwidth of a large all-reduce tends to the link's own rate; a band
is the 10th-90th percentile of the ratios it was made from; a held-out publisher never appears in the corpus.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from gpuwise import api
from gpuwise.estimate import constants as C
from gpuwise.estimate.speed import bands
from gpuwise.fitted import FittedConstant, overrides, parameters, value

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
HELD_OUT = ("mlcommons/training_results_v5", "nemo/performance", "gpustack", "qwenlm/qwen", "ml.energy",
            "ml-energy", "diffusers-torchao", "xiongjiedai", "megatron-bridge", "automodel")


def _module(name: str):  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_every_parameter_lies_within_its_physical_bounds_and_names_its_prior() -> None:
    for name, p in parameters().items():
        assert p.low <= p.value <= p.high, name
        assert p.low <= p.prior <= p.high, name
        assert p.prior_source and p.mechanism, name
        if p.freed:
            assert p.informed_by, f"{name} was freed but no source informs it"
            assert "benchmarks/fit.py" in p.source
            assert p.loso_low <= p.value <= p.loso_high or p.loso_low == p.loso_high, name


def test_every_fitted_constant_reads_a_parameter_of_the_file() -> None:
    fitted = [v for v in vars(C).values() if isinstance(v, FittedConstant)]
    fitted += [v for v in C.FLASH_ATTENTION_EFFICIENCY.values() if isinstance(v, FittedConstant)]
    assert len(fitted) >= 9
    for constant in fitted:
        assert constant.value == parameters()[constant.name].value
        assert constant.source


def test_an_override_is_bounded_named_and_undone() -> None:
    with pytest.raises(ValueError, match="outside its bounds"), overrides({"memory_efficiency": 1.5}):
        pytest.fail("a value above the bound was accepted")
    with pytest.raises(KeyError, match="no fitted parameter"), overrides({"memory_efficiencies": 0.8}):
        pytest.fail("an unknown parameter name was accepted")
    before = value("memory_efficiency")
    with overrides({"memory_efficiency": 0.75}):
        assert C.MEMORY_EFFICIENCY.value == 0.75
    assert value("memory_efficiency") == before


def test_batch1_decode_scales_with_the_fitted_bandwidth_fraction() -> None:
    """Batch-1 decode of an 8B model on an H100 reads every weight per token: its rate is bandwidth x fraction / bytes,
    so moving the fraction from 0.75 to 0.9 speeds decode by 0.9 / 0.75 (less the kernel floors, which do not move)."""
    job = api.InferJob(batch=1, input_len=512, output_len=128)

    def decode_tokens_per_s() -> float:
        perf = api.estimate("llama-3.1-8b", gpu="h100-sxm-80gb", task="infer", job=job).perf
        return float(perf.decode_tokens_per_s)  # type: ignore[union-attr,arg-type]

    with overrides({"memory_efficiency": 0.75}):
        slow = decode_tokens_per_s()
    with overrides({"memory_efficiency": 0.9}):
        fast = decode_tokens_per_s()
    assert fast / slow == pytest.approx(0.9 / 0.75, rel=0.05)
    assert fast / slow < 0.9 / 0.75  # the per-kernel floors do not shrink with bandwidth


def test_the_corpus_is_public_sourced_and_several_hundred_runs() -> None:
    corpus = _module("corpus")
    cases = corpus.load()
    speed = [c for c in cases if c.group in ("train", "infer", "serving_ttft", "serving_tpot", "image", "vision")]
    assert len(speed) >= 600
    assert len({c.source for c in cases}) >= 30
    for group in ("train", "infer", "serving_ttft", "image", "gemm", "attention", "allreduce"):
        assert any(c.group == group for c in cases), group
    for case in cases:
        if case.origin.startswith("public-"):
            continue  # the three earlier files cite a source string per case (checked by their own tests)
        source = case.detail["source"]
        assert source.get("url") or source.get("repo"), case.id
        assert source.get("as_of"), case.id
        text = " ".join(str(v) for v in source.values()).lower()
        assert not any(h in text for h in HELD_OUT), f"{case.id} cites a held-out source"
        if "aiconfigurator" in text:
            assert case.origin == "serving-aiconfigurator-public-split.yaml", case.id  # only the split given to us


def test_a_corpus_file_without_a_source_is_refused_in_one_line(tmp_path: Path) -> None:
    corpus = _module("corpus")
    bad = tmp_path / "train-x.yaml"
    bad.write_text(yaml.safe_dump({"cases": [{"id": "x", "group": "train", "command": ["estimate", "m"],
                                              "key": "perf.train.mfu", "measured": 0.4}]}))
    with pytest.raises(corpus.CorpusError, match="needs a source"):
        corpus.load(files=[bad])


def test_a_large_all_reduce_reaches_the_links_own_rate() -> None:
    """nccl-tests: busbw = algbw x 2(n-1)/n, which for a large message is the ring's link rate."""
    micro = _module("micro")
    link = api.load_catalog().interconnect("nvlink4")
    answer = micro.answer(["allreduce", "h100-sxm-80gb", "8", str(2**34), "nvlink"])
    assert isinstance(answer, dict)
    assert answer["busbw_gb_s"] == pytest.approx(link.achieved_bytes_per_s / 1e9, rel=0.01)


def test_a_band_is_the_10th_to_90th_percentile_and_its_coverage_is_counted_out_of_sample() -> None:
    report = _module("fit_report")
    ratios = [0.5 + 0.1 * i for i in range(11)]  # 0.5 ... 1.5
    low, high = report.band_of(ratios)
    assert (low, high) == pytest.approx((0.6, 1.4))
    assert report.band_of([1.1, 1.2, 1.3, 1.4, 1.5]) == pytest.approx((1.0, 1.46))  # the band always holds 1


def test_every_printed_band_holds_at_least_70_percent_of_runs_out_of_sample() -> None:
    regimes = yaml.safe_load((ROOT / "src/gpuwise/estimate/data/bands.yaml").read_text())["regimes"]
    for name in ("train", "decode", "serving_ttft", "serving_tpot", "image"):
        assert name in regimes, name
        assert regimes[name]["coverage_out_of_sample"] >= 0.70, name
    low, high = bands.band("serve", "ttft_ms", 100.0) or (0.0, 0.0)
    ratios = regimes["serving_ttft"]
    assert low == pytest.approx(100.0 / max(ratios["high_ratio"], 1.0))  # a time: the throughput ratio inverted
    assert high == pytest.approx(100.0 / min(ratios["low_ratio"], 1.0))


def test_a_served_request_pays_the_engines_server_overhead_once() -> None:
    """A request through vLLM's server reaches the scheduler the server's overhead after the client sent it: at one
    client the engine is idle, so TTFT grows by exactly that overhead, in serve-sim and in estimate alike."""
    job = api.InferJob(engine="vllm", batch=1, input_len=512, output_len=64)

    def ttfts() -> tuple[float, float]:
        served = api.serve_sim("llama-3.1-8b", gpu="h100-sxm-80gb", job=job, concurrency=1)
        assert served.at_concurrency is not None
        one = api.estimate("llama-3.1-8b", gpu="h100-sxm-80gb", task="infer", job=job).perf
        return served.at_concurrency.ttft_mean_ms, float(one.ttft_ms)  # type: ignore[union-attr,arg-type]

    with overrides({"vllm_request_overhead_s": 0.0}):
        served_0, estimate_0 = ttfts()
    with overrides({"vllm_request_overhead_s": 0.02}):
        served_20, estimate_20 = ttfts()
    assert served_20 - served_0 == pytest.approx(20.0, abs=0.01)
    assert estimate_20 - estimate_0 == pytest.approx(20.0, abs=1e-6)


def test_tf32_runs_an_fp32_runs_matmuls_on_tensor_cores_where_the_card_has_them() -> None:
    """A100 datasheet: 19.5 TFLOPS FP32, 156 TFLOPS TF32 (dense). --tf32 moves an fp32 run's matmuls to the second;
    a V100 has no TF32 and stays in FP32; memory does not move (weights, gradients and states stay fp32)."""
    job = api.TrainJob(precision="fp32", batch=32, seq=128)
    plain = api.estimate("bert-large-uncased", gpu="a100-sxm-80gb", job=job)
    tf32 = api.estimate("bert-large-uncased", gpu="a100-sxm-80gb", job=job.model_copy(update={"tf32": True}))
    v100 = api.estimate("bert-large-uncased", gpu="v100-sxm2-32gb", job=job.model_copy(update={"tf32": True}))
    assert plain.plan.machine.peak_flops == pytest.approx(19.5e12, rel=0.01)
    assert tf32.plan.machine.peak_flops == pytest.approx(156e12, rel=0.01)
    assert v100.plan.matmul_dtype == "fp32"
    assert tf32.memory.per_gpu_bytes == plain.memory.per_gpu_bytes
    assert tf32.perf.tokens_per_s > 4 * plain.perf.tokens_per_s  # type: ignore[union-attr]


def _case(corpus, case_id: str, source: str, measured: float):  # type: ignore[no-untyped-def]
    return corpus.Case(case_id, "train", source, ("estimate", case_id), "perf.train.mfu", measured, "t.yaml")


def test_a_left_out_source_is_predicted_by_a_fit_that_never_saw_it() -> None:
    """Two publishers disagree: A's runs measure 1.26x what the prior predicts, B's sit on it. Fitted on both, the
    parameter moves part way; A left out is predicted by B alone (the prior, 20.6 % off A), B left out by A alone
    (moved all the way, 26 % off B). A fit that saw its own fold would score better than that."""
    corpus, fit = _module("corpus"), _module("fit")
    spec = {"p": {"bounds": [0.5, 2.0], "prior": 1.0}}
    up = min(v for v in fit.grid(spec["p"]) if v > 1.2)  # a grid value: 4 ** (2 / 12) = 1.26
    cases = [_case(corpus, f"a{i}", "A", up) for i in range(4)] + [_case(corpus, f"b{i}", "B", 1.0) for i in range(4)]
    base = {c.id: 1.0 for c in cases}
    moves = {"p": {v: {c.id: math.log(v) for c in cases} for v in fit.grid(spec["p"])}}  # the prediction is p
    model = fit.Surrogate(cases, base, moves, spec)
    everyone = model.fit(["p"], np.ones(len(cases), dtype=bool))
    assert 1.0 < everyone["p"] < up
    assert model.fit(["p"], ~model.mask(cases[:4]))["p"] == 1.0
    assert model.fit(["p"], ~model.mask(cases[4:]))["p"] == up
    off_a, off_b = 100 * (1 - 1 / up), 100 * (up - 1)
    assert fit.held_out_error(model, ["p"]) == pytest.approx((off_a + off_b) / 2)
    assert fit.held_out_error(model, []) == pytest.approx(off_a / 2)  # the prior: A off, B exact; median of 8


def test_a_missing_corpus_file_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    corpus = _module("corpus")
    assert corpus.main(["--check", "/nonexistent/train-x.yaml"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and len(err.splitlines()) == 1
