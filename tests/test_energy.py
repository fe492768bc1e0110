"""Energy per output token (issue 40.4) against arithmetic worked by hand from its sources.

Sources of the hand figures: NVIDIA H100 SXM datasheet, 700 W max TDP; NVIDIA L4 datasheet, 72 W; Splitwise (Patel et
al., ISCA 2024) power model, Mutinifni/splitwise-sim@378088013a54 configs/power_model/constant.yaml: H100 idle 75 W,
prompt 700 W, token 380 W; A100 idle 63 W, prompt 400 W, token 250 W of 400 W -- as fractions of TDP, idle
(75/700 + 63/400)/2 = 0.13, prompt 1.0, token (380/700 + 250/400)/2 = 0.58; the host share aiinframap's server at
1.3 x GPU TDP (0.3 x 700 W = 210 W, above a 200 W desktop host); 1 kWh = 3.6e6 J.
"""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from gpuwise.catalog import Catalog
from gpuwise.cli.main import app
from gpuwise.estimate.cost.energy import board_power_w, energy_at
from gpuwise.estimate.cost.tco import Usage
from gpuwise.recommend.energy import option_energy
from gpuwise.recommend.engine import Option
from gpuwise.recommend.fit import Fit
from gpuwise.recommend.rank import ranking_key
from gpuwise.recommend.request import parse_request

runner = CliRunner()
ENERGY_KEYS = {"joules_per_output_token", "gpu_w", "host_w", "pue", "busy_fraction", "electricity_usd_per_mtok",
               "electricity_share"}


def _json(args: list[str]) -> dict:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_splitwise_fractions_match_its_measured_draws() -> None:
    """The global fractions reproduce Splitwise's measured H100 draws within its two cards' spread."""
    assert board_power_w(700, 1.0, 1.0) == pytest.approx(700)  # prompt phase: 700 W
    assert board_power_w(700, 1.0, 0.0) == pytest.approx(380, rel=0.08)  # token phase: 380 W (0.58 x 700 = 406)
    assert board_power_w(700, 0.0, 0.5) == pytest.approx(75, rel=0.25)  # idle: 75 W (0.13 x 700 = 91)


def test_h100_at_measured_throughput_by_hand(shipped: Catalog) -> None:
    """One H100 SXM 62 % busy, a fifth of it prefilling, 1,000 tokens/s, PUE 1.3, 0.16 USD/kWh, 2 USD per Mtok:
    P_load = 700 x (0.2 x 1.0 + 0.8 x 0.58) = 464.8 W; P_idle = 700 x 0.13 = 91 W;
    P = 91 + (464.8 - 91) x 0.62 = 322.756 W; J/token = (322.756 + 210) x 1.3 / 1000 = 0.6925828;
    electricity = 0.6925828 x 1e6 / 3.6e6 kWh x 0.16 = 0.03078146 USD per Mtok, 1.539 % of 2 USD."""
    e = energy_at(shipped.gpus["h100-sxm-80gb"], 1, busy_fraction=0.62, prefill_share=0.2,
                  output_tokens_per_s=1000.0, usage=Usage(pue=1.3, usd_per_kwh=0.16), usd_per_mtok=2.0)
    assert e is not None
    assert e.gpu_w == pytest.approx(322.756)
    assert e.host_w == pytest.approx(210.0)
    assert e.joules_per_output_token == pytest.approx(0.6925828)
    assert e.electricity_usd_per_mtok == pytest.approx(0.03078146, rel=1e-6)
    assert e.electricity_share == pytest.approx(0.01539073, rel=1e-6)


def test_eight_cards_share_one_host_draw(shipped: Catalog) -> None:
    """Eight H100s fully busy decoding at 8,000 tokens/s, PUE 1: 8 x 406 W + 8 x 210 W host = 4,928 W -> 0.616 J."""
    e = energy_at(shipped.gpus["h100-sxm-80gb"], 8, busy_fraction=1.0, prefill_share=0.0,
                  output_tokens_per_s=8000.0, usage=Usage(pue=1.0))
    assert e is not None and e.electricity_share is None  # no price given: J/token and electricity alone
    assert e.joules_per_output_token == pytest.approx(4928 / 8000)


def test_power_rises_with_busy_fraction_and_prefill() -> None:
    grid = [board_power_w(400, u / 10, s / 10) for u in range(11) for s in range(11)]
    assert min(grid) == pytest.approx(0.13 * 400) and max(grid) == pytest.approx(400)
    assert all(board_power_w(400, u / 10, 0.3) < board_power_w(400, (u + 1) / 10, 0.3) for u in range(10))
    assert all(board_power_w(400, 0.7, s / 10) < board_power_w(400, 0.7, (s + 1) / 10) for s in range(10))


def _option(gpu: str, tokens_per_s: float, tco_usd: float) -> Option:
    fit = Fit(per_gpu_bytes=20e9, qps_capacity=tokens_per_s / 256, output_tokens_per_s=tokens_per_s)
    return Option(gpu=gpu, count=1, acquisition="buy-new", fit=fit, usd_per_hour=1.0, tco_usd=tco_usd,
                  cost_per_job_usd=None, capex_usd=None, wall_kw=1.0)


def test_ranking_by_energy_orders_options_by_hand(shipped: Catalog) -> None:
    """1,024 prompt and 256 output tokens: prefill share 1024 / 1280 = 0.8, P_load = TDP x (0.8 + 0.2 x 0.58).
    H100 at 1,000 tokens/s: (700 x 0.916 + 210) / 1000 = 0.8512 J; L4 at 100 tokens/s: (72 x 0.916 + 200) / 100 =
    2.65952 J. By energy the H100 is first though the L4 is cheaper (first by TCO)."""
    request = parse_request({"workloads": [{"model": "llama-3.1-8b", "task": "infer", "qps": 1,
                                            "options": {"input_len": 1024, "output_len": 256}}],
                             "objective": "energy", "usage": {"pue": 1.0}})
    h100, l4 = _option("h100-sxm-80gb", 1000.0, 50_000), _option("l4", 100.0, 5_000)
    energy = {o.gpu: option_energy(o, shipped, request) for o in (h100, l4)}
    assert energy["h100-sxm-80gb"].joules_per_output_token == pytest.approx(0.8512)  # type: ignore[union-attr]
    assert energy["l4"].joules_per_output_token == pytest.approx(2.65952)  # type: ignore[union-attr]
    by_energy = ranking_key("energy", energy=lambda o: option_energy(o, shipped, request))
    assert [o.gpu for o in sorted([l4, h100], key=by_energy)] == ["h100-sxm-80gb", "l4"]
    assert [o.gpu for o in sorted([h100, l4], key=ranking_key("tco"))] == ["l4", "h100-sxm-80gb"]


def test_estimate_json_energy_and_flags_flow() -> None:
    base = ["estimate", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--task", "infer", "--json"]
    one = _json([*base, "--pue", "1.0", "--usd-per-kwh", "0.1"])
    more = _json([*base, "--pue", "1.5", "--usd-per-kwh", "0.2"])
    e = one["energy"]
    assert set(e) >= ENERGY_KEYS and e["pue"] == 1.0 and e["usd_per_kwh"] == 0.1
    assert e["busy_fraction"] == 1.0  # a fixed batch is busy while it generates
    assert e["output_tokens_per_s"] == pytest.approx(one["perf"]["infer"]["output_tokens_per_s"], rel=1e-3)
    assert one["perf"]["infer"]["joules_per_token"] == pytest.approx(e["joules_per_output_token"], rel=1e-6)
    assert one["cost"]["usd_per_mtok_energy"] == pytest.approx(e["electricity_usd_per_mtok"], rel=1e-5)
    per_mtok = one["cost"]["usd_per_million_tokens"]
    assert e["electricity_share"] == pytest.approx(e["electricity_usd_per_mtok"] / per_mtok, rel=1e-3)
    # the PUE multiplies the joules; price x PUE the electricity: 1.5 x and 1.5 x 2 = 3 x
    assert more["energy"]["joules_per_output_token"] == pytest.approx(1.5 * e["joules_per_output_token"], rel=1e-5)
    assert more["energy"]["electricity_usd_per_mtok"] == pytest.approx(3 * e["electricity_usd_per_mtok"], rel=1e-4)


def test_serve_sim_busy_fraction_is_the_utilisation_law() -> None:
    """At a trickle of 0.1 QPS requests rarely overlap: busy = X x S (utilisation law), S the GPU time of one
    request, about its end-to-end time; the energy keys sit on every load point and --pue reaches them."""
    doc = _json(["serve-sim", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--qps", "0.1", "--pue", "1.2", "--json"])
    at = doc["at_rate"]
    e = at["energy"]
    assert set(e) >= ENERGY_KEYS and e["pue"] == 1.2 and e["electricity_share"] is None
    assert e["busy_fraction"] == pytest.approx(at["qps"] * at["e2e_ms"]["p50"] / 1e3, rel=0.1)
    assert e["output_tokens_per_s"] == pytest.approx(at["output_tokens_per_s"], rel=1e-3)
    hand = (e["gpu_w"] * e["gpus"] + e["host_w"]) * 1.2 / at["output_tokens_per_s"]
    assert e["joules_per_output_token"] == pytest.approx(hand, rel=2e-3)


def test_recommend_ranks_by_energy() -> None:
    doc = _json(["recommend", "llama-3.1-8b", "--task", "infer", "--qps", "5", "--objective", "energy", "--top",
                 "3", "--json"])
    joules = [o["energy"]["joules_per_output_token"] for o in doc["options"]]
    assert all(set(o["energy"]) >= ENERGY_KEYS for o in doc["options"])
    assert joules == sorted(joules) and all(math.isfinite(j) and j > 0 for j in joules)


def test_training_refuses_the_energy_price() -> None:
    """Training makes no output tokens: --pue there would be ignored, so it is refused in one line (exit 2)."""
    result = runner.invoke(app, ["estimate", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--pue", "1.3", "--json"])
    assert result.exit_code == 2
    assert "--task infer" in json.loads(result.stdout)["error"]


def test_tco_load_power_lies_between_the_phase_draws() -> None:
    """Two sources that must agree: aiinframap's 70 % of TDP for a card in use (the TCO's energy) against Splitwise's
    per-phase draws (H100: 380 W decoding, 700 W prefilling of 700 W) -- a busy card's average lies between them."""
    from gpuwise.estimate import constants as C

    assert 380 / 700 < C.GPU_LOAD_POWER.value < 700 / 700
    assert board_power_w(700, 1.0, 0.0) < C.GPU_LOAD_POWER.value * 700 < board_power_w(700, 1.0, 1.0)


def test_simulator_counts_busy_and_prefill_time_by_hand() -> None:
    """Ten requests 10 s apart, each a 0.1 s prefill then 9 decode steps of 0.01 s, never overlapping: busy
    10 x 0.19 s over 90 + 0.19 s = 0.0210666; prefilling 1.0 of the 1.9 busy seconds = 0.5263."""
    from gpuwise.estimate.serving.simulate import Request, simulate

    requests = [Request(arrival_s=10.0 * i, input_len=100, output_len=10) for i in range(10)]
    result = simulate(requests, decode_step=lambda batch, context: 0.01, prefill=lambda tokens: 0.1, max_batch=1,
                      kv_capacity_tokens=1e9)
    assert result.busy_fraction == pytest.approx(1.9 / 90.19)
    assert result.prefill_share == pytest.approx(1.0 / 1.9)


def test_wall_draw_is_the_cards_and_hosts_times_pue() -> None:
    """estimate's JSON: wall_w = (gpu_w x gpus + host_w) x PUE, and wall_w / tokens per second is the J/token."""
    e = _json(["estimate", "llama-3.1-8b", "--gpu", "l4", "--task", "infer", "--pue", "1.25", "--json"])["energy"]
    assert e["wall_w"] == pytest.approx((e["gpu_w"] * e["gpus"] + e["host_w"]) * 1.25, rel=1e-4)
    assert e["wall_w"] / e["output_tokens_per_s"] == pytest.approx(e["joules_per_output_token"], rel=1e-4)
    assert e["host_w"] == 200.0  # an L4 (72 W x 0.3 = 21.6 W) is charged a whole 200 W host, as TCO charges it


def test_layer_split_cards_take_turns() -> None:
    """An RTX 3090 (350 W) and an RTX 3060 12 GB (170 W) split by layers: for one user each card is busy only for its
    own layers, so their busy fractions add up to about one (the hand-offs between them aside); each card's draw is
    TDP x (0.13 + (s x 1.0 + (1 - s) x 0.58 - 0.13) x u) over TTFT + 255 x TPOT, plus one desktop host of 200 W."""
    from gpuwise import api

    split = api.layer_split("llama-3.1-8b", gpus=["rtx-3090", "rtx-3060-12gb"], engine="llamacpp",
                            output_len=256, usage={"pue": 1.1})
    e = split.energy
    assert e is not None and e.gpus == 2 and e.host_w == 200.0
    assert e.busy_fraction * 2 == pytest.approx(1.0, abs=0.01)
    e2e_ms = split.ttft_ms + 255 * split.tpot_ms
    watts = 0.0
    for card, tdp in zip(split.cards, (350, 170), strict=True):
        busy_ms = card.ttft_ms + 255 * card.tpot_ms
        u, s = busy_ms / e2e_ms, card.ttft_ms / busy_ms
        watts += tdp * (0.13 + (s * 1.0 + (1 - s) * 0.58 - 0.13) * u)
    assert e.joules_per_output_token == pytest.approx((watts + 200) * 1.1 / (256 / e2e_ms * 1e3), rel=1e-3)


def test_recommended_layer_split_cards_are_busy_in_turn(shipped: Catalog) -> None:
    """One user on 2 x RTX 3090 (350 W) split by layers at 20 tokens/s: each card busy half the time decoding,
    350 x (0.13 + (0.58 - 0.13) x 0.5) = 124.25 W; with one desktop's 200 W: (248.5 + 200) / 20 = 22.425 J."""
    request = parse_request({"workloads": [{"model": "llama-3.1-70b", "task": "infer"}], "usage": {"pue": 1.0}})
    fit = Fit(per_gpu_bytes=20e9, tokens_per_s=20.0, output_tokens_per_s=20.0,
              settings=({"split": "layer", "layers": [40, 40]},))
    option = Option(gpu="rtx-3090", count=2, acquisition="buy-used", fit=fit, usd_per_hour=1.0, tco_usd=1.0,
                    cost_per_job_usd=None, capex_usd=None, wall_kw=1.0)
    e = option_energy(option, shipped, request)
    assert e is not None and e.busy_fraction == 0.5
    assert e.joules_per_output_token == pytest.approx(22.425)


def test_disaggregated_pools_split_the_busy_time() -> None:
    """1P3D on 8 H100s (TP 2) with 64 clients: the three decode replicas hold about 20 sequences each, so they are
    never idle (busy >= 3/4 of all GPUs), and only the one prefill replica's share of the busy GPU time is
    prefill: at most 1 / (1 + 3) = 0.25."""
    doc = _json(["serve-sim", "llama-3.1-70b", "--gpu", "h100-sxm-80gb", "--count", "8", "--tp", "2", "--disagg",
                 "1P3D", "--concurrency", "64", "--json"])
    e = doc["at_concurrency"]["energy"]
    assert set(e) >= ENERGY_KEYS and e["gpus"] == 8
    assert 0.75 <= e["busy_fraction"] <= 1.0
    assert 0.0 < e["prefill_share"] <= 0.25


def test_recommended_option_is_charged_at_the_rate_asked(shipped: Catalog) -> None:
    """1 QPS asked of one H100 that could serve 10 within a P99 of 2 s there: L = 1 x 2 = 2 in flight, busy
    1 - e^-2 = 0.864665; P = 91 + (641.2 - 91) x 0.864665 = 566.739 W; 256 tokens/s: (566.739 + 210) / 256 =
    3.03414 J. Its 1 USD/h makes 256 x 3600 tokens an hour: 1.08507 USD per Mtok at that load."""
    request = parse_request({"workloads": [{"model": "llama-3.1-8b", "task": "infer", "qps": 1,
                                            "options": {"input_len": 1024, "output_len": 256}}],
                             "usage": {"pue": 1.0}})
    fit = Fit(per_gpu_bytes=20e9, qps_capacity=10.0, p99_ms=2000.0, output_tokens_per_s=2560.0)
    option = Option(gpu="h100-sxm-80gb", count=1, acquisition="rent:x", fit=fit, usd_per_hour=1.0, tco_usd=1.0,
                    cost_per_job_usd=None, capex_usd=None, wall_kw=1.0)
    e = option_energy(option, shipped, request)
    assert e is not None and e.busy_fraction == pytest.approx(1 - math.exp(-2))
    assert e.joules_per_output_token == pytest.approx(3.03414, rel=1e-5)
    assert e.electricity_share == pytest.approx(e.electricity_usd_per_mtok / 1.08507, rel=1e-5)


@pytest.mark.parametrize("flags", [("--qps", "2", "--tpot-p99-ms", "50"),
                                   ("--qps", "1", "--turns", "3", "--think-time-s", "5", "--ttft-p99-ms", "1000")])
def test_an_options_energy_is_what_its_own_serve_sim_command_reports(flags: tuple[str, ...]) -> None:
    """The recommender's #1 option was simulated at the request's rate: its joules per output token, busy share and
    tokens per second are those its printed serve-sim command reports (sessions count turns x output tokens)."""
    done = runner.invoke(app, ["recommend", "llama-3.1-8b", "--task", "infer", *flags, "--json"])
    assert done.exit_code == 0, done.output
    option = json.loads(done.output)["options"][0]
    command = option["fit"]["commands"][0] if "fit" in option else option["commands"][0]
    assert command.startswith("gpuwise serve-sim ")
    again = runner.invoke(app, [*command.split()[1:], "--json"])
    assert again.exit_code == 0, again.output
    simulated = json.loads(again.output)["at_rate"]["energy"]
    for key in ("joules_per_output_token", "busy_fraction", "output_tokens_per_s", "gpu_w"):
        assert option["energy"][key] == pytest.approx(simulated[key], rel=1e-6), key
