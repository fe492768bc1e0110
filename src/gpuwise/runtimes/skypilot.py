"""SkyPilot task files as its schema defines them: the keys gpuwise writes, the clouds it knows, and its name for each
catalog GPU (SkyPilot passes an unknown accelerator name through unchecked and fails later finding no machine, so
gpuwise writes only names its catalog lists)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpuwise.runtimes.launch import ToolKind

SKYPILOT_SOURCE = ("skypilot-org/skypilot@7e595970 (v0.14.1) sky/utils/schemas.py get_task_schema (name, num_nodes, "
                   "resources, setup, run, secrets, service), _get_single_resources_schema (accelerators, infra, "
                   "use_spot, ports, disk_size); sky/skylet/constants.py (SKYPILOT_NUM_NODES, SKYPILOT_NODE_IPS, "
                   "SKYPILOT_NODE_RANK, SKYPILOT_NUM_GPUS_PER_NODE)")
TASK_KEYS = frozenset({"name", "num_nodes", "resources", "setup", "run", "secrets", "service"})
RESOURCES_KEYS = frozenset({"accelerators", "infra", "use_spot", "ports", "disk_size"})
SERVICE_KEYS = frozenset({"replicas", "readiness_probe"})
DEFAULT_DISK_GB = 256  # sky/resources.py DEFAULT_DISK_SIZE_GB

CLOUDS = frozenset({"aws", "azure", "gcp", "ibm", "lambda", "scp", "oci", "kubernetes", "runpod", "vast", "vsphere",
                    "cudo", "fluidstack", "paperspace", "primeintellect", "do", "nebius", "hyperbolic", "seeweb",
                    "shadeform", "yotta", "mithril", "verda"})
"""sky/skylet/constants.py ALL_CLOUDS at v0.14.1 (ssh and slurm left out: no provider of gpuwise's offers)."""

ACCELERATORS: Mapping[str, str] = {
    "a10": "A10", "a10g": "A10G", "a100-sxm-40gb": "A100", "a100-sxm-80gb": "A100-80GB", "a40": "A40",
    "a800-pcie-80gb": "A800", "b200-sxm-180gb": "B200", "b300-sxm-288gb": "B300", "gh200-96gb": "GH200",
    "h100-sxm-80gb": "H100", "h100-nvl-94gb": "H100-NVL", "h200-sxm-141gb": "H200", "l4": "L4", "l40": "L40",
    "l40s": "L40S", "mi300x": "MI300X", "rtx-3090": "RTX3090", "rtx-4090": "RTX4090", "rtx-5090": "RTX5090",
    "rtx-6000-ada": "RTX6000-Ada", "rtx-a6000": "A6000", "rtx-pro-6000-blackwell": "RTXPRO6000", "t4": "T4",
    "v100-sxm2-16gb": "V100", "v100-sxm2-32gb": "V100-32GB"}
"""Catalog GPU -> SkyPilot's accelerator name (skypilot-org/skypilot-catalog@d4d53f0e catalogs/v8/common/
accelerators.csv; GCP's H100-80GB is listed as H100, fetch_gcp.py)."""

CLOUD_NAMES: Mapping[str, str] = {"vast-ai": "vast"}
"""gpuwise provider ids SkyPilot spells otherwise; the rest are the same word (aws, gcp, runpod, lambda ...)."""
NOT_REGIONS = frozenset({"", "-", "global", "us", "eu", "asia", "any"})
"""Regions of marketplace offers that name an area, not a place SkyPilot can put a machine: left out of infra."""


@dataclass(frozen=True)
class ClusterTool:
    """A tool that runs one of the serving or training launches on rented machines, from a task file it reads."""

    id: str
    name: str
    source: str
    kind: ToolKind = "cluster"


SKYPILOT = ClusterTool(id="skypilot", name="SkyPilot", source=SKYPILOT_SOURCE)
"""SkyPilot: a task file (TASK_KEYS) that sets up and runs one of the serving or training launches."""
