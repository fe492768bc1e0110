"""User files that add GPUs or fix stale prices, without editing the package."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from gpuwise.catalog import load_catalog
from gpuwise.errors import CatalogError

NEW_GPU = """
gpus:
  - id: my-lab-card
    name: Lab Card 16GB
    aliases: [Lab Card]
    vendor: nvidia
    segment: workstation
    architecture: Ada Lovelace
    compute_capability: "8.9"
    launch_year: 2024
    memory_gb: 16
    memory_type: GDDR6
    memory_bandwidth_gb_s: 448
    ecc: true
    fp32_tflops: 20
    bf16_dense_tflops: 80
    dense_from_sparse: false
    tdp_w: 140
    form_factor: pcie
    slot_width: 1
    cooling: blower
    pcie_gen: 4
    pcie_lanes: 16
    p2p: true
    software: {stack: cuda, bf16: true, fp8: false, flash_attention_2: true, bitsandbytes: true, vllm: true}
    sources: [{url: "https://example.org/lab-card.pdf", title: "Lab Card datasheet"}]
    as_of: 2026-11-01
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_a_partial_record_patches_a_stale_price(tmp_path: Path) -> None:
    patch = write(tmp_path, "prices.yaml", """
gpus:
  - id: rtx-4090
    price: {street_usd: 1799, as_of: 2026-11-20, source: "my local shop, quote 4711"}
""")
    gpu = load_catalog([patch], use_user_dir=False).gpus["rtx-4090"]
    assert gpu.price is not None and gpu.price.street_usd == 1799
    assert gpu.price.as_of == dt.date(2026, 11, 20)
    assert gpu.memory_bandwidth_gb_s == pytest.approx(1008)  # everything else is the shipped record
    # the shipped catalog itself is untouched
    assert load_catalog(use_user_dir=False).gpus["rtx-4090"].price.street_usd != 1799  # type: ignore[union-attr]


def test_a_new_record_is_added_and_found_by_alias(tmp_path: Path) -> None:
    cat = load_catalog([write(tmp_path, "lab.yaml", NEW_GPU)], use_user_dir=False)
    assert cat.gpu("lab card").id == "my-lab-card"
    assert len(cat.gpus) == len(load_catalog(use_user_dir=False).gpus) + 1


def test_the_user_config_folder_is_read(_isolated_config: Path) -> None:
    catalog_dir = _isolated_config / "catalog"
    catalog_dir.mkdir()
    write(catalog_dir, "lab.yaml", NEW_GPU)
    assert "my-lab-card" in load_catalog().gpus
    assert "my-lab-card" not in load_catalog(use_user_dir=False).gpus


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpus:\n  - id: rtx-4090\n    memory_gb: -24\n", "field 'memory_gb': Input should be greater than 0"),
        ("gpus:\n  - id: brand-new\n    name: New\n", "record 'brand-new': field 'vendor': Field required"),
        ("gpus: [\n", "is not valid YAML"),
        ("cards: []\n", "unknown section 'cards'; use gpus, offers, interconnects or systems"),
        ("gpus:\n  - name: no id\n", "every override record needs an 'id'"),
        ("gpus:\n  - id: rtx-4090\n    bf16_dense_tflops: 999\n    bf16_sparse_tflops: 10\n",
         "bf16_dense_tflops 999.0 exceeds bf16_sparse_tflops 10.0"),
    ],
)
def test_malformed_files_give_one_line_that_names_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "bad.yaml", text)
    before = path.read_text()
    with pytest.raises(CatalogError) as err:
        load_catalog([path], use_user_dir=False)
    assert message in str(err.value)
    assert "\n" not in str(err.value)
    assert str(path) in str(err.value)
    assert path.read_text() == before  # a failed load changes no file


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="does not exist"):
        load_catalog([tmp_path / "nope.yaml"], use_user_dir=False)


def test_an_offer_must_name_a_known_gpu(tmp_path: Path) -> None:
    path = write(tmp_path, "offers.yaml", """
offers:
  - {id: my-cloud-x, provider: my-cloud, instance: x1, gpu: rtx-9999, gpus: 1, usd_per_hour: 1.0,
     region: eu, as_of: 2026-11-01, source: "quote"}
""")
    with pytest.raises(CatalogError, match="unknown GPU 'rtx-9999'"):
        load_catalog([path], use_user_dir=False)
