"""How an option's GPUs sit, as far as the estimate needs it: machines, GPUs in each, the network and the slot link
(recommend/placement.py decides them)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuwise.estimate import constants as C
from gpuwise.workload.jobs.job import InferJob, TrainJob

GPUS_PER_NODE = int(C.GPUS_PER_NODE.value)


@dataclass(frozen=True)
class Machines:
    """How the GPUs of an option sit, as far as the estimate needs it (recommend/placement.py decides)."""

    nodes: int = 1
    gpus_per_node: int = GPUS_PER_NODE
    network: str | None = None  # None: the default network (InfiniBand NDR) where machines are linked
    slot_link: str | None = None
    linked: bool = True  # False: separate machines with no network between them (cloud pods serving on their own)

    def replicas(self, count: int, tp: int) -> int:
        """Serving replicas of ``tp`` GPUs that ``count`` GPUs form when no replica may straddle two machines (the
        cards split as evenly as placement.py splits them)."""
        per = min(self.gpus_per_node, -(-count // self.nodes))  # the fullest machine
        fuller = count - self.nodes * (per - 1)  # machines holding ``per``; the rest hold one fewer
        return fuller * (per // tp) + (self.nodes - fuller) * ((per - 1) // tp)

    def place(self, job: TrainJob | InferJob) -> TrainJob | InferJob:
        """The job's links set to these machines' (an explicit --network of the user's is kept when none is known)."""
        changes = {k: v for k, v in (("slot_link", self.slot_link), ("network", self.network)) if v is not None}
        return job.updated(**changes) if changes else job


def default_machines(count: int) -> Machines:
    return Machines(nodes=max(1, math.ceil(count / GPUS_PER_NODE)))
