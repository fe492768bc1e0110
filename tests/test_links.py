"""Which link bounds a collective: the system's own wiring (issue 14), not the best link a card can have."""

from __future__ import annotations

import pytest

from gpuwise.catalog import Catalog
from gpuwise.estimate.speed.parallel import links


@pytest.mark.parametrize(("gpu", "between"), [("rtx-3090", "host-memory"), ("rtx-a6000", "pcie"),
                                              ("a100-pcie-40gb", "pcie"), ("h100-pcie-80gb", "pcie")])
def test_an_nvlink_bridge_joins_a_pair_and_a_larger_ring_crosses_pcie(gpu: str, between: str,
                                                                       shipped: Catalog) -> None:
    """One NVLink bridge (or one set of three on A100/H100 PCIe) joins exactly two cards (NVIDIA's product pages:
    '2-way bridge'); a ring over four or eight such cards has hops between the pairs, and the slowest hop sets the
    ring's pace: PCIe peer-to-peer on workstation and data-center cards, host memory on a GeForce RTX 3090, whose
    stock driver allows P2P only over the bridge (club-3090 PCIE_P2P.md: P2P off over PCIe, 11.3 GB/s)."""
    card = shipped.gpus[gpu]
    path = links(card, shipped, network=None, nodes=1)
    assert path.for_group(2, spans_nodes=False).kind == "nvlink"
    wider = path.for_group(8, spans_nodes=False)
    assert wider.kind == between and (between != "pcie" or wider.id == card.native_link)


def test_an_nvswitch_board_joins_all_eight(shipped: Catalog) -> None:
    path = links(shipped.gpus["h100-sxm-80gb"], shipped, network=None, nodes=1)
    assert path.for_group(8, spans_nodes=False).id == "nvlink4"


def test_eight_bridged_3090s_train_slower_than_the_bridge_would_allow(shipped: Catalog) -> None:
    from gpuwise.estimate.estimate import estimate
    from gpuwise.workload.jobs.job import TrainJob
    from gpuwise.workload.model.resolve import resolve_model

    arch = resolve_model("llama-3.1-8b")
    job = TrainJob(method="lora", ckpt="full", count=8, tp=8, batch=1, seq=2048)
    bridged = estimate(arch, job, shipped.gpus["rtx-3090"], shipped).perf
    pair = estimate(arch, job.updated(count=2, tp=2), shipped.gpus["rtx-3090"], shipped).perf
    assert bridged is not None and pair is not None
    # eight cards in a PCIe ring do not reach four times the pair's throughput
    assert bridged.tokens_per_s < 4 * pair.tokens_per_s  # type: ignore[union-attr]


def test_consumer_cards_do_not_scale_super_linearly_across_nodes(shipped: Catalog) -> None:
    """Issue 14: 16 RTX 4090s over two nodes were 3x faster per GPU than 8 in one, because the network (InfiniBand
    NDR, 50 GB/s per GPU) was faster than the host-memory path the cards use inside a node. A ring across nodes still
    runs through each node's cards, so its slowest hop bounds it."""
    from gpuwise.api import scale

    rows = {r.count: r for r in scale("llama-3.1-70b", gpu="rtx-4090", method="lora", grad_ckpt=True)}
    per_gpu = {n: rows[n].tokens_per_s / n for n in (8, 16, 32)}  # type: ignore[union-attr]
    assert per_gpu[16] <= per_gpu[8] * 1.05 and per_gpu[32] <= per_gpu[16] * 1.05
