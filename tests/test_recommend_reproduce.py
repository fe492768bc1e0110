"""Every option `recommend` shows holds when reproduced (issue 36): over generated requests -- training and
serving, preset models, budgets, deadlines, SLOs, users, memory headroom -- each shown option's own `reproduce`
command(s), run through the CLI, give the option's figures and meet the request's constraints.

The truth is what the command prints, not what the recommender computed: serve-sim's simulation (its P99 at the
requested rate, the highest rate within the SLO, a replica's memory), `estimate`'s memory and speed. The request's
constraints are checked on those printed figures: memory within the card with the headroom the option states, the
SLO at the requested rate, the deadline at the slow end of the speed band the option is held to, the budgets.
"""

from __future__ import annotations

import io
import json
import shlex
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.cli.main import app
from gpuwise.recommend.engine import Option, Recommendation
from gpuwise.recommend.fit import Fit
from gpuwise.recommend.request import Workload
from gpuwise.report.recommend import recommendation_json, recommendation_view

runner = CliRunner()
SERVED = ("llama-3.1-8b", "qwen2.5-7b", "mistral-7b", "gemma-2-9b", "qwen2.5-14b", "qwen2.5-32b", "llama-3.3-70b",
          "mixtral-8x7b", "phi-3-mini")
TRAINED = ("llama-3.2-3b", "llama-3.1-8b", "qwen2.5-7b", "gemma-2-9b", "qwen2.5-14b")
GPUS = ("rtx-4090", "rtx-5090", "rtx-3090", "rtx-4060-ti-16gb", "rtx-pro-6000-blackwell", "rtx-6000-ada", "l4",
        "l40s", "a10", "a100-pcie-80gb", "a100-sxm-80gb", "h100-pcie-80gb", "h100-sxm-80gb", "h200-sxm-141gb",
        "mi300x", "rx-7900-xtx", "apple-m3-ultra-96gb", "dgx-spark-128gb")
GIB = 2**30


def _serving() -> st.SearchStrategy[dict[str, Any]]:
    lengths = st.sampled_from([{}, {"input_len": 512, "output_len": 128}, {"input_len": 2048, "output_len": 512}])
    quant = st.sampled_from([{}, {}, {"quant": "bf16"}, {"quant": "awq-int4"},
                             {"engine": "llamacpp", "quant": "gguf-q4_k_m"}, {"engine": "sglang"}])
    rate = st.one_of(st.builds(lambda users, think: {"users": users, "think_s": think},
                               st.sampled_from([5, 20, 50, 200]), st.sampled_from([10.0, 30.0, 60.0])),
                     st.builds(lambda qps: {"qps": qps}, st.sampled_from([0.5, 2.0, 8.0, 30.0, 100.0])), st.just({}))
    slo = st.sampled_from([{}, {"p99_ms": 5000}, {"p99_ms": 20000}, {"p99_ms": 60000},
                           {"p99_ms": 1500, "slo": "ttft"}, {"ttft_p99_ms": 1500, "tpot_p99_ms": 60},
                           {"e2e_p99_ms": 20000, "tpot_p99_ms": 40}])
    return st.builds(lambda model, options, extra, target, latency: {
        "model": model, "task": "infer", "options": {**options, **extra}, **target, **latency},
        st.sampled_from(SERVED), lengths, quant, rate, slo)


def _one_user() -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda model, speed: {"model": model, "task": "infer", "min_tokens_per_s": speed},
                     st.sampled_from(SERVED), st.sampled_from([5.0, 20.0, 60.0]))


def _training() -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(lambda model, method, tokens, deadline: {
        "model": model, "task": "train", "options": {"method": method}, "tokens": tokens,
        **({"deadline_hours": deadline} if deadline else {})},
        st.sampled_from(TRAINED), st.sampled_from(["lora", "qlora", "full"]), st.sampled_from([1e7, 1e8, 1e9]),
        st.sampled_from([None, 4.0, 48.0, 720.0]))


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    kinds = {"serve": _serving(), "train": _training(), "one user": _one_user()}
    kind = draw(st.sampled_from(["serve", "train", "serve", "one user", "train", "train and serve"]))
    workloads = [draw(kinds["train"]), draw(kinds["serve"])] if kind == "train and serve" else [draw(kinds[kind])]
    request: dict[str, Any] = {"workloads": workloads, "top": 4,
                               "constraints": {"min_headroom": draw(st.sampled_from([0.0, 0.1, 0.25])),
                                               "max_gpus": draw(st.sampled_from([1, 4, 8, 16, 64]))}}
    if draw(st.integers(0, 5)):  # most requests on a few cards (fast); one in six on the whole catalog
        request["gpus"] = draw(st.lists(st.sampled_from(GPUS), min_size=2, max_size=5, unique=True))
    request["acquisitions"] = draw(st.sampled_from([["buy-new", "buy-used", "rent"], ["rent"], ["buy-new"]]))
    budget = draw(st.sampled_from([None, None, 3000.0, 20000.0]))
    if budget is not None:
        request["budget_usd"] = budget
    monthly = draw(st.sampled_from([None, None, 1500.0]))
    if monthly is not None:
        request["monthly_budget_usd"] = monthly
    if kind.startswith("train") and draw(st.booleans()):
        request["usage"] = {"pattern": "one-off"}
    return request


def _run(command: str) -> dict[str, Any]:
    argv = shlex.split(command)
    assert argv[0] == "gpuwise"
    done = runner.invoke(app, [*argv[1:], "--json"])
    assert done.exit_code == 0, (command, done.output)
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def _memory(option: Option, fit: Fit, memory: dict[str, Any], headroom: float) -> None:
    """The command's memory is the option's, fits the card, and leaves the headroom unless the option says not."""
    assert memory["per_gpu_gib"] == pytest.approx(fit.per_gpu_bytes / GIB, rel=1e-3, abs=1e-3)
    share = memory["per_gpu_gib"] / memory["capacity_gib"]
    assert share <= 1.0
    if "headroom free" not in option.why:
        assert share <= 1 - headroom + 1e-6, (option.gpu, share, headroom)


def _serving_holds(workload: Workload, option: Option, fit: Fit, doc: dict[str, Any], headroom: float) -> None:
    """serve-sim's own figures: the option's capacity, the SLO that binds it and its P99, every SLO met at the
    requested rate."""
    targets = workload.slos.targets_ms
    binding = doc["slos"]["binding"] if targets else None
    assert fit.binding_slo == binding, fit.commands
    key = f"{workload.slos.headline}_ms"  # the P99 every option shows: the request's headline SLO's
    assert fit.p99_slo == workload.slos.headline
    at_rate, slo = doc["at_rate"], targets or None
    if workload.qps is not None:
        assert not at_rate["saturated"], (option.gpu, option.count, fit.commands)
        for name, target in targets.items():
            assert (at_rate[f"{name}_ms"]["p99"] or 0.0) <= target, (fit.commands, name, at_rate[f"{name}_ms"])
        if slo is not None:
            assert doc["max_qps"] >= workload.qps, (fit.commands, doc["max_qps"])
    capacity = doc["max_qps"] if slo is not None else doc["closed_form"]["max_qps"]
    assert fit.qps_capacity == pytest.approx(capacity, rel=1e-3, abs=1e-4), fit.commands
    shown = at_rate if workload.qps is not None or slo is None else doc["at_max_qps"]
    assert fit.p99_ms == pytest.approx(shown[key]["p99"], rel=1e-4, abs=1e-3), fit.commands  # JSON: 0.001 ms
    _memory(option, fit, doc["memory"], headroom)


def _training_holds(workload: Workload, option: Option, fit: Fit, doc: dict[str, Any], headroom: float) -> None:
    """estimate's own figures: the option's memory and speed; the deadline at the speed band's slow end."""
    train = doc["perf"]["train"]
    assert doc["memory"]["fits"]
    assert train["tokens_per_s"] == pytest.approx(fit.tokens_per_s, rel=1e-3)
    assert workload.tokens / train["tokens_per_s"] / 3600 == pytest.approx(fit.job_hours, rel=1e-3)
    slowest = train.get("band", {}).get("tokens_per_s", {}).get("low", train["tokens_per_s"])
    if workload.deadline_hours is not None:
        assert workload.tokens / slowest / 3600 <= workload.deadline_hours * (1 + 1e-6)
    _memory(option, fit, doc["memory"], headroom)


def _one_user_holds(workload: Workload, option: Option, fit: Fit, doc: dict[str, Any], headroom: float) -> None:
    """One stream: estimate's decode speed (or a layer split's) is the option's and reaches the target."""
    if "cards" in doc:  # split by layers: the fullest card
        speed = doc["tokens_per_s"]
        fullest = max(doc["cards"], key=lambda c: c["per_gpu_gib"] / c["capacity_gib"])
        memory = {"per_gpu_gib": fullest["per_gpu_gib"], "capacity_gib": fullest["capacity_gib"]}
    else:
        speed, memory = 1e3 / doc["perf"]["infer"]["tpot_ms"], doc["memory"]
    assert speed == pytest.approx(fit.tokens_per_s, rel=1e-3)
    assert speed >= (workload.min_tokens_per_s or 0.0)
    _memory(option, fit, memory, headroom)


def _money(rec: Recommendation, option: Option) -> None:
    request = rec.request
    if request.budget_usd is not None and option.capex_usd is not None:
        assert option.capex_usd <= request.budget_usd
    if request.monthly_budget_usd is not None and option.acquisition.startswith("rent"):
        month = 24 * 365 / 12  # one job runs around the clock: a month of it, or all of it when shorter
        hours = min(option.fit.job_hours or 0.0, month) if request.usage.pattern == "one-off" else (
            request.usage.hours_per_day * 365 / 12)
        assert option.usd_per_hour * hours <= request.monthly_budget_usd * 1.0001


def _reads_at_80_columns(rec: Recommendation) -> None:
    console = Console(width=80, record=True, color_system=None, file=io.StringIO())
    console.print(recommendation_view(rec))
    for line in console.export_text().splitlines():
        assert len(line) <= 80 and "…" not in line, line


@settings(max_examples=40, deadline=None, derandomize=True, database=None, phases=(Phase.generate,),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(request=requests())
def test_every_shown_option_holds_when_its_command_is_run(request: dict[str, Any]) -> None:
    """40 requests (a recommendation and its commands each: no shrinking, which would rerun them by the hundred)."""
    note(json.dumps(request))
    rec = api.recommend(request)
    _reads_at_80_columns(rec)
    shown = recommendation_json(rec)["options"]
    headroom = rec.request.constraints.min_headroom
    for option, printed in zip(rec.options[: rec.request.top], shown, strict=True):
        assert printed["commands"] == list(option.fit.commands)
    ranked = {(o.gpu, o.count, o.acquisition): o for o in rec.options}  # with its reason (the headroom it states)
    pareto = [ranked[o.gpu, o.count, o.acquisition] for o in rec.pareto  # printed too, by name and time
              if o not in rec.options[: rec.request.top]]
    for option in [*rec.options[: rec.request.top], *pareto]:
        _money(rec, option)
        for workload, fit in zip(rec.request.workloads, option.fit.workloads, strict=True):
            if workload.task == "infer" and workload.min_tokens_per_s is None:
                (command,) = fit.commands
                _serving_holds(workload, option, fit, _run(command), headroom)
            elif workload.task == "infer":
                (command,) = fit.commands
                _one_user_holds(workload, option, fit, _run(command), headroom)
            else:
                (command,) = fit.commands
                _training_holds(workload, option, fit, _run(command), headroom)
