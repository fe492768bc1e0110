"""GPU names as tools print them (nvidia-smi/NVML/DCGM, rocm-smi/amd-smi, hl-smi, llama-bench's gpu_info) resolve to
catalog ids through one sourced table (catalog/data/gpu_names.yaml); every other name gets one line saying how to
name the card instead."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpuwise.catalog import Catalog
from gpuwise.catalog.device_names import match_device, name_table, normalized, split_devices
from gpuwise.errors import ConfigError

FIXTURES = Path(__file__).parent / "fixtures" / "exports"
EXPORTS = Path(__file__).resolve().parents[2] / "shared" / "data" / "exports"


def test_every_row_names_catalog_cards_and_a_listed_source(shipped: Catalog) -> None:
    table = name_table()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", table.as_of)
    for row in table.rows.values():
        assert row.gpus and all(g in shipped.gpus for g in row.gpus), row
        assert str(table.sources[row.source]["url"]).startswith("https://github.com/"), row.source


def test_every_nvidia_and_amd_card_has_a_printed_spelling(shipped: Catalog) -> None:
    covered = {g for row in name_table().rows.values() for g in row.gpus}
    missing = [g.id for g in shipped.gpus.values() if g.vendor in ("nvidia", "amd") and g.id not in covered]
    assert missing == []


@pytest.mark.parametrize("row", list(name_table().rows.values()), ids=lambda r: r.name)
def test_a_printed_name_agrees_with_its_record(shipped: Catalog, row: object) -> None:
    """The name's own memory size and form factor are the record's: an 80GB name is never an 80 GB record's 40 GB
    sibling, a PCIe name never an SXM module (GH200's "480GB" counts the Grace CPU's LPDDR5X and is left out)."""
    name = row.name  # type: ignore[attr-defined]
    cards = [shipped.gpus[g] for g in row.gpus]  # type: ignore[attr-defined]
    size = re.search(r"(\d+)\s*GB", name, re.IGNORECASE)
    if size and "GH200" not in name:
        assert all(round(c.memory_gb) == int(size.group(1)) for c in cards), (name, [c.memory_gb for c in cards])
    if re.search(r"pcie", name, re.IGNORECASE):
        assert all(c.form_factor == "pcie" for c in cards)
    if re.search(r"sxm", name, re.IGNORECASE):
        assert all(c.form_factor == "sxm" for c in cards)


@pytest.mark.parametrize(
    ("printed", "gpu_id"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm-80gb"),
        ("NVIDIA A100-SXM4-40GB", "a100-sxm-40gb"),
        ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("NVIDIA GeForce RTX 4090 D", "rtx-4090d"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx-pro-6000-blackwell"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx-pro-6000-blackwell"),
        ("NVIDIA H200", "h200-sxm-141gb"),
        ("NVIDIA H200 NVL", "h200-nvl-141gb"),
        ("Tesla T4", "t4"),
        ("AMD Instinct MI300X", "mi300x"),
        ("AMD Instinct MI300X OAM", "mi300x"),
        ("Radeon RX 7900 XTX", "rx-7900-xtx"),
        ("AMD Radeon RX 7900 XTX", "rx-7900-xtx"),
        ("HL-225", "gaudi2"),
        ("  nvidia  geforce rtx 4090 ", "rtx-4090"),
    ],
)
def test_printed_names_resolve(shipped: Catalog, printed: str, gpu_id: str) -> None:
    found = match_device(printed, shipped)
    assert (found.gpu, found.count) == (gpu_id, 1)


def test_the_server_edition_says_which_record_stands_in(shipped: Catalog) -> None:
    found = match_device("NVIDIA RTX PRO 6000 Blackwell Server Edition", shipped)
    assert found.how == "table" and "Workstation Edition" in found.note


def test_names_in_real_exports_are_in_the_table(shipped: Catalog) -> None:
    """DCGM's modelName (AIPerf telemetry) and llama-bench's CUDA device name, as the files carry them."""
    bench = json.loads((FIXTURES / "llama-bench" / "brayniac-rtx4090-snowpiercer15b-q3kl-b5606.json").read_text())
    printed = [bench[0]["gpu_info"]]
    aiperf = EXPORTS / "aiperf" / "aiperf-wellflat-a100-gptoss20b-c1.json"
    if aiperf.is_file():
        gpus = json.loads(aiperf.read_text())["telemetry_data"]["endpoints"]
        printed += [g["gpu_name"] for host in gpus.values() for g in host["gpus"].values()]
    for name in printed:
        assert normalized(name) in name_table().rows
        assert match_device(name, shipped).how == "table"


def test_llama_bench_device_lists() -> None:
    server = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert split_devices(f"{server}, {server}") == [server, server]  # llama-bench joins with ", "
    assert split_devices("NVIDIA GeForce RTX 3090/NVIDIA GeForce RTX 3090") == ["NVIDIA GeForce RTX 3090"] * 2
    assert split_devices("AMD Instinct MI250X / MI250") == ["AMD Instinct MI250X / MI250"]  # one libdrm name


def test_two_devices_count_two(shipped: Catalog) -> None:
    server = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    found = match_device(f"{server}, {server}", shipped)
    assert (found.gpu, found.count) == ("rtx-pro-6000-blackwell", 2)


@pytest.mark.parametrize(
    ("printed", "words"),
    [
        ("NVIDIA GeForce RTX 4090, NVIDIA GeForce RTX 3090", ["rtx-3090", "rtx-4090", "--gpu"]),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition MIG 1g.24gb", ["MIG", "whole card"]),
        ("Orin (nvgpu)", ["jetson-agx-orin-64gb", "jetson-orin-nano-8gb", "--gpu"]),
        ("NVIDIA H100", ["h100-sxm-80gb", "h100-pcie-80gb", "--gpu"]),
        ("Imaginary GPU 9000", ["not one gpuwise knows", "--gpu", "gpuwise catalog list"]),
        (", ", ["lists no device", "--gpu"]),
    ],
)
def test_names_gpuwise_cannot_place_are_one_line(shipped: Catalog, printed: str, words: list[str]) -> None:
    with pytest.raises(ConfigError) as err:
        match_device(printed, shipped)
    message = str(err.value)
    assert "\n" not in message and err.value.exit_code == 2
    assert all(w in message for w in words), message
