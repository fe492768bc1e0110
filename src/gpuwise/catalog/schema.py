"""The catalog's record types: one accelerator, one cloud offer, one interconnect.

Files store datasheet units, named in the key (``memory_gb``, ``memory_bandwidth_gb_s``,
``bf16_dense_tflops``, ``tdp_w``); the properties at the bottom of each model convert to the one
unit system used inside gpuwise (bytes, FLOP/s, bytes/s, watts, USD). Bandwidths: GB/s = 1e9 bytes/s,
Gb/s = 1e9 bit/s. Memory capacity: vendors' "GB" of DRAM is binary (2**30 bytes, JEDEC), see ``memory_bytes``.

Tensor figures are **dense**. Where a datasheet lists only figures "with sparsity", the record stores
half of them as dense, keeps the datasheet figure in ``*_sparse_*`` and sets ``dense_from_sparse``.
``fp16``/``bf16``/``fp8`` figures are those with FP32 accumulation (what PyTorch's matmuls use);
GeForce cards run FP16 accumulation at twice that rate, kept in ``*_fp16acc_*`` where it differs.
A ``None`` figure means the chip has no such mode or its maker publishes none; ``notes`` says which.

``measured`` holds what benchmarks reached on the card itself (matmul rates), each figure with its own source and
date: the speed model plans with them before any figure that stands for a whole architecture.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import Field, HttpUrl, PrivateAttr, model_validator

from gpuwise.catalog.measured import GemmReference, Measured
from gpuwise.catalog.record import FIGURE_MAX as FIGURE_MAX
from gpuwise.catalog.record import FIGURE_MIN as FIGURE_MIN
from gpuwise.catalog.record import Dtype as Dtype
from gpuwise.catalog.record import Record as _Record

GB = 1e9
GIB = 2**30
TERA = 1e12

Vendor = Literal["nvidia", "amd", "intel", "apple"]
Segment = Literal["consumer", "workstation", "datacenter", "edge"]
FormFactor = Literal["pcie", "sxm", "oam", "module", "superchip", "soc"]
"""``soc``: a GPU on one package with the CPU, sharing its memory (Apple M, DGX Spark GB10, Ryzen AI Max)."""
Cooling = Literal["axial", "blower", "passive", "liquid", "module"]
Stack = Literal["cuda", "rocm", "oneapi", "synapseai", "metal"]
ID_PATTERN = r"^[a-z0-9]+(?:[.-][a-z0-9]+)*$"


class Source(_Record):
    """Where a figure was read: a document and the table or section within it."""

    url: HttpUrl
    title: str = Field(min_length=3)
    table: str | None = Field(default=None, description="table, section or page the figures come from")


STREET_MAX_AGE_DAYS = 365  # gpuwise policy (issue 14): "buy new" only at a street price observed within a year


class Price(_Record):
    """Purchase prices of one card in USD, true on ``as_of``; each figure is optional."""

    msrp_usd: float | None = Field(default=None, gt=0, description="launch list price")
    street_usd: float | None = Field(default=None, gt=0, description="typical new price on as_of")
    used_usd: float | None = Field(default=None, gt=0, description="typical used price on as_of")
    as_of: dt.date
    source: str = Field(min_length=3, description="URL or document the prices come from")
    note: str | None = None

    def street_on(self, today: dt.date) -> float | None:
        """The new price to buy at on ``today``: a street price dated within STREET_MAX_AGE_DAYS (a launch MSRP or
        an old street price says nothing of what a card costs new now, or whether it is still sold)."""
        if self.street_usd is None or (today - self.as_of).days > STREET_MAX_AGE_DAYS:
            return None
        return self.street_usd

    @model_validator(mode="after")
    def _has_a_price(self) -> Price:
        if self.msrp_usd is None and self.street_usd is None and self.used_usd is None:
            raise ValueError("a price record needs at least one of msrp_usd, street_usd, used_usd")
        return self


class Software(_Record):
    """The vendor stack and whether the common training/serving pieces run on this chip."""

    stack: Stack
    bf16: bool
    fp8: bool
    flash_attention_2: bool
    bitsandbytes: bool
    vllm: bool
    note: str | None = None


class UnifiedMemory(_Record):
    """A GPU that shares the system's memory with the CPU may, by default, use only part of it."""

    gpu_default_fraction: float = Field(gt=0, le=1, description="share of memory_gb the GPU may use by default")
    basis: str = Field(description="what sets that default (driver, OS), with its source")
    raise_with: str = Field(description="how to let the GPU use more, and what to leave the OS")


class GPU(_Record):
    """One accelerator product (a board or module), as its datasheet describes it."""

    id: str = Field(pattern=ID_PATTERN)
    name: str
    aliases: tuple[str, ...] = ()
    vendor: Vendor
    segment: Segment
    architecture: str
    compute_capability: str | None = Field(default=None, pattern=r"^\d+\.\d+$")
    launch_year: int = Field(ge=2015, le=2030)

    memory_gb: float = Field(gt=0)
    memory_type: str
    memory_bandwidth_gb_s: float = Field(gt=0)
    ecc: bool

    fp64_tflops: float | None = Field(default=None, ge=0)
    fp64_tensor_tflops: float | None = Field(default=None, ge=0)
    fp32_tflops: float = Field(gt=0, description="non-tensor (CUDA core / vector) FP32")
    fp32_issue_bound: bool = Field(
        default=False, description="the fp32 figure needs an FP32 instruction in every issue slot: NVIDIA SMs with 32 "
                                   "FP32 lanes per warp scheduler (GA10x, AD10x, GH100, GB100, GB20x), AMD RDNA 3 "
                                   "dual issue and CDNA 3 packed FP32. Integer, load and special-function "
                                   "instructions a kernel mixes in then cost FP32 throughput; parts with 16 lanes per "
                                   "scheduler (V100, T4, A100) fill those slots for free (estimate/hpc/rates.py)")
    tf32_dense_tflops: float | None = Field(default=None, gt=0)
    tf32_sparse_tflops: float | None = Field(default=None, gt=0)
    fp16_dense_tflops: float | None = Field(default=None, gt=0)
    fp16_sparse_tflops: float | None = Field(default=None, gt=0)
    fp16_fp16acc_dense_tflops: float | None = Field(default=None, gt=0)
    bf16_dense_tflops: float | None = Field(default=None, gt=0)
    bf16_sparse_tflops: float | None = Field(default=None, gt=0)
    fp8_dense_tflops: float | None = Field(default=None, gt=0)
    fp8_sparse_tflops: float | None = Field(default=None, gt=0)
    fp8_fp16acc_dense_tflops: float | None = Field(default=None, gt=0)
    int8_dense_tops: float | None = Field(default=None, gt=0)
    int8_sparse_tops: float | None = Field(default=None, gt=0)
    fp4_dense_tflops: float | None = Field(default=None, gt=0)
    fp4_sparse_tflops: float | None = Field(default=None, gt=0)
    dense_from_sparse: bool = Field(
        description="true when the datasheet lists only sparse tensor figures and dense = sparse / 2"
    )

    tdp_w: float = Field(gt=0)
    form_factor: FormFactor
    board_gpus: tuple[int, ...] | None = Field(
        default=None, description="SXM/OAM: the GPU counts of the baseboards the module is sold on (HGX 4 and 8, "
                                  "AMD's 8-OAM platform); a module is bought only on such a board")
    slot_width: float | None = Field(default=None, gt=0, description="PCIe slots the card occupies")
    cooling: Cooling
    power_connector: str | None = Field(default=None, description="None for modules powered by a baseboard")
    pcie_gen: int | None = Field(default=None, ge=3, le=6, description="None for a GPU on the CPU's package (soc)")
    pcie_lanes: int | None = Field(default=None, ge=1, le=16)
    p2p: bool = Field(description="GPU peer-to-peer over PCIe or a scale-up link is supported")
    scale_up_link: str | None = Field(default=None, description="NVLink / Infinity Fabric / RoCE generation")
    scale_up_gb_s: float | None = Field(
        default=None, gt=0, description="total scale-up bandwidth per GPU, both directions"
    )
    mig_max_instances: int = Field(default=0, ge=0, le=7)
    unified_memory: UnifiedMemory | None = Field(default=None, description="soc only: the GPU's default share")

    software: Software
    measured: Measured | None = Field(default=None, description="benchmark figures of this very card, each sourced")
    price: Price | None = None
    sources: tuple[Source, ...] = Field(min_length=1)
    as_of: dt.date = Field(description="when the figures were last checked against the sources")
    notes: str | None = None
    _gemm_reference: GemmReference | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _consistent(self) -> GPU:
        for dtype in ("tf32", "fp16", "bf16", "fp8", "fp4"):
            dense = getattr(self, f"{dtype}_dense_tflops")
            sparse = getattr(self, f"{dtype}_sparse_tflops")
            if dense is not None and sparse is not None and dense > sparse:
                raise ValueError(f"{dtype}_dense_tflops {dense} exceeds {dtype}_sparse_tflops {sparse}")
        if self.int8_dense_tops and self.int8_sparse_tops and self.int8_dense_tops > self.int8_sparse_tops:
            raise ValueError("int8_dense_tops exceeds int8_sparse_tops")
        if (self.scale_up_link is None) != (self.scale_up_gb_s is None):
            raise ValueError("scale_up_link and scale_up_gb_s go together: give both or neither")
        if self.vendor == "nvidia" and self.compute_capability is None:
            raise ValueError("NVIDIA records need compute_capability")
        if self.form_factor == "pcie" and self.slot_width is None:
            raise ValueError("PCIe cards need slot_width")
        if (self.form_factor == "soc") != (self.unified_memory is not None):
            raise ValueError("unified_memory is given for form_factor soc, and only for it")
        if self.form_factor != "soc" and (self.pcie_gen is None or self.pcie_lanes is None):
            raise ValueError("pcie_gen and pcie_lanes are required (only a soc has no host link)")
        no_tensor_rate = self.fp16_dense_tflops is None and self.bf16_dense_tflops is None  # Apple: fp32's rate
        for dtype, measurement in (self.measured.gemm if self.measured else {}).items():
            if self.peak_flops(dtype) is None and not (dtype in ("fp16", "bf16") and no_tensor_rate):
                raise ValueError(f"measured.gemm.{dtype}: the record gives no {dtype} peak to measure against")
            if (measurement.achieved_tflops or 0.0) > (peak := self.matmul_peak_tflops(dtype)):
                raise ValueError(f"measured.gemm.{dtype}: {measurement.achieved_tflops:g} TFLOPS is above the "
                                 f"{peak:g} TFLOPS dense peak; a rate above the datasheet (a boost clock) is given as "
                                 "fraction (at most 1) with the measurement quoted in source")
        return self

    # ---- SI views ---------------------------------------------------------------------------
    @property
    def memory_bytes(self) -> float:
        """Capacity in bytes. DRAM capacity is counted in binary units (JEDEC): an "80 GB" A100 reports
        81,920 MiB in nvidia-smi, an "24 GB" RTX 4090 24,564 MiB; so ``memory_gb`` x 2**30."""
        return self.memory_gb * GIB

    @property
    def usable_memory_bytes(self) -> float:
        """What the GPU may allocate: all of its memory, or on a unified-memory machine the share the OS and driver
        give it by default (``unified_memory``)."""
        fraction = self.unified_memory.gpu_default_fraction if self.unified_memory else 1.0
        return self.memory_bytes * fraction

    @property
    def memory_bandwidth_bytes_per_s(self) -> float:
        return self.memory_bandwidth_gb_s * GB

    def peak_flops(self, dtype: Dtype, *, fp16_accumulate: bool = False) -> float | None:
        """Dense peak FLOP/s (OP/s for int8) of ``dtype``, tensor cores where the chip has them.

        ``fp16_accumulate`` selects the GeForce FP16-accumulate rate where the record has one;
        the default (FP32 accumulate) is what PyTorch's fp16/bf16/fp8 matmuls run at.
        """
        tflops = self._dense_tflops(dtype)
        if fp16_accumulate and dtype in ("fp16", "fp8"):
            tflops = getattr(self, f"{dtype}_fp16acc_dense_tflops") or tflops
        return None if tflops is None else tflops * TERA

    def _dense_tflops(self, dtype: Dtype) -> float | None:
        if dtype == "fp64":
            return self.fp64_tensor_tflops or self.fp64_tflops
        if dtype == "fp32":
            return self.fp32_tflops
        if dtype == "int8":
            return self.int8_dense_tops
        figure: float | None = getattr(self, f"{dtype}_dense_tflops")
        return figure

    def matmul_peak_tflops(self, dtype: Dtype) -> float:
        """The dense peak a matmul in ``dtype`` runs at, in TFLOPS: the dtype's own, else the next the chip has
        (-> fp16 -> fp32), as frameworks fall back (Apple GPUs list no 16-bit tensor rate: they run at fp32's)."""
        return self._dense_tflops(dtype) or self._dense_tflops("fp16") or self.fp32_tflops

    def matmul_peak_flops(self, dtype: Dtype) -> float:
        """``matmul_peak_tflops`` in FLOP/s."""
        return self.matmul_peak_tflops(dtype) * TERA

    def measured_gemm_fraction(self, dtype: Dtype) -> float | None:
        """The fraction of ``matmul_peak_tflops(dtype)`` matmuls in ``dtype`` reached on this very card
        (``measured``); None where nothing was measured in that dtype."""
        measurement = self.measured.gemm.get(dtype) if self.measured else None
        return None if measurement is None else measurement.fraction_of(self.matmul_peak_tflops(dtype))

    @property
    def architecture_family(self) -> str:
        """The architecture's first word, lower case: ``hopper``, ``ada``, ``blackwell`` (Blackwell Ultra, GB10)."""
        return self.architecture.lower().split()[0]

    @property
    def gemm_reference(self) -> GemmReference | None:
        """The measured matmul fractions of the reference card of this card's architecture and segment, which the
        catalog attaches when it is built (``attach_gemm_reference``); None outside a catalog or where no card
        stands for them."""
        return self._gemm_reference

    def attach_gemm_reference(self, reference: GPU) -> None:
        """Record ``reference``'s measured fractions as this card's architecture reference (the catalog loader does
        this once per record it builds; the record's fields stay as they are)."""
        assert reference.measured is not None
        fractions = {d: m.fraction_of(reference.matmul_peak_tflops(d)) for d, m in reference.measured.gemm.items()}
        self._gemm_reference = GemmReference(reference.id, fractions)

    @property
    def native_link(self) -> str:
        """Catalog id of the card's own host link, e.g. ``pcie5-x16``; ``on-package`` for a soc."""
        return "on-package" if self.pcie_gen is None else f"pcie{self.pcie_gen}-x{self.pcie_lanes}"

    @property
    def names(self) -> tuple[str, ...]:
        """Every name the record answers to: id, product name and aliases."""
        return (self.id, self.name, *self.aliases)


class CloudOffer(_Record):
    """One instance type of a provider, with its hourly list price on ``as_of`` (``tier`` spot: preemptible)."""

    id: str = Field(pattern=ID_PATTERN)
    provider: str = Field(pattern=ID_PATTERN, description="lower-case provider id, e.g. aws, runpod")
    instance: str
    gpu: str = Field(pattern=ID_PATTERN, description="catalog id of the GPU")
    gpus: int = Field(ge=1, le=16, description="GPUs per instance")
    usd_per_hour: float = Field(gt=0, description="whole instance, on demand")
    tier: Literal["on-demand", "community", "secure", "marketplace", "spot"] = "on-demand"
    region: str
    interconnect: str | None = Field(default=None, description="catalog id of the GPU-to-GPU link")
    network: str | None = Field(default=None, description="catalog id of the cluster network between instances, per "
                                                          "GPU (EFA, InfiniBand, RoCE); None: a single machine, so "
                                                          "no job spans two of them")
    network_source: str | None = Field(default=None, min_length=3, description="where the network is documented")
    as_of: dt.date
    source: str = Field(min_length=3)
    note: str | None = None

    @model_validator(mode="after")
    def _network_sourced(self) -> CloudOffer:
        if self.network is not None and self.network_source is None:
            raise ValueError("an offer's network needs network_source: the page that documents it")
        return self

    @property
    def usd_per_gpu_hour(self) -> float:
        return self.usd_per_hour / self.gpus


SystemKind = Literal["desktop", "workstation", "pcie-server", "board-server"]


class System(_Record):
    """A machine bought cards go into: what it takes, how its slots are wired, what it costs besides the cards and
    the cluster network it ships with (None: one machine; joining several needs a network the buyer names).

    A ``board-server`` holds one SXM/OAM baseboard; its GPU count is the card's ``board_gpus``."""

    id: str = Field(pattern=ID_PATTERN)
    name: str
    kind: SystemKind
    form_factors: tuple[FormFactor, ...] = Field(min_length=1, description="GPU packages it takes")
    segments: tuple[Segment, ...] = Field(min_length=1, description="card segments it is built for")
    gpus: tuple[str, ...] | None = Field(default=None, description="board servers: the GPU ids of its baseboards")
    gpu_slots: int = Field(ge=1, le=16, description="GPUs one machine holds (a board server: its largest board)")
    slot_lanes: tuple[int, ...] = Field(min_length=1, description="PCIe lanes each card gets with 1, 2, ... cards "
                                                                 "installed (a consumer CPU splits x16 into x8/x8)")
    pcie_gen: int = Field(ge=3, le=6, description="the platform's PCIe generation")
    slot_positions: int | None = Field(default=None, ge=1, le=20, description="expansion-slot positions the "
                                       "cards' coolers may fill (ATX: 7); None for a baseboard of modules")
    host_usd: float | None = Field(default=None, gt=0, description="one machine without its GPUs")
    host_usd_per_gpu: float | None = Field(default=None, gt=0, description="board servers: the server around the "
                                                                           "board, per GPU on it")
    network: str | None = Field(default=None, description="catalog id of the cluster network it ships with, per GPU")
    sources: tuple[Source, ...] = Field(min_length=1)
    as_of: dt.date
    note: str | None = None

    @model_validator(mode="after")
    def _lanes_per_slot(self) -> System:
        if len(self.slot_lanes) != self.gpu_slots and self.kind != "board-server":
            raise ValueError(f"slot_lanes lists {len(self.slot_lanes)} widths for {self.gpu_slots} GPU slots: give "
                             "one per number of cards installed")
        if any(lanes not in (1, 4, 8, 16) for lanes in self.slot_lanes):
            raise ValueError("slot_lanes are PCIe widths: 1, 4, 8 or 16")
        if (self.kind == "board-server") != (self.gpus is not None):
            raise ValueError("gpus (the baseboard's modules) is given for a board-server, and only for it")
        if (self.host_usd is None) == (self.host_usd_per_gpu is None):
            raise ValueError("give host_usd (per machine) or host_usd_per_gpu (a board server), one of them")
        return self

    def host_cost_usd(self, gpus_in_machine: int) -> float:
        """What one machine holding ``gpus_in_machine`` GPUs costs without them."""
        return self.host_usd if self.host_usd is not None else (self.host_usd_per_gpu or 0.0) * gpus_in_machine

    def lanes_with(self, cards: int) -> int:
        """PCIe lanes each card gets with ``cards`` installed in one machine."""
        return self.slot_lanes[min(cards, len(self.slot_lanes)) - 1]


class Interconnect(_Record):
    """A link class: host PCIe, GPU scale-up (NVLink) or a network between nodes.

    Bandwidths are per direction, per GPU (for a NIC: per port). ``achieved`` is what a
    collective or copy benchmark typically measures, with its own source.
    """

    id: str = Field(pattern=ID_PATTERN)
    name: str
    kind: Literal["pcie", "nvlink", "infinity-fabric", "infiniband", "ethernet", "host-memory"]
    scope: Literal["host", "intra-node", "inter-node"]
    nominal_gb_s: float = Field(gt=0, description="per direction, GB/s (1e9 bytes/s)")
    nominal_note: str = Field(description="how the nominal figure follows from the spec (lanes x rate, Gb/s / 8)")
    achieved_gb_s: float = Field(gt=0, description="typically measured, per direction, GB/s")
    latency_us: float | None = Field(default=None, gt=0, description="typical small-message latency")
    max_gpus: int | None = Field(default=None, ge=2, description="GPUs one link joins (2 for an NVLink bridge); "
                                                                  "None: a switch or fabric joining every GPU")
    sources: tuple[Source, ...] = Field(min_length=1)
    as_of: dt.date
    note: str | None = None

    @model_validator(mode="after")
    def _achieved_below_nominal(self) -> Interconnect:
        if self.achieved_gb_s > self.nominal_gb_s:
            raise ValueError(f"achieved_gb_s {self.achieved_gb_s} exceeds nominal_gb_s {self.nominal_gb_s}")
        return self

    @property
    def achieved_bytes_per_s(self) -> float:
        return self.achieved_gb_s * GB
