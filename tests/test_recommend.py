"""The recommender against hand-reasoned expectations, the seeds' scenarios, and its TCO arithmetic."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.catalog import Catalog
from gpuwise.cli.main import app
from gpuwise.errors import ConfigError
from gpuwise.estimate.cost import tco as cost
from gpuwise.recommend.engine import Option
from gpuwise.recommend.rank import recommend
from gpuwise.recommend.request import load_scenario, parse_request

EXAMPLES = Path(__file__).parents[1] / "examples"
runner = CliRunner()


def _request(**workload: object) -> dict[str, object]:
    return {"workloads": [workload]}


def test_7b_qlora_is_not_recommended_on_an_80_gb_card_to_own(shipped: Catalog) -> None:
    req = parse_request({**_request(model="qwen2-7b", options={"method": "qlora", "ckpt": "full"}),
                         "acquisitions": ["buy-new"]})
    best = recommend(req, shipped).options[0]
    assert shipped.gpus[best.gpu].memory_gb < 80
    assert best.count == 1


def test_70b_full_fine_tuning_is_never_offered_on_one_24_gb_card(shipped: Catalog) -> None:
    rec = recommend(parse_request(_request(model="llama-3.1-70b", options={"method": "full"})), shipped)
    assert not any(o.count == 1 and shipped.gpus[o.gpu].memory_gb <= 24 for o in rec.options)
    one_4090 = [r for r in rec.rejected if r.gpu == "rtx-4090" and r.count == 1]
    assert one_4090 and one_4090[0].code == "memory" and "GiB per GPU, has" in one_4090[0].reason


def test_psu_and_chassis_rejections_carry_their_reasons(shipped: Catalog) -> None:
    req = parse_request({**_request(model="llama-3.1-8b", options={"method": "lora", "ckpt": "full"}),
                         "acquisitions": ["buy-new"], "constraints": {"psu_watts": 1000, "chassis": "desktop"}})
    rec = recommend(req, shipped)
    codes = {(r.gpu, r.code) for r in rec.rejected}
    assert ("h100-sxm-80gb", "chassis") in codes
    sxm = next(r for r in rec.rejected if r.gpu == "h100-sxm-80gb")
    assert "HGX baseboard" in sxm.reason
    assert ("l4", "chassis") in codes  # passive card in a desktop
    power = [r for r in rec.rejected if r.code == "power"]
    # 2 x 575 W RTX 5090 + 200 W host = 1,350 W x 1.2 = 1,620 W > 1,000 W; one card: 775 x 1.2 = 930 W fits
    assert any(r.gpu == "rtx-5090" and r.count == 2 and "exceeds the 1,000 W PSU" in r.reason for r in power)
    assert any(o.gpu == "rtx-5090" and o.count == 1 for o in rec.options)
    assert all(o.count * shipped.gpus[o.gpu].tdp_w + 200 <= 1000 / 1.2 + 1e-6 for o in rec.options)


def test_deadline_sizing_finds_the_smallest_count(shipped: Catalog) -> None:
    req = parse_request({**_request(model="llama-3.1-8b", options={"method": "full", "ckpt": "full", "batch": 2,
                                                                  "seq": 4096}, tokens=2e9, deadline_hours=6),
                         "gpus": ["h100-sxm-80gb"], "acquisitions": ["rent"]})
    rec = recommend(req, shipped)
    assert rec.options and all(o.fit.job_hours is not None and o.fit.job_hours <= 6 for o in rec.options)
    for option in rec.options:  # each way's count is the smallest that meets it (instances differ in network)
        smaller = [r for r in rec.rejected if r.code == "deadline" and r.acquisition == option.acquisition]
        assert smaller and max(r.count for r in smaller) < option.count


def test_a_budget_below_every_option_names_the_nearest(shipped: Catalog) -> None:
    req = parse_request({**_request(model="llama-3.1-70b", options={"method": "qlora", "ckpt": "full"}),
                         "acquisitions": ["buy-new"], "budget_usd": 300})
    rec = recommend(req, shipped)
    assert not rec.options and rec.nearest
    assert all(r.code == "budget" or r.code == "memory" for r in rec.nearest)
    result = runner.invoke(app, ["recommend", "llama-3.1-70b", "--method", "qlora", "--grad-ckpt", "--buy",
                                 "--budget-usd", "300"])
    assert result.exit_code == 0 and "nothing meets every requirement" in result.stdout
    assert "budget" in result.stdout


def test_serving_slo_rejections_and_capacity(shipped: Catalog) -> None:
    req = parse_request({**_request(model="llama-3.1-8b", task="infer", qps=50, p99_ms=2000,
                                    options={"input_len": 512, "output_len": 128}), "acquisitions": ["rent"],
                         "gpus": ["h100-sxm-80gb", "l4"]})
    rec = recommend(req, shipped)
    assert rec.options and all(o.fit.qps_capacity and o.fit.qps_capacity >= 50 for o in rec.options)
    assert all(o.fit.p99_ms and o.fit.p99_ms <= 2000 for o in rec.options)


@pytest.mark.parametrize("scenario", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_scenarios_run_and_give_sane_answers(shipped: Catalog, scenario: Path) -> None:
    rec = recommend(load_scenario(scenario), shipped)
    assert rec.options, scenario
    best = rec.options[0]
    if scenario.stem in ("individual-learner", "qlora-qwen2-7b-16gb"):
        assert best.count == 1 and shipped.gpus[best.gpu].memory_gb <= 32  # one consumer-class card
    if scenario.stem == "student-image-generation":  # SDXL and FLUX.1-dev (fp8, model offload) on one desktop card
        assert best.count == 1 and 12 <= shipped.gpus[best.gpu].memory_gb <= 32 and best.fit.seconds_per_image
    if scenario.stem == "enterprise-pretrain":
        assert best.count >= 32 and shipped.gpus[best.gpu].segment == "datacenter"
    if scenario.stem == "small-team-finetune":
        assert best.count <= 4 and best.fit.job_hours is not None and best.fit.job_hours <= 48
    if scenario.stem == "hpc-lab":  # MD in mixed precision: the GeForce pair; the A100 still shown, with its reasons
        assert (best.count, best.gpu) == (2, "rtx-4090") and any(o.gpu == "a100-pcie-80gb" for o in rec.options)
        assert any("cut-down FP64" in w for w in best.warnings) and any("no ECC" in w for w in best.warnings)


def test_recommend_json_interface() -> None:
    result = runner.invoke(app, ["recommend", "qwen2-7b", "--method", "qlora", "--grad-ckpt", "--top", "3", "--json"])
    doc = json.loads(result.stdout)
    assert result.exit_code == 0 and len(doc["options"]) == 3
    first = doc["options"][0]
    for key in ("gpu", "count", "acquisition", "fits", "per_gpu_gb", "cost_per_job_usd", "tco_usd", "usd_per_hour",
                "why"):
        assert key in first
    assert first["acquisition"] in ("buy-new", "buy-used") or first["acquisition"].startswith("rent:")
    assert all({"gpu", "count", "acquisition", "reason", "code"} <= set(r) for r in doc["rejected"])
    assert doc["pareto"]


def test_report_markdown(tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    result = runner.invoke(app, ["recommend", "--scenario", str(EXAMPLES / "individual-learner.yaml"), "--report",
                                 str(out)])
    assert result.exit_code == 0
    text = out.read_text()
    for heading in ("## Inputs", "## Options", "## Pareto front", "## Rejected", "## Assumptions and sources"):
        assert heading in text


def test_report_shows_each_workload_under_its_option(tmp_path: Path) -> None:
    out = tmp_path / "report.md"
    result = runner.invoke(app, ["recommend", "--scenario", str(EXAMPLES / "small-team-finetune.yaml"), "--report",
                                 str(out)])
    assert result.exit_code == 0, result.output
    rows = [line for line in out.read_text().splitlines() if line.startswith("| | ↳ ")]
    scenario = yaml.safe_load((EXAMPLES / "small-team-finetune.yaml").read_text())
    models = {m["model"] for m in scenario["workloads"]}
    assert rows and all(any(m in row for m in models) for row in rows)


def test_scenario_options_are_validated_up_front() -> None:
    # a zero tp used to divide by zero inside the evaluator; a junk key rejected every GPU with a "count" message
    for options, needle in (({"tp": 0}, "--tp"), ({"junk": 1}, "unknown option 'junk'"),
                            ({"count": 4}, "--count is not used by `gpuwise recommend`")):
        with pytest.raises(ConfigError, match=needle):
            api.recommend({"workloads": [{"model": "llama-3.1-8b", "options": options}]})


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["recommend", "llama-3.1-8b", "--objective", "cheapest"], "objective"),
        (["recommend", "llama-3.1-8b", "--chassis", "garage"], "chassis"),
        (["recommend", "--scenario", "/nonexistent.yaml"], "cannot read scenario"),
        (["recommend", "llama-3.1-8b", "--task", "train", "--deadline-hours", "-1"], "deadline_hours"),
        (["tco", "a800-pcie-80gb"], "has no purchase price"),
        (["tco", "rtx-4090", "--count", "0"], "--count: Input should be greater than or equal to 1"),
        (["recommend", "llama-3.1-8b", "--tp", "0"], "--tp: Input should be greater than or equal to 1"),
        (["recommend", "llama-3.1-8b", "--batch", "-1"], "--batch: Input should be greater than or equal to 1"),
        (["tco", "rtx-4090", "--years", "0"], "--years: Input should be greater than 0"),  # a ZeroDivisionError
        (["tco", "rtx-4090", "--hours-per-day", "25"], "--hours-per-day: Input should be less than or equal to 24"),
        (["tco", "rtx-4090", "--usd-per-kwh", "-1"], "--usd-per-kwh: Input should be greater than or equal to 0"),
        (["tco", "rtx-4090", "--pue", "nan"], "--pue: Input should be a finite number"),
        (["tco", "rtx-4090", "--price-usd", "nan", "--json"], "--price-usd: Input should be a finite number"),
        (["recommend", "llama-3.1-8b", "--need", "warp-drive"], "unknown feature 'warp-drive'"),
        (["recommend", "--scenario", "examples/individual-learner.yaml", "--method", "lora"],
         "--scenario names its own workloads"),
        (["recommend"], "give a MODEL"),
    ],
)
def test_bad_recommend_input_is_one_line(args: list[str], needle: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert needle in result.stderr and result.stderr.strip().count("\n") == 0


# ---- TCO arithmetic, by hand ----------------------------------------------------------------------------
def test_buy_cost_of_a_4090_desktop_by_hand(shipped: Catalog) -> None:
    gpu = shipped.gpus["rtx-4090"]
    usage = cost.Usage(hours_per_day=8, years=3, usd_per_kwh=0.16, pue=1.0)
    buy = cost.buy_cost(gpu, 1, 2500, usage, host_usd=cost.host_cost(gpu, 1, shipped.systems.values()))
    kw = (450 * 0.7 + 200) / 1000  # 0.515 kW at the wall
    assert buy.wall_kw == pytest.approx(kw)
    assert buy.energy_usd == pytest.approx(kw * 8 * 365 * 3 * 0.16)  # 722 USD
    assert buy.host_usd == 1000
    # the decay curve (0.685 after 3 years) capped at the card's dated used price (1,550 of 2,500), less eBay's fee
    assert buy.residual_usd == pytest.approx(2500 * min(0.5 ** (3 / 5.5), 1550 / 2500) * (1 - 0.1325))
    assert buy.repairs_usd == pytest.approx(1 * 0.05 * 3 * 0.5 * 2500)
    assert buy.tco_usd == pytest.approx(2500 + 1000 + buy.energy_usd + buy.repairs_usd - buy.residual_usd)


def test_break_even_hours(shipped: Catalog) -> None:
    gpu = shipped.gpus["rtx-4090"]
    usage = cost.Usage(hours_per_day=8, years=3)
    buy = cost.buy_cost(gpu, 1, 2500, usage, host_usd=1000)
    hours = cost.break_even_hours_per_month(buy, usage, rent_per_hour=0.34)
    assert hours is not None
    fixed = buy.capex_usd + buy.repairs_usd - buy.residual_usd
    assert hours * 36 * (0.34 - buy.wall_kw * 0.16) == pytest.approx(fixed)
    assert cost.break_even_hours_per_month(buy, usage, rent_per_hour=0.01) is None  # renting always wins


def test_tco_command_year_by_year() -> None:
    result = runner.invoke(app, ["tco", "rtx-4090", "--years", "3", "--json"])
    doc = json.loads(result.stdout)
    assert result.exit_code == 0 and len(doc["buy"]["by_year_usd"]) == 3
    rents = doc["rent"]
    assert rents and all(len(r["by_year_usd"]) == 3 for r in rents)
    assert rents[0]["by_year_usd"][2] == pytest.approx(3 * rents[0]["by_year_usd"][0])  # renting is linear


def test_serving_a_model_that_does_not_generate_uses_its_samples_per_second() -> None:
    # BERT and ResNet have no decode step: a replica's capacity is the estimate's samples/s at 80 % utilisation
    # (it was 8,000 QPS with "P99 inf" when the token-generation model was applied to them)
    rec = api.recommend({"workloads": [{"model": "bert-base-uncased", "task": "infer", "qps": 100,
                                        "options": {"input_len": 128, "batch": 1}}], "gpus": ["l4"],
                         "acquisitions": ["buy-new"]})
    best = rec.options[0]
    samples = api.estimate("bert-base-uncased", gpu="l4", task="infer", input_len=128).perf.samples_per_s
    assert best.fit.qps_capacity == pytest.approx(0.8 * samples * best.count)
    assert best.fit.p99_ms is not None and 0 < best.fit.p99_ms < 1000


def test_a_free_batch_is_planned_as_a_dynamic_batcher_would() -> None:
    # --batch left free: the batch of 1..128 that serves the most within the SLO; its capacity is that batch's
    # samples/s (the estimate at that batch) at 80 % utilisation, above the one-at-a-time capacity
    def served(options: dict[str, object], p99_ms: float | None = None) -> Option:
        return api.recommend({"workloads": [{"model": "resnet-50", "task": "infer", "qps": 100, "p99_ms": p99_ms,
                                             "options": options}], "gpus": ["l4"],
                              "acquisitions": ["buy-new"]}).options[0]

    free, single = served({}), served({"batch": 1})
    batch = free.fit.settings[0]["batch"]
    assert isinstance(batch, int) and batch > 1
    samples = api.estimate("resnet-50", gpu="l4", task="infer", batch=batch).perf.samples_per_s
    assert free.fit.qps_capacity == pytest.approx(0.8 * samples)
    assert free.fit.qps_capacity > single.fit.qps_capacity
    assert any("dynamic batcher" in note for note in free.warnings)
    # an SLO of 1.5 batch times takes a smaller batch: at batch B an answer waits for at least two batches
    slo_ms = 1.5 * batch / samples * 1e3
    tight = served({}, p99_ms=slo_ms)
    assert tight.fit.settings[0]["batch"] < batch
    assert tight.fit.p99_ms is not None and tight.fit.p99_ms <= slo_ms


@pytest.mark.parametrize("gpu", ["h100-sxm-80gb", "l40s", "rtx-4090"])
def test_serving_with_no_latency_target_plans_a_finite_capacity(gpu: str) -> None:
    # With no SLO an overloaded rate has an infinite P99; the bisection once took "inf <= inf" as a pass and
    # rated every card at 8,000 QPS (P99 inf, a JSON crash). tests/test_serving_capacity.py checks the rate itself.
    rec = api.recommend({"workloads": [{"model": "llama-3.1-8b", "task": "infer", "qps": 5}], "gpus": [gpu],
                         "acquisitions": ["buy-new", "rent"]})
    assert rec.options and all(o.fit.qps_capacity is not None and 5 <= o.fit.qps_capacity < 100 * o.count
                               for o in rec.options)
    assert all(o.fit.p99_ms is not None and math.isfinite(o.fit.p99_ms) for o in rec.options)


def test_flags_override_a_scenarios_money_and_ranking() -> None:
    # the flags were once ignored beside --scenario: now money, usage, system and ranking flags override the file
    scenario = str(EXAMPLES / "individual-learner.yaml")
    base = json.loads(runner.invoke(app, ["recommend", "--scenario", scenario, "--json"]).stdout)
    tight = json.loads(runner.invoke(app, ["recommend", "--scenario", scenario, "--budget-usd", "800", "--top", "3",
                                           "--objective", "time", "--json"]).stdout)
    assert base["request"]["budget_usd"] == 2500 and tight["request"]["budget_usd"] == 800
    assert tight["request"]["objective"] == "time" and len(tight["options"]) <= 3
    assert tight["request"]["constraints"] == base["request"]["constraints"]  # the file's own, untouched
    assert all(o["capex_usd"] is None or o["capex_usd"] <= 800 for o in tight["options"])


def test_a_free_checkpointing_knob_is_turned_on_to_fit_and_an_explicit_one_is_kept(shipped: Catalog) -> None:
    """QLoRA of an 8B model with --ckpt left unset must still be offered one 24 GB card (issue 13, item 5)."""
    free = parse_request({"workloads": [{"model": "llama-3.1-8b", "task": "train", "options": {"method": "qlora"}}],
                          "gpus": ["rtx-4090"], "acquisitions": ["buy-new"]})
    offered = recommend(free, shipped).options
    assert offered and offered[0].count == 1
    assert any("used activation checkpointing (--ckpt full" in w for w in offered[0].warnings)
    fixed = parse_request({"workloads": [{"model": "llama-3.1-8b", "task": "train",
                                          "options": {"method": "qlora", "ckpt": "none"}}],
                           "gpus": ["rtx-4090"], "acquisitions": ["buy-new"]})
    kept = recommend(fixed, shipped)
    # without checkpointing every layer keeps its activations (~21 GB at 2,048 tokens: QLoRA's 4-bit linears return
    # fp32 under PEFT's upcast norms), which ZeRO does not shard; the loss, left free, is fused, and only four
    # cards sharding the rest fit -- the explicit --ckpt none stays
    assert kept.options and kept.options[0].count == 4
    notes = [w for o in kept.options for w in o.warnings]
    assert not any("checkpointing" in w for w in notes) and any("fused linear cross-entropy" in w for w in notes)


def test_own_host_drops_the_host_cost_and_keeps_a_used_3090_within_a_student_budget(shipped: Catalog) -> None:
    """Issue 14: a desktop owner with 1,500 USD asks for 8B QLoRA; the used RTX 3090 (650 USD, dated used price) is
    among the answers once the PC they own is not charged again."""
    base = {"workloads": [{"model": "llama-3.1-8b", "task": "train", "options": {"method": "qlora"}}],
            "budget_usd": 1500, "top": 10}
    owned = recommend(parse_request({**base, "constraints": {"own_host": True}}), shipped)
    assert any(o.gpu == "rtx-3090" and o.acquisition == "buy-used" for o in owned.options)
    assert all(o.capex_usd is None or o.capex_usd <= 1500 for o in owned.options)
    plain = recommend(parse_request(base), shipped)
    used = next(o for o in owned.options if o.acquisition == "buy-used" and o.gpu == "rtx-3090")
    again = [o for o in plain.options if o.acquisition == "buy-used" and o.gpu == "rtx-3090"]
    assert not again or (again[0].capex_usd or 0) > (used.capex_usd or 0)


def test_deadlines_are_held_to_the_slow_end_of_the_speed_band(shipped: Catalog) -> None:
    req = parse_request({"workloads": [{"model": "llama-3.1-8b", "task": "train", "options": {"method": "lora",
                                        "ckpt": "full"}, "tokens": 50_000_000, "deadline_hours": 24}],
                         "gpus": ["rtx-4090", "h100-sxm-80gb"]})
    rec = recommend(req, shipped)
    assert rec.options and all(o.fit.job_hours_high is not None and o.fit.job_hours_high <= 24 for o in rec.options)
    assert all((o.fit.job_hours_high or 0) >= (o.fit.job_hours or 0) for o in rec.options)


@pytest.mark.parametrize("scenario", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.stem)
def test_the_default_table_reads_at_80_columns_without_cutting_ids(shipped: Catalog, scenario: Path) -> None:
    from rich.console import Console

    from gpuwise.report.recommend import recommendation_view

    rec = recommend(load_scenario(scenario), shipped)
    console = Console(width=80, record=True, color_system=None)
    console.print(recommendation_view(rec))
    lines = console.export_text().splitlines()
    table = [line for line in lines if line.strip()[:1].isdigit() and " x " in line]
    assert table and all(len(line) <= 80 and "…" not in line for line in table)
    header = next(line for line in lines if "configuration" in line)
    assert "TCO $" in header  # the last column is shown whole, not cut at the edge
    for option in rec.options[: rec.request.top]:
        assert any(f"{option.count} x {option.gpu}" in line for line in table)


def test_one_user_at_4_bit_gets_a_70b_model_on_two_24_gb_cards(shipped: Catalog) -> None:
    """Issue 14: 70B at 4-bit for one user is offered on two 24-32 GB cards. Llama-3.1-70B AWQ is about 36 GiB of
    weights (70e9 x 4.16 bits), so one 24 GB card cannot hold it and two split by tensor parallelism can; a 3090 pair
    reads 2 x 936 GB/s, far above what 10 tokens/s of one stream needs."""
    req = parse_request({"workloads": [{"model": "llama-3.1-70b", "task": "infer", "min_tokens_per_s": 10,
                                        "options": {"quant": "awq-int4"}}],
                         "constraints": {"own_host": True}, "top": 5})
    rec = recommend(req, shipped)
    assert any(o.count == 2 and 24 <= shipped.gpus[o.gpu].memory_gb <= 32 for o in rec.options)
    assert all(o.fit.tokens_per_s is not None and o.fit.tokens_per_s >= 10 for o in rec.options)
    with pytest.raises(Exception, match="without --qps"):
        parse_request({"workloads": [{"model": "llama-3.1-70b", "task": "infer", "min_tokens_per_s": 10, "qps": 2}]})


def test_leaving_the_weight_format_free_makes_8b_serving_much_cheaper(shipped: Catalog) -> None:
    """Issue 14: at 50 QPS within a 5 s P99, letting recommend try FP8 / NVFP4 / AWQ where the card runs them costs far
    less than forcing bf16; the chosen format is named with its accuracy trade-off."""
    def best(options: dict[str, object]) -> Any:
        req = parse_request({"workloads": [{"model": "llama-3.1-8b", "task": "infer", "qps": 50, "p99_ms": 5000,
                                            "options": options}]})
        return recommend(req, shipped).options[0]

    free, forced = best({}), best({"quant": "bf16"})
    assert free.tco_usd < 0.5 * forced.tco_usd
    assert any("--quant was left free" in w for w in free.warnings)


def test_sxm_and_oam_modules_are_bought_only_on_whole_baseboards(shipped: Catalog) -> None:
    """Issue 14: one MI300X or two B200 are not for sale; the modules come on 8-GPU (4 or 8 for HGX H100/H200/A100)
    baseboards. Renting one from a cloud stays possible."""
    req = parse_request({"workloads": [{"model": "llama-3.1-70b", "task": "infer", "qps": 1,
                                        "options": {"quant": "bf16"}}],
                         "gpus": ["mi300x", "b200-sxm-180gb", "h100-sxm-80gb"], "acquisitions": ["buy-new"]})
    rec = recommend(req, shipped)
    for option in rec.options:
        boards = shipped.gpus[option.gpu].board_gpus or (1,)
        assert any(option.count % b == 0 for b in boards), (option.gpu, option.count)
    assert any(r.gpu == "b200-sxm-180gb" and r.count == 2 and "baseboards" in r.reason for r in rec.rejected)


def test_a_service_is_costed_around_the_clock_and_per_million_tokens(shipped: Catalog) -> None:
    """Issue 14: serving at 24 h/day by default (a workstation's 8 h/day only when usage says so), and USD per
    million generated tokens = the hourly cost / (QPS x output tokens x 3,600) x 10^6."""
    serving = {"workloads": [{"model": "llama-3.1-8b", "task": "infer", "qps": 2, "options": {"output_len": 256}}],
               "gpus": ["rtx-4090"], "acquisitions": ["buy-new"]}
    assert parse_request(serving).usage.hours_per_day == 24
    assert parse_request({**serving, "usage": {"hours_per_day": 8}}).usage.hours_per_day == 8
    option = recommend(parse_request(serving), shipped).options[0]
    tokens_per_s = option.fit.qps_capacity * 256  # type: ignore[operator]
    assert option.usd_per_mtok == pytest.approx(option.usd_per_hour / (tokens_per_s * 3600) * 1e6)


def test_every_option_says_what_recommend_chose() -> None:
    """Issue 14: JSON `settings` per workload -- the knobs turned on and the weight format picked, as evaluated."""
    result = runner.invoke(app, ["recommend", "llama-3.1-8b", "--method", "qlora", "--top", "5", "--json"])
    doc = json.loads(result.stdout)
    assert result.exit_code == 0 and all(o["settings"] and o["settings"][0]["method"] == "qlora"
                                         for o in doc["options"])
    for option in doc["options"]:
        fused = any("(--loss fused;" in w for w in option["warnings"])
        assert (option["settings"][0]["loss"] == "fused") == fused
    served = json.loads(runner.invoke(app, ["recommend", "llama-3.1-8b", "--task", "infer", "--qps", "50", "--p99-ms",
                                            "5000", "--top", "3", "--json"]).stdout)
    assert all({"quant", "engine", "tp"} <= set(o["settings"][0]) for o in served["options"])


# ---- one-off jobs (--usage one-off) -----------------------------------------------------------------------------
def test_a_card_bought_new_resells_at_most_at_its_used_price_less_the_fee(shipped: Catalog) -> None:
    """A 3090 bought at its 1,499 USD MSRP sells as used the next day: 650 USD (its dated used price), less eBay's
    13.25% fee, whatever the decay curve says for a month."""
    gpu = shipped.gpus["rtx-3090"]
    assert cost.residual_fraction(gpu, 1 / 12, 1499) == pytest.approx(650 / 1499 * (1 - 0.1325))
    assert cost.residual_fraction(gpu, 1 / 12, 650) == pytest.approx(0.5 ** (1 / 12 / 5.5) * (1 - 0.1325))


def test_rent_wins_a_one_off_month_of_pretraining(shipped: Catalog) -> None:
    """Issue 14: a one-off job on 48+ H100s bought and sold again loses the host (not resold), the resale haircut
    and the fee; renting bills only the job's hours. Both are checked by hand from the option's own figures."""
    job = {"model": "llama-3.1-70b", "task": "train", "tokens": 5e9, "deadline_hours": 720,
           "options": {"method": "full", "ckpt": "full", "tp": 8}}
    rec = recommend(parse_request({"workloads": [job], "gpus": ["h100-sxm-80gb"], "usage": {"pattern": "one-off"},
                                   "top": 50}), shipped)
    best = rec.options[0]
    assert best.acquisition.startswith("rent")
    hours = best.fit.job_hours
    assert hours is not None and best.tco_usd == pytest.approx(best.usd_per_hour * hours)
    bought = next(o for o in rec.options if o.acquisition == "buy-new")
    gpus, host = bought.count * 30000, bought.count * 13750
    resale = gpus * 0.3 ** (hours / 8760 / 3) * (1 - 0.1325)
    assert bought.tco_usd > gpus + host - resale  # plus the job's energy and repairs
    assert bought.tco_usd > 5 * best.tco_usd


def test_one_off_without_a_training_job_is_refused() -> None:
    with pytest.raises(ConfigError, match="one-off costs one training or HPC job"):
        parse_request({"workloads": [{"model": "llama-3.1-8b", "task": "infer", "qps": 5}],
                       "usage": {"pattern": "one-off"}})


def test_a_mac_is_offered_for_a_4_bit_70b_at_home() -> None:
    # The Mac Studio M3 Ultra 96 GB (Apple's list price 5,299 USD from 2026-06-25) holds a 4-bit 70B (about 40 GB)
    # in the 3/4 of its memory macOS lets the GPU wire by default
    rec = api.recommend({"workloads": [{"model": "llama-3.1-70b", "task": "infer",
                                        "options": {"quant": "gguf-q4_k_m", "engine": "llamacpp"}}],
                         "constraints": {"os": "macos"}, "acquisitions": ["buy-new"]})
    assert rec.options and rec.options[0].gpu.startswith("apple-")
    assert rec.options[0].capex_usd is not None and rec.options[0].capex_usd >= 5299


# ---- issue 36: every answer survives its own check -------------------------------------------------------------
def test_the_teams_70b_for_50_users_holds_in_its_own_simulation() -> None:
    """50 users who read for 60 s send at most 50 / 60 = 0.833 requests/s. The lead used to be one RTX PRO 6000 at
    FP8, planned at 0.89 QPS by the closed form, whose own serve-sim command found 0.82 QPS within the 20 s P99. Each
    option shown now runs its command as printed: the simulation meets the SLO at 0.833 QPS and its highest rate
    within the SLO is the capacity the option shows."""
    import shlex

    done = runner.invoke(app, ["recommend", "llama-3.3-70b", "--task", "infer", "--users", "50", "--think-s", "60",
                               "--p99-ms", "20000", "--top", "3", "--json"])
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    assert doc["request"]["usage"]["hours_per_day"] == 24  # a service runs around the clock
    for option in doc["options"]:
        (command,) = option["commands"]
        simulated = json.loads(runner.invoke(app, [*shlex.split(command)[1:], "--json"]).stdout)
        assert simulated["at_rate"]["e2e_ms"]["p99"] <= 20000 and not simulated["at_rate"]["saturated"]
        assert simulated["max_qps"] >= 50 / 60
        assert option["qps_capacity"] == pytest.approx(simulated["max_qps"])
        assert option["p99_ms"] == pytest.approx(simulated["at_rate"]["e2e_ms"]["p99"], rel=1e-6)


def test_the_defaults_behind_the_cost_are_said_above_the_answer(tmp_path: Path) -> None:
    """A team that fine-tunes and serves, with no usage and no job size given: the hardware serves around the clock
    (24 h/day, not a workstation's 8), and the answer opens with every default its cost rests on; what the user
    gave is not repeated."""
    train = {"model": "llama-3.1-8b", "task": "train", "options": {"method": "qlora"}}
    serve = {"model": "llama-3.1-8b", "task": "infer", "qps": 0.5, "options": {"input_len": 512}}
    scenario: dict[str, Any] = {"workloads": [train, serve], "gpus": ["rtx-4090", "rtx-5090"],
                                "acquisitions": ["buy-new"], "usage": {"years": 2}}
    path = tmp_path / "team.yaml"
    path.write_text(yaml.safe_dump(scenario))
    done = runner.invoke(app, ["recommend", "--scenario", str(path)])
    assert done.exit_code == 0, done.output
    assert done.stdout.startswith("defaults left free: 24 h/day (a service runs around the clock")
    assert "24 h/day for 2 years" in done.stdout  # and it is what the cost used
    left = json.loads(runner.invoke(app, ["recommend", "--scenario", str(path), "--json"]).stdout)["defaults"]
    assert left == ["24 h/day (a service runs around the clock; --hours-per-day)",
                    "costed over the hardware's life, not as one job (--usage one-off)",
                    "0.16 USD/kWh (--usd-per-kwh)", "100,000,000 tokens per training job of llama-3.1-8b (--tokens)",
                    "256 tokens out per request of llama-3.1-8b (--output-len)"]
    given = {**scenario, "usage": {"hours_per_day": 10, "years": 2, "usd_per_kwh": 0.3}}
    given["workloads"] = [{**train, "tokens": 5e7}, serve]
    path.write_text(yaml.safe_dump(given))
    answer = json.loads(runner.invoke(app, ["recommend", "--scenario", str(path), "--json"]).stdout)
    assert answer["defaults"] == ["costed over the hardware's life, not as one job (--usage one-off)",
                                  "256 tokens out per request of llama-3.1-8b (--output-len)"]
    assert answer["request"]["usage"]["hours_per_day"] == 10


def test_one_user_at_home_is_costed_at_a_working_day_and_says_so() -> None:
    rec = api.recommend({"workloads": [{"model": "llama-3.1-8b", "task": "infer", "min_tokens_per_s": 20}],
                         "gpus": ["rtx-4090"], "acquisitions": ["buy-new"]})
    assert rec.request.usage.hours_per_day == 8
    assert rec.defaults[0] == "8 h/day (a workstation's working day; --hours-per-day)"
