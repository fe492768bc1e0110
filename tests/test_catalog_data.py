"""Schema and invariants over every shipped record: the catalog is data people will trust."""

from __future__ import annotations

import datetime as dt

import pytest

from gpuwise.catalog import Catalog, load_catalog
from gpuwise.catalog.lookup import compact_key

# The stable ids of issue #2: scripts and saved scenarios use them.
REQUIRED_IDS = """
rtx-3060-12gb rtx-3090 rtx-3090-ti rtx-4060-ti-16gb rtx-4070-ti-super rtx-4080-super rtx-4090 rtx-5070-ti
rtx-5080 rtx-5090 rtx-a6000 rtx-6000-ada rtx-pro-6000-blackwell v100-sxm2-16gb v100-sxm2-32gb t4 a10 a10g l4 l40s
a100-pcie-40gb a100-sxm-40gb a100-pcie-80gb a100-sxm-80gb a800-pcie-80gb h100-pcie-80gb h100-sxm-80gb
h100-nvl-94gb h200-sxm-141gb h200-nvl-141gb gh200-96gb b200-sxm-180gb mi250x mi300x mi325x rx-7900-xtx
radeon-pro-w7900 gaudi2 gaudi3 arc-a770-16gb jetson-agx-orin-64gb jetson-orin-nano-8gb
""".split()

REQUIRED_LINKS = "pcie3-x16 pcie4-x4 pcie4-x8 pcie4-x16 pcie5-x8 pcie5-x16 nvlink3 nvlink4 nvlink5 ib-hdr ib-ndr " \
                 "eth-100g eth-400g".split()
TODAY = dt.date(2026, 11, 29)


def test_every_required_gpu_is_present_and_there_are_at_least_45(shipped: Catalog) -> None:
    missing = sorted(set(REQUIRED_IDS) - set(shipped.gpus))
    assert not missing, f"missing catalog ids: {missing}"
    assert len(shipped.gpus) >= 45


def test_names_are_unique_across_records(shipped: Catalog) -> None:
    owner: dict[str, str] = {}
    for gpu in shipped.gpus.values():
        for name in gpu.names:
            assert owner.setdefault(compact_key(name), gpu.id) == gpu.id, f"{name!r} names two GPUs"


@pytest.mark.parametrize("gpu_id", REQUIRED_IDS)
def test_record_invariants(shipped: Catalog, gpu_id: str) -> None:
    g = shipped.gpus[gpu_id]
    assert g.memory_gb > 0 and g.memory_bandwidth_gb_s > 0 and g.tdp_w > 0
    assert g.sources and all(s.url.scheme == "https" or s.url.scheme == "http" for s in g.sources)
    assert g.as_of <= TODAY
    for dtype in ("tf32", "fp16", "bf16", "fp8", "fp4"):
        dense, sparse = getattr(g, f"{dtype}_dense_tflops"), getattr(g, f"{dtype}_sparse_tflops")
        if dense is not None and sparse is not None:
            assert dense <= sparse
            if g.dense_from_sparse:  # halved from the datasheet's sparse figure, so exactly half
                assert dense == pytest.approx(sparse / 2, rel=0.01), dtype
    # a tensor mode is never slower than the non-tensor FP32 pipe on chips that have tensor units
    if g.bf16_dense_tflops is not None:
        assert g.bf16_dense_tflops >= g.fp32_tflops * 0.99
    if g.price is not None:
        assert g.price.as_of <= TODAY
    if g.software.fp8:
        assert g.fp8_dense_tflops is not None, "fp8 support claimed without an FP8 figure"


def test_geforce_records_keep_both_accumulate_rates(shipped: Catalog) -> None:
    """GeForce Ada/Blackwell run FP16-accumulate tensor math at twice the FP32-accumulate rate."""
    for gpu_id in ("rtx-4060-ti-16gb", "rtx-4070-ti-super", "rtx-4080-super", "rtx-4090",
                   "rtx-5070-ti", "rtx-5080", "rtx-5090", "rtx-3060-12gb", "rtx-3090", "rtx-3090-ti"):
        g = shipped.gpus[gpu_id]
        assert g.fp16_fp16acc_dense_tflops == pytest.approx(2 * (g.fp16_dense_tflops or 0), rel=0.02), gpu_id
        assert g.peak_flops("fp16", fp16_accumulate=True) == pytest.approx(2 * (g.peak_flops("fp16") or 0), rel=0.02)
        assert not g.ecc and g.segment == "consumer"


def test_geforce_ada_and_blackwell_have_no_peer_to_peer(shipped: Catalog) -> None:
    for g in shipped.gpus.values():
        if g.segment == "consumer" and g.vendor == "nvidia" and g.architecture.lower().startswith(("ada", "blackwell")):
            assert not g.p2p and g.scale_up_link is None, g.id


def test_datacenter_sxm_and_oam_modules_have_no_slot_and_no_cable(shipped: Catalog) -> None:
    for g in shipped.gpus.values():
        if g.form_factor in ("sxm", "oam"):
            assert g.slot_width is None and g.power_connector is None, g.id


def test_offers_cover_the_required_providers_and_point_at_real_records(shipped: Catalog) -> None:
    assert len(shipped.offers) >= 25
    providers = {o.provider for o in shipped.offers.values()}
    assert {"aws", "gcp", "azure", "lambda", "runpod", "vast-ai"} <= providers
    for offer in shipped.offers.values():
        assert offer.gpu in shipped.gpus
        assert offer.as_of <= TODAY
        # sanity bound from the price research notes: $0.05-$50 per GPU-hour
        assert 0.05 <= offer.usd_per_gpu_hour <= 50, offer.id


def test_interconnects_have_their_stable_ids_and_sane_bandwidths(shipped: Catalog) -> None:
    missing = sorted(set(REQUIRED_LINKS) - set(shipped.interconnects))
    assert not missing
    for link in shipped.interconnects.values():
        assert 0 < link.achieved_gb_s <= link.nominal_gb_s, link.id


@pytest.mark.parametrize(
    ("link_id", "gb_per_s"),
    [
        # Gb/s is not GB/s: a 400 Gb/s port moves 400e9 / 8 bytes per second.
        ("eth-400g", 400 / 8),
        ("eth-100g", 100 / 8),
        ("ib-ndr", 400 / 8),
        ("ib-hdr", 200 / 8),
        # PCIe: GT/s per lane x lanes x 128/130 encoding / 8 bits (PCI-SIG base specifications)
        ("pcie4-x16", 16 * 16 * 128 / 130 / 8),
        ("pcie5-x16", 32 * 16 * 128 / 130 / 8),
        ("pcie4-x4", 16 * 4 * 128 / 130 / 8),
        ("pcie3-x16", 8 * 16 * 128 / 130 / 8),
        # NVLink per direction = half the per-GPU bidirectional total (NVIDIA NVLink page)
        ("nvlink3", 600 / 2),
        ("nvlink4", 900 / 2),
        ("nvlink5", 1800 / 2),
    ],
)
def test_nominal_link_bandwidth_per_direction(shipped: Catalog, link_id: str, gb_per_s: float) -> None:
    assert shipped.interconnects[link_id].nominal_gb_s == pytest.approx(gb_per_s, rel=0.02)


def test_loading_twice_gives_the_cached_catalog() -> None:
    assert load_catalog(use_user_dir=False) is load_catalog(use_user_dir=False)
