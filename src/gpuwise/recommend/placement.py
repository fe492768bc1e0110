"""Where an option's GPUs sit: the machines of a catalog system (bought) or cloud instances (rented), the link
between the GPUs in one machine and the network between machines.

Bought cards go into the smallest system in the catalog (``systems.yaml``) that takes the card and holds them all,
else into several of the largest; SXM/OAM modules go only on their own baseboards (``GPU.board_gpus``). Several
machines need a cluster network: the one the system ships with, the one the user names for the workload
(``--network``), or for rented instances the one the offer documents. Without one an option stays one machine
when its workloads talk across GPUs; serving replicas are independent and need none.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.catalog import GPU, Catalog, CloudOffer, System
from gpuwise.catalog.systems import ALL_KINDS, SystemChoice, choose
from gpuwise.estimate import constants as C
from gpuwise.estimate.speed.parallel import intra_node_link, links
from gpuwise.recommend.fit import Rejection
from gpuwise.recommend.request import Request

_CHASSIS_KINDS = {"desktop": ("desktop",), "workstation": ("workstation",), "server": ("pcie-server", "board-server")}
_SHORT = {"desktop": "desktop", "workstation": "workstation", "pcie-server": "server", "board-server": "node"}


@dataclass(frozen=True)
class Placement:
    """``machines`` x ``gpus_per_machine`` GPUs in one system type or cloud instance type."""

    system: str  # catalog system id, "computer" for a machine that is its own GPU, or the cloud instance name
    name: str
    machines: int
    gpus_per_machine: int
    interconnect: str  # catalog id of the link between GPUs in one machine ("none" for one GPU a machine)
    network: str | None  # catalog id of the network between machines; None: one machine
    slot_link: str | None = None  # the PCIe link each card's slot gives it, when narrower than the card's own
    host_usd: float = 0.0  # the machines without their GPUs (0 for rent, a whole computer or your own host)
    notes: tuple[str, ...] = ()  # what a buyer must know to build it (coolers wider than the slots allow)
    inside: str = ""  # what joins the GPUs of one machine, in words for the table ("" for one GPU a machine)

    @property
    def label(self) -> str:
        """Short, for the table: "1 HGX node", "2 desktops", "2 x p5.48xlarge"."""
        if self.system == "computer":
            return "1 computer"
        if self.name.startswith("rent "):
            return f"{self.machines} x {self.name.removeprefix('rent ')}"
        noun = self.name
        return f"{self.machines} {noun}{'s' if self.machines > 1 else ''}"


def _short_name(system: System) -> str:
    if system.kind == "board-server":
        return "OAM node" if "oam" in system.form_factors else "HGX node"
    return _SHORT[system.kind]


def _slot_link(system: System, gpu: GPU, per_machine: int, catalog: Catalog) -> str | None:
    if gpu.pcie_gen is None or gpu.pcie_lanes is None:
        return None
    gen, lanes = min(gpu.pcie_gen, system.pcie_gen), min(gpu.pcie_lanes, system.lanes_with(per_machine))
    link = f"pcie{gen}-x{lanes}"
    return link if link != gpu.native_link and link in catalog.interconnects else None


def bought(gpu: GPU, count: int, request: Request, catalog: Catalog, *, network: str | None,
           talks: bool) -> Placement | Rejection:
    """The machines ``count`` bought ``gpu`` need; ``network`` the user named, ``talks`` whether the workloads
    communicate across GPUs (training, a serving replica larger than one machine)."""
    c = request.constraints
    if gpu.form_factor in ("soc", "module"):
        return Placement("computer", gpu.name, 1, 1, "none", None)
    chassis = c.chassis or ("desktop" if c.own_host and gpu.form_factor == "pcie" else None)  # most people's PC
    kinds = _CHASSIS_KINDS.get(chassis or "", ALL_KINDS)
    chosen = choose(catalog.systems.values(), gpu, count, kinds)
    if chassis is None and isinstance(chosen, SystemChoice) and chosen.system.kind == "desktop" and isinstance(
            _circuit_rejection(chosen.system, gpu, chosen.gpus_per_machine, request), Rejection):
        # a desktop whose cards the wall circuit cannot feed: the next system up (a workstation) instead
        chosen = choose(catalog.systems.values(), gpu, count, tuple(k for k in kinds if k != "desktop"))
    if chosen is None:
        where = f" as a {chassis}" if chassis else ""
        hint = ("; rent it" if gpu.form_factor == "superchip" else
                "; if your own machine is a server, say --chassis server" if c.own_host and not c.chassis else "")
        return Rejection("chassis", f"no system in the catalog takes {gpu.form_factor.upper()} {gpu.id}{where}{hint}")
    if not isinstance(chosen, SystemChoice):
        return _uneven(chosen, gpu, count)
    system, machines, per_machine = chosen.system, chosen.machines, chosen.gpus_per_machine
    if talks and count % machines:
        return Rejection("count", f"{count} cards over {machines} {_short_name(system)}s is an uneven split: a "
                                  "training launcher starts the same number of ranks on every node", 1.2)
    if c.own_host and machines > 1:
        more = "" if c.chassis else " (--chassis workstation or server if yours holds more)"
        return Rejection("chassis", f"{count} cards need {machines} machines; your own {_short_name(system)} "
                                    f"holds {system.gpu_slots}{more}", machines)
    link = system.network or network
    if machines > 1 and link is None and talks:
        return Rejection("network", f"{count} GPUs need {machines} {_short_name(system)}s and the catalog knows no "
                                    "cluster network between them: name one with --network (eth-100g, ib-ndr ...)",
                         machines)
    if c.max_nodes is not None and machines > c.max_nodes:
        return Rejection("count", f"needs {machines} machines > {c.max_nodes}", machines / c.max_nodes)
    power = _psu_rejection(gpu, per_machine, request) or _circuit_rejection(system, gpu, per_machine, request)
    if isinstance(power, Rejection):
        return power
    slot = _slot_link(system, gpu, per_machine, catalog)
    host = 0.0 if c.own_host and system.kind != "board-server" else chosen.host_usd
    joined = _joined(gpu, catalog, per_machine, intra_node_link(gpu, catalog, slot).id, slot)
    notes = _crowded(system, gpu, per_machine) + ((power,) if isinstance(power, str) else ())
    return Placement(system.id, _short_name(system), machines, per_machine, joined[0],
                     link if machines > 1 else None, slot, host, notes, joined[1])


def _joined(gpu: GPU, catalog: Catalog, per_machine: int, link_id: str, slot: str | None) -> tuple[str, str]:
    """(catalog id, words) of what joins one machine's GPUs: nothing for one GPU; a link that joins fewer cards than
    the machine holds (an NVLink bridge joins a pair) says what carries the traffic between its groups."""
    if per_machine <= 1:
        return "none", ""
    link = catalog.interconnects.get(link_id)
    if link is None or link.max_gpus is None or per_machine <= link.max_gpus:
        return link_id, f"{link_id} inside"
    between = links(gpu, catalog, network=None, nodes=1, slot_link=slot).pcie
    path = between.id if between is not None else "PCIe"
    return link_id, f"{link_id} joining pairs, {path} between them"


def _crowded(system: System, gpu: GPU, per_machine: int) -> tuple[str, ...]:
    """Cards whose coolers need more slot positions than the machine has: buildable only with risers or slimmer
    (blower, 2-slot) versions of the card, which the buyer must seek out."""
    width = -(-(gpu.slot_width or 1) // 1)
    if system.slot_positions is None or per_machine * width <= system.slot_positions:
        return ()
    return (f"{per_machine} cards of {gpu.slot_width:g} slots need {per_machine * width:g} slot positions; a "
            f"{_short_name(system)} has {system.slot_positions}: buy 2-slot (blower) versions or mount on risers",)


def _uneven(system: System, gpu: GPU, count: int) -> Rejection:
    boards = gpu.board_gpus or (system.gpu_slots,)
    sizes = " or ".join(str(b) for b in boards)
    more = " or ".join(str(b * -(-count // b)) for b in boards)
    return Rejection("count", f"{gpu.form_factor.upper()} modules are sold on {sizes}-GPU baseboards: buy {more}, "
                              "or rent", 2.0)


def _psu_rejection(gpu: GPU, per_machine: int, request: Request) -> Rejection | None:
    psu = request.constraints.psu_watts
    if psu is None:
        return None
    draw = (per_machine * gpu.tdp_w + C.HOST_POWER_DESKTOP.value) * C.PSU_HEADROOM.value
    if draw <= psu:
        return None
    return Rejection("power", f"{per_machine} x {gpu.tdp_w:,.0f} W + host, with {C.PSU_HEADROOM.value - 1:.0%} "
                              f"transient headroom, exceeds the {psu:,.0f} W PSU", draw / psu)


def _circuit_rejection(system: System, gpu: GPU, per_machine: int, request: Request) -> Rejection | str | None:
    """A desktop or workstation plugs into a wall circuit: its cards at TDP and the host, through an 80 PLUS Gold
    supply, against what the circuit carries continuously (--circuit-watts; servers sit on rack PDUs). A desktop
    beyond it is refused; a workstation, which is often given a circuit of its own, gets a warning (power-limit the
    cards, or a 20 A or 230 V circuit)."""
    if system.kind not in ("desktop", "workstation"):
        return None
    limit = request.constraints.circuit_watts
    wall = (per_machine * gpu.tdp_w + C.HOST_POWER_DESKTOP.value) / C.PSU_EFFICIENCY_GOLD.value
    if wall <= limit:
        return None
    what = (f"{per_machine} x {gpu.tdp_w:,.0f} W + host draw {wall:,.0f} W at the wall, above the {limit:,.0f} W a "
            "household circuit carries continuously (--circuit-watts; a 230 V, 16 A circuit carries 3,680)")
    if system.kind == "desktop":
        return Rejection("power", what, wall / limit)
    return what + ": give the workstation a circuit of its own or power-limit the cards (nvidia-smi -pl)"


def rented(gpu: GPU, offer: CloudOffer, count: int, catalog: Catalog, *, talks: bool) -> Placement | Rejection:
    """``count`` GPUs as whole instances of ``offer``; several only over the offer's documented network."""
    if count % offer.gpus:
        return Rejection("offer", f"the instance has {offer.gpus} GPUs; {count} is not a multiple")
    instances = count // offer.gpus
    if instances > 1 and offer.network is None and talks:
        return Rejection("network", f"{offer.instance} is one machine of {offer.gpus} GPU(s) with no documented "
                                    f"cluster network: a job over {instances} of them has no fabric to run on",
                         instances)
    joined = _joined(gpu, catalog, offer.gpus, offer.interconnect or intra_node_link(gpu, catalog).id, None)
    return Placement(offer.instance, f"rent {offer.instance}", instances, offer.gpus, joined[0],
                     offer.network if instances > 1 else None, inside=joined[1])
