"""Collective communication time over the catalog's links (NVIDIA nccl-tests, doc/PERFORMANCE.md).

A ring all-reduce of S bytes over n ranks moves 2(n-1)/n x S per rank; all-gather and reduce-scatter
(n-1)/n x S. Time = volume / achieved link bandwidth + latency. Worked check: 8 GPUs all-reducing 1 GB over
NVLink 4 (370 GB/s achieved bus bandwidth) take 2 x 7/8 x 1 GB / 370 GB/s = 4.7 ms.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.catalog import GPU, Catalog, Interconnect
from gpuwise.estimate import constants as C

GPUS_PER_NODE = int(C.GPUS_PER_NODE.value)


@dataclass(frozen=True)
class Links:
    """The links a collective can use, as catalog records: the card's scale-up link, its PCIe (or host-memory) path
    between cards, and the network between nodes."""

    intra: Interconnect
    inter: Interconnect | None
    pcie: Interconnect | None = None  # the path between cards when the scale-up link does not join the whole group

    def leaves_node(self, ranks: int, nodes: int) -> bool:
        """Whether a group of ``ranks`` GPUs outgrows the scale-up domain (an 8-GPU node, or a larger NVLink domain
        such as an NVL72 rack): an expert-parallel group of 16 on 8-GPU H100 nodes crosses the network."""
        return nodes > 1 and ranks > max(GPUS_PER_NODE, self.intra.max_gpus or 0)

    def for_group(self, ranks: int, *, spans_nodes: bool) -> Interconnect:
        """The link that bounds a ring over ``ranks`` GPUs, the slowest hop on it: inside a node the scale-up link,
        unless it joins fewer GPUs than the ring (an NVLink bridge joins a pair: a ring over four bridged cards
        crosses PCIe between the pairs); across nodes the slower of that and the network."""
        inside = self.intra
        joined = self.intra.max_gpus
        if joined is not None and min(ranks, GPUS_PER_NODE) > joined and self.pcie is not None:
            inside = self.pcie
        if spans_nodes and self.inter is not None:
            # a ring across nodes still runs through each node's GPUs: it moves at its slowest hop, so cards that
            # reach each other only through host memory do not get faster by adding a network
            return min(self.inter, inside, key=lambda link: link.achieved_bytes_per_s)
        return inside


def _card_path(gpu: GPU, catalog: Catalog, slot_link: str | None = None) -> Interconnect:
    """PCIe peer-to-peer when the card supports it, else host memory (GeForce cards bounce every transfer through
    the CPU: the stock driver allows their P2P only over an NVLink bridge, as the RTX 3090's, never over PCIe --
    the host-memory record's club-3090 measurement); never faster than the slot's own link when the slot is
    narrower than the card."""
    path = catalog.interconnects["host-memory"]
    geforce = gpu.vendor == "nvidia" and gpu.segment == "consumer"
    if gpu.p2p and not geforce and gpu.native_link in catalog.interconnects:
        path = catalog.interconnects[gpu.native_link]
    if slot_link is None:
        return path
    return min(path, catalog.interconnect(slot_link), key=lambda link: link.achieved_bytes_per_s)


def intra_node_link(gpu: GPU, catalog: Catalog, slot_link: str | None = None) -> Interconnect:
    """NVLink (or the card's scale-up fabric) when it has one in the catalog, else the card's PCIe path."""
    if gpu.scale_up_link and gpu.scale_up_link in catalog.interconnects:
        return catalog.interconnects[gpu.scale_up_link]
    return _card_path(gpu, catalog, slot_link)


DEFAULT_NETWORK = "ib-ndr"  # estimate and scale over several nodes when --network is not given (stated in output)


def links(gpu: GPU, catalog: Catalog, *, network: str | None, nodes: int, slot_link: str | None = None) -> Links:
    inter = None
    if nodes > 1:
        inter = catalog.interconnect(network or DEFAULT_NETWORK)
    return Links(intra_node_link(gpu, catalog, slot_link), inter, _card_path(gpu, catalog, slot_link))


def all_reduce_s(size_bytes: float, ranks: int, link: Interconnect) -> float:
    if ranks <= 1 or size_bytes <= 0:
        return 0.0
    return 2 * (ranks - 1) / ranks * size_bytes / link.achieved_bytes_per_s + C.COLLECTIVE_LATENCY.value


def all_gather_s(size_bytes: float, ranks: int, link: Interconnect) -> float:
    """All-gather (or reduce-scatter) of a tensor whose full size is ``size_bytes``."""
    if ranks <= 1 or size_bytes <= 0:
        return 0.0
    return (ranks - 1) / ranks * size_bytes / link.achieved_bytes_per_s + C.COLLECTIVE_LATENCY.value


def all_to_all_s(size_bytes: float, ranks: int, link: Interconnect) -> float:
    """All-to-all of ``size_bytes`` held by each rank, every rank sending (n - 1)/n of it to the others (an MoE
    dispatch or combine: DeepSeek-V3 report sec. 3.4; DeepEP)."""
    if ranks <= 1 or size_bytes <= 0:
        return 0.0
    return (ranks - 1) / ranks * size_bytes / link.achieved_bytes_per_s + C.COLLECTIVE_LATENCY.value


def pipeline_bubble(stages: int, microbatches: int) -> float:
    """Idle fraction of a 1F1B pipeline: (p - 1) / (m + p - 1) (Narayanan et al. 2021)."""
    if stages <= 1:
        return 0.0
    return (stages - 1) / (microbatches + stages - 1)
