"""A SkyPilot task file for a rented option or an estimated job: the GPUs by SkyPilot's own name, the cloud and
region of the offer ranked, spot where it was a spot offer, and the setup and run that start exactly the job
gpuwise estimated (keys as runtimes.skypilot cites them)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import yaml

from gpuwise.api.launching import ACCELERATORS, CLOUD_NAMES, CLOUDS, DEFAULT_DISK_GB, NOT_REGIONS, SKYPILOT_SOURCE
from gpuwise.api.reporting import CloudOffer
from gpuwise.errors import ConfigError

MASTER_ADDR = 'MASTER_ADDR=$(echo "$SKYPILOT_NODE_IPS" | head -n1)'  # distributed-jobs.rst, SkyPilot's docs


@dataclass(frozen=True)
class Deployment:
    """What one task runs: ``nodes`` machines of ``gpus_per_node`` GPUs (``replicas`` such groups when serving)."""

    name: str
    gpu: str  # catalog id
    gpus_per_node: int
    nodes: int
    setup: str
    run: str
    checkpoint_gb: float
    offer: CloudOffer | None = None
    port: int | None = None  # serving: the port the server listens on
    replicas: int = 1


def skypilot_task(deployment: Deployment) -> str:
    """The task as YAML, headed by the commands that launch it."""
    d = deployment
    name = ACCELERATORS.get(d.gpu)
    if name is None:
        raise ConfigError(f"SkyPilot's catalog has no name for {d.gpu} (it knows "
                          + ", ".join(sorted(ACCELERATORS)[:10]) + " ...): no task written")
    resources: dict[str, object] = {"accelerators": f"{name}:{d.gpus_per_node}"}
    cloud = _cloud(d.offer)
    if d.offer is not None and cloud is not None:
        region = d.offer.region.split("/")[0]  # a synced offer's region/zone: SkyPilot picks the zone itself
        resources["infra"] = cloud + (f"/{region}" if region.lower() not in NOT_REGIONS else "")
    if d.offer is not None and d.offer.tier == "spot":
        resources["use_spot"] = True
    if d.port is not None:
        resources["ports"] = d.port
    resources["disk_size"] = DEFAULT_DISK_GB + math.ceil(d.checkpoint_gb)
    task: dict[str, object] = {"name": d.name, "resources": resources}
    if d.nodes > 1:
        task["num_nodes"] = d.nodes
    task.update(secrets={"HF_TOKEN": None}, setup=_lines(d.setup), run=_lines(d.run))
    if d.port is not None:
        task["service"] = {"replicas": d.replicas, "readiness_probe": "/v1/models"}
    return _head(d) + yaml.dump(task, Dumper=_Blocks, sort_keys=False, width=120)


def _lines(script: str) -> str:
    """A script ending in a newline: YAML writes it as a literal block, each command on its own line."""
    return script if script.endswith("\n") else script + "\n"


def _head(d: Deployment) -> str:
    where = f" on {d.offer.provider} {d.offer.instance} ({d.offer.tier})" if d.offer is not None else ""
    if d.offer is not None and _cloud(d.offer) is None:
        where += f"; SkyPilot has no cloud named {d.offer.provider!r}: choose one with infra:"
    launch = (f"sky serve up gpuwise-sky.yaml --secret HF_TOKEN  # {d.replicas} replica(s); or one: sky launch"
              if d.port is not None else "sky launch -c gpuwise gpuwise-sky.yaml --secret HF_TOKEN")
    keys = SKYPILOT_SOURCE.split(" sky/")[0]
    return (f"# SkyPilot task: {d.nodes * d.gpus_per_node} x {d.gpu}{where}\n# keys as {keys} defines them; save as "
            f"gpuwise-sky.yaml, then: {launch}\n")


def _cloud(offer: CloudOffer | None) -> str | None:
    if offer is None:
        return None
    cloud = CLOUD_NAMES.get(offer.provider, offer.provider)
    return cloud if cloud in CLOUDS else None


class _Blocks(yaml.SafeDumper):
    """Multi-line strings (setup, run) as YAML literal blocks, as SkyPilot's own examples write them."""


def _block(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Blocks.add_representer(str, _block)
