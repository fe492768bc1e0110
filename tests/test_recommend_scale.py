"""recommend at every scale (issue 28): counts up to --max-gpus, a searched training layout, and machines described
by what actually joins their cards."""

from __future__ import annotations

import pytest

from gpuwise import api
from gpuwise.catalog import Catalog
from gpuwise.recommend.engine import candidate_counts
from gpuwise.recommend.placement import Placement, bought, rented
from gpuwise.recommend.request import parse_request

LLAMA2_70B_A100_HOURS = 1_720_320  # Llama 2 paper (arXiv 2307.09288), Table 2: 70B, 2T tokens, A100-80GB GPU hours


def _request(**changes: object) -> object:
    base: dict[str, object] = {"workloads": [{"model": "llama-2-70b", "task": "train", "tokens": 2e12,
                                              "options": {"method": "full", "seq": 4096}}]}
    return parse_request({**base, **changes})


def test_counts_reach_max_gpus_in_whole_nodes() -> None:
    """Past 512 the search keeps going on the 1-1.5-2 ladder of whole nodes and ends at --max-gpus itself."""
    counts = candidate_counts(_request(constraints={"max_gpus": 4096}))  # type: ignore[arg-type]
    assert counts[-6:] == [768, 1024, 1536, 2048, 3072, 4096]
    assert all(n % 8 == 0 for n in counts if n > 8)
    assert candidate_counts(_request(constraints={"max_gpus": 3005}))[-1] == 3000  # type: ignore[arg-type]


def test_a_pre_training_run_is_laid_out_as_a_tuned_one() -> None:
    """Llama 2 70B on 2T tokens took 1,720,320 A100-80GB GPU hours (Llama 2, Table 2). With --batch and --tp left
    free, recommend fills the memory and tries TP 1-8 inside a node; the GPU hours of its answer land within 25 % of
    Meta's. A micro-batch of 1 under ZeRO-3 over InfiniBand (the layout before) took several times more."""
    rec = api.recommend({"workloads": [{"model": "llama-2-70b", "task": "train", "tokens": 2e12, "deadline_hours": 1440,
                                        "options": {"method": "full", "seq": 4096}}],
                         "gpus": ["a100-sxm-80gb"], "acquisitions": ["rent"], "constraints": {"max_gpus": 4096},
                         "usage": {"pattern": "one-off", "hours_per_day": 24}})
    best = rec.options[0]
    assert best.fit.job_hours is not None and best.fit.job_hours <= 1440
    gpu_hours = best.count * best.fit.job_hours
    assert gpu_hours == pytest.approx(LLAMA2_70B_A100_HOURS, rel=0.25)
    chosen = best.fit.settings[0]
    assert int(str(chosen["batch"])) > 1 and any("--batch was left free" in n for n in best.fit.notes)


def test_the_zero_stage_is_searched_and_the_faster_one_kept() -> None:
    """With --zero left free over several data-parallel GPUs, ZeRO-2 (whole weights, no gathers) is tried beside
    ZeRO-3; the option keeps whichever estimate runs faster at its layout, and an explicit --zero is kept."""
    workload = {"model": "llama-3.1-8b", "task": "train", "tokens": 1e10, "options": {"method": "full"}}
    rec = api.recommend({"workloads": [workload], "gpus": ["h100-sxm-80gb"], "acquisitions": ["rent"],
                         "constraints": {"max_gpus": 16}})
    best = rec.options[0]
    chosen = best.fit.settings[0]
    assert chosen["zero"] in (2, 3) and best.count > 1

    def tokens_per_s(zero: int) -> float:
        est = api.estimate("llama-3.1-8b", gpu="h100-sxm-80gb", task="train", method="full", count=best.count,
                           nodes=max(1, best.count // 8), tp=int(str(chosen["tp"])), batch=int(str(chosen["batch"])),
                           ckpt=str(chosen["ckpt"]), zero=zero, network="ib-ndr" if best.count > 8 else None)
        return est.perf.tokens_per_s if est.memory.fits else 0.0  # type: ignore[union-attr]

    other = 3 if chosen["zero"] == 2 else 2
    assert tokens_per_s(int(str(chosen["zero"]))) >= tokens_per_s(other)
    kept = api.recommend({"workloads": [{**workload, "options": {"method": "full", "zero": 3}}],
                          "gpus": ["h100-sxm-80gb"], "acquisitions": ["rent"], "constraints": {"max_gpus": 16}})
    assert all(o.fit.settings[0]["zero"] == 3 for o in kept.options if o.count > 1)


def test_adapter_fine_tuning_keeps_whole_model_copies() -> None:
    """LoRA stacks (PEFT, torchtune, Unsloth) train data-parallel: no tensor-parallel layout is searched for them."""
    rec = api.recommend({"workloads": [{"model": "llama-3.1-8b", "task": "train", "tokens": 1e8,
                                        "options": {"method": "lora"}}],
                         "gpus": ["rtx-4090"], "acquisitions": ["buy-new"], "constraints": {"max_gpus": 4}})
    assert rec.options and all(o.fit.settings[0]["tp"] == 1 for o in rec.options)


def test_two_one_gpu_pods_are_joined_by_nothing(shipped: Catalog) -> None:
    """A marketplace pod of one GPU has no link inside it, and two of them no fabric between them."""
    gpu = shipped.gpu("h100-sxm-80gb")
    offer = next(o for o in shipped.offers_for(gpu.id) if o.gpus == 1)
    placed = rented(gpu, offer, 2, shipped, talks=False)
    assert isinstance(placed, Placement)
    assert placed.interconnect == "none" and placed.inside == "" and placed.network is None


def test_an_nvlink_bridge_joins_pairs_and_geforce_crosses_host_memory_between_them(shipped: Catalog) -> None:
    """The RTX 3090's bridge joins two cards (catalog max_gpus 2); between pairs a GeForce card has no PCIe
    peer-to-peer on the stock driver, so the traffic goes through host memory."""
    request = parse_request({"workloads": [{"model": "llama-3.1-8b", "task": "train", "tokens": 1e8}],
                             "constraints": {"max_gpus": 8}})
    placed = bought(shipped.gpu("rtx-3090"), 8, request, shipped, network=None, talks=True)
    assert isinstance(placed, Placement)
    assert placed.inside == "nvlink3-bridge joining pairs, host-memory between them"


def test_mi300x_nodes_are_joined_by_infinity_fabric(shipped: Catalog) -> None:
    """An 8-GPU MI300X platform is a fully connected xGMI mesh: 7 links x 64 GB/s a direction (AMD), 48 usable."""
    request = parse_request({"workloads": [{"model": "llama-3.1-8b", "task": "train", "tokens": 1e8}],
                             "constraints": {"max_gpus": 8}})
    placed = bought(shipped.gpu("mi300x"), 8, request, shipped, network=None, talks=True)
    assert isinstance(placed, Placement) and placed.interconnect == "xgmi-mi300"
    link = shipped.interconnects["xgmi-mi300"]
    assert (link.nominal_gb_s, link.achieved_gb_s) == (7 * 64.0, 7 * 48.0)


def test_options_beyond_the_memory_headroom_rank_after_those_within_it() -> None:
    """QLoRA of an 8B model fits a 12 GB card only at 99 % of it: with the default 10 % headroom every option that
    leaves it free ranks first; --min-headroom 0 lets the cheapest card lead again."""
    request = {"workloads": [{"model": "llama-3.1-8b", "task": "train", "options": {"method": "qlora",
                                                                                   "ckpt": "full"}}],
               "budget_usd": 3000}
    ranked = api.recommend(request).options
    shares = [o.memory_share > 0.9 for o in ranked]
    assert shares == sorted(shares) and not shares[0]
    assert all("headroom" in o.why for o in ranked if o.memory_share > 0.9)
    loose = api.recommend({**request, "constraints": {"min_headroom": 0.0}}).options
    assert loose[0].memory_share > 0.9 and loose[0].tco_usd <= ranked[0].tco_usd


def test_an_options_command_reproduces_its_figures() -> None:
    """Every training option prints the `gpuwise estimate` line of the job it evaluated (the layout it chose and the
    knobs it turned on); run as printed, it gives the option's memory per GPU and speed."""
    import json
    import shlex

    from typer.testing import CliRunner

    from gpuwise.cli.main import app

    rec = api.recommend({"workloads": [{"model": "llama-2-70b", "task": "train", "tokens": 2e12, "deadline_hours": 1440,
                                        "options": {"method": "full", "seq": 4096}}],
                         "gpus": ["a100-sxm-80gb", "h100-sxm-80gb"], "acquisitions": ["rent"],
                         "constraints": {"max_gpus": 4096}, "usage": {"pattern": "one-off", "hours_per_day": 24}})
    for option in rec.options[:3]:
        (command,) = option.fit.commands
        argv = shlex.split(command)
        assert argv[:2] == ["gpuwise", "estimate"]
        done = CliRunner().invoke(app, [*argv[1:], "--json"])
        assert done.exit_code == 0, done.output
        shown = json.loads(done.output)
        assert shown["memory"]["per_gpu_gib"] == pytest.approx(option.fit.per_gpu_bytes / 2**30, rel=1e-3)
        assert shown["perf"]["train"]["tokens_per_s"] == pytest.approx(option.fit.tokens_per_s, rel=1e-3)


def test_a_serving_options_command_gives_its_figures() -> None:
    """A serving option prints the serve-sim line of its replicas; run as printed, the simulation's highest rate
    within the SLO is the option's capacity and its P99 at the requested rate is the option's P99, within the SLO
    (issue 36: the closed form sizes the candidates, the simulation the user can run is what an option shows)."""
    import json
    import shlex

    from typer.testing import CliRunner

    from gpuwise.cli.main import app

    rec = api.recommend({"workloads": [{"model": "llama-3.1-8b", "task": "infer", "qps": 20, "p99_ms": 4000,
                                        "options": {"input_len": 512, "output_len": 128}}],
                         "gpus": ["h100-sxm-80gb", "l4"], "acquisitions": ["rent"]})
    option = rec.options[0]
    (command,) = option.fit.commands
    argv = shlex.split(command)
    assert argv[:2] == ["gpuwise", "serve-sim"] and (option.count == 1 or f"--count {option.count}" in command)
    done = CliRunner().invoke(app, [*argv[1:], "--json"])
    assert done.exit_code == 0, done.output
    shown = json.loads(done.output)
    assert shown["max_qps"] == pytest.approx(option.fit.qps_capacity, rel=1e-9) and shown["max_qps"] >= 20
    assert shown["at_rate"]["e2e_ms"]["p99"] == pytest.approx(option.fit.p99_ms, rel=1e-6)
    assert option.fit.p99_ms is not None and option.fit.p99_ms <= 4000


@pytest.mark.parametrize("workload", [
    {"model": "llama-3.1-70b", "task": "infer", "min_tokens_per_s": 5,
     "options": {"engine": "llamacpp", "quant": "gguf-q4_k_m"}},
    {"model": "black-forest-labs/FLUX.1-dev", "task": "infer", "options": {"offload": "model-cpu", "quant": "fp8"}},
], ids=["one-user-layer-split", "image-pipeline"])
def test_local_options_reproduce_with_estimate(workload: dict[str, object]) -> None:
    """One user's copy split over cards (`estimate --gpu a,a`) and an image pipeline (its offload and weight format
    spelled as flags): the printed command gives the option's memory and speed."""
    import json
    import shlex

    from typer.testing import CliRunner

    from gpuwise.cli.main import app

    rec = api.recommend({"workloads": [workload], "constraints": {"own_host": True}})
    for option in rec.options[:2]:
        (command,) = option.fit.commands
        shown = json.loads(CliRunner().invoke(app, [*shlex.split(command)[1:], "--json"]).output)
        if "cards" in shown:  # a layer split: the fullest card, one user's tokens/s
            gib = max(card["per_gpu_gib"] for card in shown["cards"])
            assert shown["tokens_per_s"] == pytest.approx(option.fit.tokens_per_s, rel=1e-3)
        elif "infer" in shown["perf"]:  # one copy on one card, or tensor parallel: one user's decode
            gib = shown["memory"]["per_gpu_gib"]
            assert 1e3 / shown["perf"]["infer"]["tpot_ms"] == pytest.approx(option.fit.tokens_per_s, rel=1e-3)
        else:
            gib = shown["memory"]["per_gpu_gib"]
            assert shown["perf"]["seconds_per_image"] == pytest.approx(option.fit.seconds_per_image, rel=1e-3)
        assert gib == pytest.approx(option.fit.per_gpu_bytes / 2**30, rel=1e-3)


def test_the_nearest_options_are_at_the_requested_scale_and_say_what_would_qualify() -> None:
    """2T tokens of a 70B model in 100 h cannot run on 64 GPUs: the nearest options are the 64-GPU ones that missed
    the deadline (not single instances refused for their size), each with the GPU count or deadline that would do."""
    rec = api.recommend({"workloads": [{"model": "llama-3.1-70b", "task": "train", "tokens": 2e12,
                                        "deadline_hours": 100, "options": {"method": "full"}}],
                         "constraints": {"max_gpus": 64}, "usage": {"pattern": "one-off", "hours_per_day": 24}})
    assert not rec.options and rec.nearest
    assert all(r.code == "deadline" and r.count == 64 and "GPUs at this pace" in r.reason for r in rec.nearest)


def test_a_scenarios_workloads_each_show_their_figures() -> None:
    """The student's two image workloads: each option lists both (memory and seconds per image of each, in JSON and
    as sub-rows of the table); the option's own figures are the larger memory and the slower pipeline."""
    import json

    from typer.testing import CliRunner

    from gpuwise.cli.main import app

    done = CliRunner().invoke(app, ["recommend", "--scenario", "examples/student-image-generation.yaml", "--json"])
    assert done.exit_code == 0, done.output
    for option in json.loads(done.output)["options"]:
        sdxl, flux = option["workloads"]
        assert sdxl["model"].endswith("stable-diffusion-xl-base-1.0") and flux["model"].endswith("FLUX.1-dev")
        assert option["per_gpu_gib"] == pytest.approx(max(sdxl["per_gpu_gib"], flux["per_gpu_gib"]), abs=1e-3)
        assert option["seconds_per_image"] == pytest.approx(max(sdxl["seconds_per_image"], flux["seconds_per_image"]))
    table = CliRunner().invoke(app, ["recommend", "--scenario", "examples/student-image-generation.yaml"]).output
    assert "stable-diffusion-xl" in table and "FLUX.1-dev" in table


def test_users_become_a_serving_rate() -> None:
    """20 users who each read for 30 s between requests send 20 / 30 requests/s at most; 200 users at 0.05
    requests/s each send 10. Users with neither, or a per-user figure without users, is refused in one line."""
    from gpuwise.errors import ConfigError

    def rate(**targets: object) -> float | None:
        workload = {"model": "llama-3.1-8b", "task": "infer", **targets}
        return parse_request({"workloads": [workload]}).workloads[0].qps  # type: ignore[attr-defined]

    assert rate(users=20, think_s=30) == pytest.approx(20 / 30)
    assert rate(users=200, user_qps=0.05) == pytest.approx(10.0)
    for bad in ({"users": 20}, {"think_s": 30}, {"users": 20, "think_s": 30, "qps": 1}):
        with pytest.raises(ConfigError, match="--users"):
            rate(**bad)


def test_a_desktop_stays_within_what_its_wall_circuit_carries(shipped: Catalog) -> None:
    """Two 600 W RTX PRO 6000s and a 200 W host through a 90 % efficient supply draw 1,556 W at the wall; a 15 A,
    120 V circuit carries 1,440 W continuously (NEC 80 % rule). As a desktop they are refused; left to recommend
    they go into a workstation, with a warning; on a 230 V, 16 A circuit (3,680 W) the desktop is fine."""
    gpu = shipped.gpu("rtx-pro-6000-blackwell")

    def placed(**constraints: object) -> object:
        request = parse_request({"workloads": [{"model": "llama-3.1-8b", "task": "infer"}],
                                 "constraints": constraints})
        return bought(gpu, 2, request, shipped, network=None, talks=False)

    refused = placed(chassis="desktop")
    assert not isinstance(refused, Placement) and refused.code == "power" and "1,556 W" in refused.reason
    moved = placed()
    assert isinstance(moved, Placement) and moved.name == "workstation"
    assert any("circuit" in note for note in moved.notes)
    assert isinstance(placed(chassis="desktop", circuit_watts=3680), Placement)
