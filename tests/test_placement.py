"""Options are systems that exist (issue 14): bought cards sit in the catalog's machines, rented ones in whole
instances, and several machines talk only over a network the system, the offer or the user names."""

from __future__ import annotations

import pytest

from gpuwise.catalog import Catalog
from gpuwise.recommend.engine import Option
from gpuwise.recommend.placement import Placement, bought
from gpuwise.recommend.rank import recommend
from gpuwise.recommend.request import parse_request
from gpuwise.report.recommend import option_json


def _options(catalog: Catalog, **request: object) -> list[Option]:
    return list(recommend(parse_request({"top": 200, **request}), catalog).options)


def _train(model: str = "llama-3.1-8b", **options: object) -> dict[str, object]:
    return {"model": model, "task": "train", "options": {"method": "lora", "ckpt": "full", **options}}


def test_every_system_is_sourced_and_names_known_links(shipped: Catalog) -> None:
    assert {"desktop", "workstation", "pcie-server", "hgx-ndr"} <= set(shipped.systems)
    for system in shipped.systems.values():
        assert system.sources and system.as_of
        assert system.network is None or system.network in shipped.interconnects


def test_a_consumer_board_splits_its_16_graphics_lanes_over_two_cards(shipped: Catalog) -> None:
    """AM5's I/O die gives graphics 16 PCIe 5.0 lanes; with both x16 slots in use each runs x8 (the sources of the
    desktop record). An RTX 4090 is a PCIe 4.0 x16 card, so two of them get pcie4-x8 each."""
    desktop = shipped.systems["desktop"]
    assert desktop.lanes_with(1) == 16 and desktop.lanes_with(2) == 8
    request = parse_request({"workloads": [_train()]})
    two = bought(shipped.gpus["rtx-4090"], 2, request, shipped, network=None, talks=True)
    assert isinstance(two, Placement)
    assert two.system == "desktop" and two.slot_link == "pcie4-x8" and two.host_usd == 1000
    one = bought(shipped.gpus["rtx-4090"], 1, request, shipped, network=None, talks=True)
    assert isinstance(one, Placement) and one.slot_link is None  # one card keeps its x16


def test_a_narrower_slot_slows_data_parallel_training(shipped: Catalog) -> None:
    """An RTX 6000 Ada has PCIe P2P and no NVLink: its gradient all-reduce runs at the PCIe link, so x8 (13 GB/s
    achieved) is slower than x16 (24 GB/s) for the same job."""
    from gpuwise.estimate.estimate import estimate
    from gpuwise.workload.jobs.job import TrainJob
    from gpuwise.workload.model.resolve import resolve_model

    arch, card = resolve_model("qwen2.5-1.5b"), shipped.gpus["rtx-6000-ada"]
    job = TrainJob(method="full", count=2, zero=0, batch=1, seq=1024)
    wide, narrow = (estimate(arch, job.updated(slot_link=link), card, shipped).perf for link in (None, "pcie4-x8"))
    assert wide is not None and narrow is not None
    assert narrow.tokens_per_s < wide.tokens_per_s  # type: ignore[union-attr]


def test_bought_cards_span_machines_only_over_a_named_network(shipped: Catalog) -> None:
    """Eight 4090s fill one 8-GPU server; a 70B LoRA needs 16 (18.8 GiB per card), two servers, and the catalog's
    PCIe servers ship with no cluster network: without one the option is refused, with one named it runs at the
    pace of the slowest hop, never faster per GPU than one machine."""
    job = _train("llama-3.1-70b")
    plain = recommend(parse_request({"workloads": [job], "gpus": ["rtx-4090"], "acquisitions": ["buy-new"]}),
                      shipped)
    assert not plain.options
    assert any(r.code == "network" and r.count == 16 for r in plain.rejected)
    named = _options(shipped, workloads=[{**job, "options": {**job["options"], "network": "eth-100g"}}],  # type: ignore[dict-item]
                     gpus=["rtx-4090"], acquisitions=["buy-new"])
    assert named and named[0].placement is not None
    assert named[0].placement.machines >= 2 and named[0].placement.network == "eth-100g"


def test_hgx_nodes_ship_with_their_infiniband(shipped: Catalog) -> None:
    """DGX/HGX H100 nodes: eight single-port ConnectX-7 at 400 Gb/s for eight GPUs (DGX BasePOD reference), i.e.
    InfiniBand NDR per GPU, 400 / 8 = 50 GB/s per direction."""
    assert shipped.interconnects["ib-ndr"].nominal_gb_s == 400 / 8
    options = _options(shipped, workloads=[{**_train("llama-3.1-70b", method="full"), "tokens": 1e9}],
                       gpus=["h100-sxm-80gb"], acquisitions=["buy-new"])
    multi = [o for o in options if o.count > 8]
    assert multi
    for option in multi:
        fields = option_json(option)
        assert fields["system"] == "hgx-ndr" and fields["network"] == "ib-ndr"
        assert fields["gpus_per_node"] == 8 and fields["instances"] == option.count // 8
        assert fields["interconnect"] == "nvlink4"


def test_one_gpu_rentals_do_not_make_a_training_cluster(shipped: Catalog) -> None:
    """A marketplace pod is one machine; several have no fabric between them, so a 70B full fine-tune (more than
    one 8-GPU machine holds) is refused there, while 8-GPU instances with a documented network (EFA, InfiniBand)
    run it."""
    rec = recommend(parse_request({"workloads": [_train("llama-3.1-70b", method="full")], "gpus": ["h100-sxm-80gb"],
                                   "acquisitions": ["rent"], "top": 50}), shipped)
    assert all(o.count == 1 or o.placement is None or o.placement.machines == 1 or o.placement.network
               for o in rec.options)
    single = [r for r in rec.rejected if r.code == "network"]
    assert single and all(r.acquisition.split(":")[1] in ("runpod", "vast-ai", "lambda", "nebius", "azure", "gcp")
                          for r in single)
    assert any(o.placement is not None and o.placement.network for o in rec.options)


def test_serving_replicas_need_no_network(shipped: Catalog) -> None:
    """Replicas behind a load balancer are independent servers: many 1-GPU pods can serve one model."""
    options = _options(shipped, workloads=[{"model": "llama-3.1-8b", "task": "infer", "qps": 40}],
                       gpus=["rtx-4090"], acquisitions=["rent"])
    assert any(o.count > 1 and o.placement is not None and o.placement.gpus_per_machine == 1 for o in options)


@pytest.mark.parametrize(("offer", "per_gpu_gbit"), [("aws-p5-48xlarge", 400), ("aws-p4d-24xlarge", 50)])
def test_efa_per_gpu_is_the_instance_bandwidth_over_its_gpus(shipped: Catalog, offer: str, per_gpu_gbit: int) -> None:
    """AWS: P5 has 3,200 Gb/s of EFA for 8 GPUs, P4d 400 Gb/s for 8 (the instance pages)."""
    network = shipped.interconnects[shipped.offers[offer].network or ""]
    assert network.nominal_gb_s == pytest.approx(per_gpu_gbit / 8)


def test_scale_names_the_network_it_assumed_between_nodes() -> None:
    """Issue 14: going to two nodes once assumed InfiniBand NDR silently; the table now says which network joins
    them, and that it was assumed unless --network named it."""
    from typer.testing import CliRunner

    from gpuwise.cli.main import app

    runner = CliRunner()
    assumed = runner.invoke(app, ["scale", "llama-3.1-70b", "--gpu", "rtx-4090", "--method", "lora", "--grad-ckpt"],
                            env={"COLUMNS": "160"})
    assert assumed.exit_code == 0 and "joined by ib-ndr (assumed" in assumed.output
    named = runner.invoke(app, ["scale", "llama-3.1-70b", "--gpu", "rtx-4090", "--method", "lora", "--grad-ckpt",
                                "--network", "eth-100g"], env={"COLUMNS": "160"})
    assert named.exit_code == 0 and "joined by eth-100g" in named.output and "assumed" not in named.output


def test_coolers_wider_than_the_slots_are_named_for_the_buyer(shipped: Catalog) -> None:
    """A WRX90 board has seven slots (its source) and the last cooler may hang into the case's eighth position: four
    double-width RTX A6000s fit, four triple-width RTX 3090s need risers or blower versions."""
    request = parse_request({"workloads": [_train()], "constraints": {"chassis": "workstation"}})
    for card, crowded in (("rtx-a6000", False), ("rtx-3090", True)):
        place = bought(shipped.gpus[card], 4, request, shipped, network=None, talks=True)
        assert isinstance(place, Placement)
        crowding = [note for note in place.notes if "slot positions" in note]
        assert bool(crowding) == crowded
        if crowded:
            assert "12 slot positions" in crowding[0] and "risers" in crowding[0]


def test_training_never_splits_unevenly_or_spans_machines_with_one_tp_group(shipped: Catalog) -> None:
    """torchrun starts the same number of ranks on every node, and a tensor-parallel group runs inside one
    machine: 3 cards over 2 desktops, or TP 4 over desktops of 2, are refused with a reason, not a traceback."""
    job = {**_train("qwen2-7b", method="qlora"), "tokens": 5e8}
    job["options"] = {**job["options"], "network": "eth-100g"}  # type: ignore[dict-item]
    rec = recommend(parse_request({"workloads": [job], "constraints": {"chassis": "desktop"}, "gpus": ["rtx-3060-12gb"],
                                   "acquisitions": ["buy-new"]}), shipped)
    assert any(r.code == "count" and r.count == 3 and "uneven" in r.reason for r in rec.rejected)
    wide = {**job, "options": {**job["options"], "tp": 4}}
    rec = recommend(parse_request({"workloads": [wide], "constraints": {"chassis": "desktop"},
                                   "gpus": ["rtx-4090"], "acquisitions": ["buy-new"], "top": 20}), shipped)
    assert not [o for o in rec.options if o.placement and o.placement.gpus_per_machine < 4]


def test_serving_replicas_do_not_straddle_machines() -> None:
    """Six cards in two machines of three form two TP-2 replicas, not three (hand count)."""
    from gpuwise.recommend.machines import Machines

    assert Machines(nodes=2, gpus_per_node=3).replicas(6, 2) == 2
    assert Machines(nodes=2, gpus_per_node=7).replicas(13, 2) == 6  # 7 + 6 cards: 3 + 3 replicas
    assert Machines(nodes=1, gpus_per_node=8).replicas(5, 1) == 5


def test_serving_stays_at_24_hours_a_day_when_other_usage_is_given() -> None:
    request = parse_request({"workloads": [{"model": "llama-3.1-8b", "task": "infer", "qps": 5}],
                             "usage": {"years": 2}})
    assert request.usage.hours_per_day == 24 and request.usage.years == 2


def test_one_sxm_module_is_costed_on_the_smallest_board_that_holds_it(shipped: Catalog) -> None:
    """H100 SXM comes on 4- and 8-GPU HGX boards (its record); one module means the 4-GPU server: 4 x 13,750 USD."""
    from gpuwise.estimate.cost.tco import host_cost

    systems = shipped.systems.values()
    assert host_cost(shipped.gpus["h100-sxm-80gb"], 1, systems) == 4 * 13750
    assert host_cost(shipped.gpus["h100-sxm-80gb"], 16, systems) == 16 * 13750
