"""Measured matmul efficiencies live on the catalog records with their sources (issue 38): a card's own measurement
first, then its architecture's reference card's (``measured.stands_for``), then the stated default; a user's catalog
file can give a card its own ``measured`` block."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml

from gpuwise import fitted
from gpuwise.catalog import Catalog, load_catalog
from gpuwise.catalog.loading import shipped_raw
from gpuwise.catalog.schema import GPU
from gpuwise.errors import CatalogError
from gpuwise.estimate import constants as C
from gpuwise.estimate.roofline import Op, gemm_efficiency, machine, op_time

# the figures estimate/constants.py held before they moved (GEMM_EFFICIENCY_BY_GPU), written as it wrote them
BEFORE = {
    ("a100-sxm-80gb", "bf16"): 271.2 / 312, ("a100-pcie-80gb", "bf16"): 252.9 / 312,
    ("h100-sxm-80gb", "bf16"): 794.5 / 989.5, ("h100-sxm-80gb", "fp8"): 1402.6 / 1979,
    ("h200-sxm-141gb", "fp8"): 1453.4 / 1979, ("gh200-96gb", "bf16"): 828.6 / 989.5,
    ("b200-sxm-180gb", "bf16"): 1745 / 2250, ("rtx-4090", "fp16"): 0.95, ("rtx-5060-ti-16gb", "bf16"): 0.95,
    ("mi300x", "bf16"): 668.4 / 1307.4, ("mi325x", "bf16"): 784.9 / 1307.4, ("mi355x", "bf16"): 1565.0 / 2516.6,
    ("gaudi2", "bf16"): 418.7 / 432, ("gaudi2", "fp8"): 826.5 / 865, ("gaudi3", "bf16"): 1243.0 / 1835,
    ("gaudi3", "fp8"): 1289.5 / 1835, ("rx-7900-xtx", "bf16"): 99.37 / 122.8, ("rx-7900-xtx", "fp16"): 105.43 / 122.8,
    ("ryzen-ai-max-395-128gb", "bf16"): 21.6 / 59.4, ("apple-m4-max-128gb", "bf16"): 13.18 / 17.2,
    ("apple-m4-max-128gb", "fp16"): 14.82 / 17.2, ("arc-a770-16gb", "fp16"): 58.74 / 137.6,
}
H100_PEAK_BF16 = 989.5e12  # NVIDIA H100 datasheet, SXM, BF16 dense (1,979 with sparsity / 2)


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def measurement(dtype: str, figure: str) -> str:
    return f"""
gpus:
  - id: h100-sxm-80gb
    measured:
      gemm:
        {dtype}: {{{figure}, as_of: 2026-11-20, source: "our cluster, mamf-finder.py"}}
"""


# ---- the shipped records ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("gpu_id", "dtype"), sorted(BEFORE))
def test_each_measurement_moved_onto_its_card_unchanged(gpu_id: str, dtype: str, shipped: Catalog) -> None:
    gpu = shipped.gpus[gpu_id]
    assert gpu.measured is not None and dtype in gpu.measured.gemm
    assert gpu.measured_gemm_fraction(dtype) == pytest.approx(BEFORE[gpu_id, dtype], abs=1e-12)  # type: ignore[arg-type]
    assert gemm_efficiency(gpu, dtype) == pytest.approx(BEFORE[gpu_id, dtype], abs=1e-12)  # type: ignore[arg-type]


def test_every_measured_card_is_one_the_table_had(shipped: Catalog) -> None:
    held = {(g.id, d) for g in shipped.gpus.values() if g.measured for d in g.measured.gemm}
    assert held == set(BEFORE)


def test_every_measurement_names_its_source_and_date(shipped: Catalog) -> None:
    for gpu in shipped.gpus.values():
        for dtype, m in (gpu.measured.gemm if gpu.measured else {}).items():
            assert "http" in m.source or "benchmarks/data" in m.source, (gpu.id, dtype)
            assert dt.date(2020, 1, 1) <= m.as_of <= dt.date(2027, 1, 1)


def test_a_rate_is_stored_as_measured_and_divided_by_the_records_own_peak() -> None:
    raw = dict(dict(shipped_raw()["gpus"])["gpus/h100-sxm-80gb.yaml"])
    assert raw["measured"]["gemm"]["bf16"]["achieved_tflops"] == 794.5  # the mamf-finder row, as published
    assert raw["bf16_dense_tflops"] == 989.5


def test_one_reference_card_per_architecture_and_segment(shipped: Catalog) -> None:
    references = {(g.architecture_family, g.segment): g.id
                  for g in shipped.gpus.values() if g.measured and g.measured.stands_for}
    assert references == {
        ("ampere", "datacenter"): "a100-sxm-80gb", ("hopper", "datacenter"): "h100-sxm-80gb",
        ("blackwell", "datacenter"): "b200-sxm-180gb", ("ada", "consumer"): "rtx-4090",
        ("blackwell", "consumer"): "rtx-5060-ti-16gb",
    }


@pytest.mark.parametrize(("gpu_id", "dtype", "fraction"), [
    ("h200-sxm-141gb", "bf16", 794.5 / 989.5),  # its own record holds fp8 only: H100 SXM's bf16
    ("h100-pcie-80gb", "fp8", 1402.6 / 1979),  # the reference card's figure in the very dtype
    ("gh200-96gb", "fp8", 1402.6 / 1979),
    ("h100-sxm-80gb", "fp16", 794.5 / 989.5),  # a dtype the reference lacks: its 16-bit figure
    ("b300-sxm-288gb", "bf16", 1745 / 2250),  # Blackwell Ultra is Blackwell
    ("gb200-186gb", "fp4", 1745 / 2250),
    ("a40", "bf16", 271.2 / 312),
    ("rtx-4080-super", "bf16", 0.95),  # the RTX 4090 was measured in fp16
    ("rtx-5090", "bf16", 0.95),
    ("l40s", "bf16", 0.75),  # Ada data-center: no reference of its segment, the default
    ("rtx-6000-ada", "bf16", 0.75),
    ("rtx-3090", "bf16", 0.75),
    ("dgx-spark-128gb", "bf16", 0.75),  # Blackwell workstation
    ("mi250x", "bf16", 0.75),
    ("gaudi2", "fp16", 0.75),  # measured in bf16 and fp8 only, and no reference
    ("apple-m4-max-128gb", "fp32", 0.75),
])
def test_a_card_without_its_own_measurement(gpu_id: str, dtype: str, fraction: float, shipped: Catalog) -> None:
    assert gemm_efficiency(shipped.gpus[gpu_id], dtype) == pytest.approx(fraction, abs=1e-12)  # type: ignore[arg-type]
    if fraction == 0.75:
        assert fraction == C.GEMM_EFFICIENCY_DEFAULT.value


def test_a_record_built_outside_a_catalog_has_no_reference(shipped: Catalog) -> None:
    raw = dict(dict(shipped_raw()["gpus"])["gpus/h200-sxm-141gb.yaml"])
    alone = GPU.model_validate(raw)
    assert alone.gemm_reference is None
    assert gemm_efficiency(alone, "bf16") == C.GEMM_EFFICIENCY_DEFAULT.value
    assert gemm_efficiency(alone, "fp8") == pytest.approx(1453.4 / 1979, abs=1e-12)
    assert shipped.gpus["h200-sxm-141gb"].gemm_reference.gpu_id == "h100-sxm-80gb"  # type: ignore[union-attr]


# ---- a user's records ---------------------------------------------------------------------------------------------
def _compute_bound_seconds(catalog: Catalog) -> float:
    """One large GEMM of a forward pass: 2 x N parameters x tokens FLOPs, with next to no bytes to move."""
    n_params, tokens = 8e9, 4096
    op = Op("mlp", "gemm", flops=2 * n_params * tokens, bytes=1.0)
    seconds, bound = op_time(op, machine(catalog.gpus["h100-sxm-80gb"], "bf16"))
    assert bound == "compute"
    return seconds


@pytest.mark.parametrize("fraction", [0.5, 1.0])
def test_a_users_fraction_sets_the_compute_bound_rate(fraction: float, tmp_path: Path) -> None:
    catalog = load_catalog([write(tmp_path, "mine.yaml", measurement("bf16", f"fraction: {fraction}"))],
                           use_user_dir=False)
    flops = 2 * 8e9 * 4096
    size = flops / (flops + fitted.value("gemm_half_efficiency_flop"))  # the size curve, near 1 for a GEMM this large
    shape = fitted.value("fixed_shape_fraction_sm90")  # a model's shapes against the best shape, on Hopper
    expected = flops / (H100_PEAK_BF16 * fraction * shape * size) + fitted.value("kernel_overhead_s")  # + a floor
    assert _compute_bound_seconds(catalog) == pytest.approx(expected, rel=1e-9)


def test_half_the_measured_fraction_doubles_a_compute_bound_gemm(tmp_path: Path) -> None:
    half = load_catalog([write(tmp_path, "a.yaml", measurement("bf16", "fraction: 0.5"))], use_user_dir=False)
    full = load_catalog([write(tmp_path, "b.yaml", measurement("bf16", "fraction: 1.0"))], use_user_dir=False)
    floor = fitted.value("kernel_overhead_s")
    assert _compute_bound_seconds(half) - floor == pytest.approx(2 * (_compute_bound_seconds(full) - floor), rel=1e-9)


def test_a_users_measurement_replaces_the_shipped_one_whole(tmp_path: Path) -> None:
    """A fraction over a shipped rate is not a record holding both: the user's figure, source and date replace it."""
    catalog = load_catalog([write(tmp_path, "mine.yaml", measurement("bf16", "fraction: 0.5"))], use_user_dir=False)
    gpu = catalog.gpus["h100-sxm-80gb"]
    assert gpu.measured is not None
    bf16 = gpu.measured.gemm["bf16"]
    assert (bf16.fraction, bf16.achieved_tflops, bf16.source) == (0.5, None, "our cluster, mamf-finder.py")
    assert gpu.measured.gemm["fp8"].achieved_tflops == 1402.6  # the dtypes it did not give stay shipped
    assert gpu.measured.stands_for is not None


def test_a_users_rate_is_divided_by_the_cards_peak(tmp_path: Path) -> None:
    catalog = load_catalog([write(tmp_path, "mine.yaml", measurement("bf16", "achieved_tflops: 700"))],
                           use_user_dir=False)
    m = machine(catalog.gpus["h100-sxm-80gb"], "bf16")
    assert m.peak_flops * m.gemm_efficiency == pytest.approx(700e12, rel=1e-12)


def test_a_users_measurement_of_the_reference_card_moves_the_cards_it_stands_for(tmp_path: Path,
                                                                                   shipped: Catalog) -> None:
    catalog = load_catalog([write(tmp_path, "mine.yaml", measurement("bf16", "fraction: 0.5"))], use_user_dir=False)
    assert gemm_efficiency(catalog.gpus["h200-sxm-141gb"], "bf16") == 0.5
    assert gemm_efficiency(catalog.gpus["h20"], "bf16") == 0.5
    assert gemm_efficiency(catalog.gpus["gh200-96gb"], "bf16") == pytest.approx(828.6 / 989.5)  # its own stays
    assert gemm_efficiency(shipped.gpus["h200-sxm-141gb"], "bf16") == pytest.approx(794.5 / 989.5)  # untouched


LAB_RUN = {"gemm": {"bf16": {"achieved_tflops": 600, "as_of": dt.date(2026, 11, 20), "source": "lab run"}}}


def _new_card(tmp_path: Path, measured: dict[str, object] | None) -> Path:
    """A complete record of a card the catalog lacks: an H100 SXM capped to 900 TFLOPS, under its own id."""
    raw = dict(dict(shipped_raw()["gpus"])["gpus/h100-sxm-80gb.yaml"])
    raw.update(id="lab-h100", name="Lab H100 (power capped)", aliases=[], bf16_dense_tflops=900.0, measured=measured)
    return write(tmp_path, "lab.yaml", yaml.safe_dump({"gpus": [raw]}, sort_keys=False))


def test_a_users_new_card_with_its_own_measurement(tmp_path: Path) -> None:
    own = _new_card(tmp_path, LAB_RUN)
    catalog = load_catalog([own], use_user_dir=False)
    m = machine(catalog.gpus["lab-h100"], "bf16")
    assert m.peak_flops == 900e12
    assert m.gemm_efficiency == pytest.approx(600 / 900, abs=1e-12)
    assert m.peak_flops * m.gemm_efficiency == pytest.approx(600e12, rel=1e-12)


def test_a_users_new_card_without_one_borrows_its_architectures_reference(tmp_path: Path) -> None:
    catalog = load_catalog([_new_card(tmp_path, None)], use_user_dir=False)
    assert gemm_efficiency(catalog.gpus["lab-h100"], "bf16") == pytest.approx(794.5 / 989.5, abs=1e-12)


def test_two_cards_cannot_stand_for_one_architecture_and_segment(tmp_path: Path) -> None:
    clash = _new_card(tmp_path, {**LAB_RUN, "stands_for": "our lab's cards"})
    with pytest.raises(CatalogError, match="both stand for hopper datacenter"):
        load_catalog([clash], use_user_dir=False)
    handover = write(tmp_path, "handover.yaml", "gpus:\n  - {id: h100-sxm-80gb, measured: {stands_for: null}}\n")
    catalog = load_catalog([clash, handover], use_user_dir=False)
    assert gemm_efficiency(catalog.gpus["h200-sxm-141gb"], "bf16") == pytest.approx(600 / 900, abs=1e-12)


# ---- validation ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("dtype", "figure", "message"), [
    ("bf16", "fraction: 1.2", "less than or equal to 1"),
    ("bf16", "fraction: 0", "greater than 0"),
    ("bf16", "achieved_tflops: 1200", "above the 989.5 TFLOPS dense peak"),
    ("bf16", "achieved_tflops: 700, fraction: 0.7", "one of them"),
    ("bf16", "note: nothing", "one of them"),
    ("fp4", "fraction: 0.5", "no fp4 peak"),  # Hopper has no FP4
    ("fp12", "fraction: 0.5", "Input should be"),
])
def test_a_bad_measurement_is_a_one_line_error(dtype: str, figure: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match=message) as caught:
        load_catalog([write(tmp_path, "bad.yaml", measurement(dtype, figure))], use_user_dir=False)
    assert "h100-sxm-80gb" in str(caught.value) and "\n" not in str(caught.value)


def test_a_card_with_no_16_bit_rate_measures_against_its_fp32_peak(shipped: Catalog) -> None:
    """Apple lists no 16-bit tensor rate; MPS's bf16 matmuls are planned against the fp32 rate, as measured."""
    m4 = shipped.gpus["apple-m4-max-128gb"]
    assert m4.bf16_dense_tflops is None and m4.fp16_dense_tflops is None
    m = machine(m4, "bf16")
    assert m.peak_flops == 17.2e12 and m.peak_flops * m.gemm_efficiency == pytest.approx(13.18e12, rel=1e-12)
