"""Finding a GPU from what people type, and the one-line answers when that fails."""

from __future__ import annotations

import pytest

from gpuwise.catalog import Catalog
from gpuwise.catalog.lookup import NameIndex, compact_key, tokens
from gpuwise.errors import AmbiguousGPU, UnknownGPU


@pytest.mark.parametrize(
    ("typed", "gpu_id"),
    [
        ("rtx-4090", "rtx-4090"),
        ("4090", "rtx-4090"),
        ("RTX 4090", "rtx-4090"),
        ("rtx4090", "rtx-4090"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("3090", "rtx-3090"),            # the 3090 Ti is another product, not a match
        ("3090 Ti", "rtx-3090-ti"),
        ("A100 80G SXM", "a100-sxm-80gb"),
        ("a100 sxm4 80gb", "a100-sxm-80gb"),
        ("H100 SXM", "h100-sxm-80gb"),
        ("h200 nvl", "h200-nvl-141gb"),
        ("MI300X", "mi300x"),
        ("AMD Instinct MI300X", "mi300x"),
        ("L4", "l4"),
        ("l40s", "l40s"),
        ("T4", "t4"),
        ("A10", "a10"),
        ("A10G", "a10g"),
    ],
)
def test_loose_names_resolve(shipped: Catalog, typed: str, gpu_id: str) -> None:
    assert shipped.gpu(typed).id == gpu_id


@pytest.mark.parametrize(
    ("typed", "candidates"),
    [
        ("A100 80G", {"a100-pcie-80gb", "a100-sxm-80gb"}),
        ("h200", {"h200-sxm-141gb", "h200-nvl-141gb"}),
        ("h100", {"h100-pcie-80gb", "h100-sxm-80gb", "h100-nvl-94gb"}),
        ("V100", {"v100-sxm2-16gb", "v100-sxm2-32gb"}),
    ],
)
def test_ambiguous_names_list_their_candidates(shipped: Catalog, typed: str, candidates: set[str]) -> None:
    with pytest.raises(AmbiguousGPU) as err:
        shipped.gpu(typed)
    assert set(err.value.candidates) == candidates
    message = str(err.value)
    assert "\n" not in message and all(c in message for c in candidates)
    assert err.value.exit_code == 2


def test_unknown_name_suggests_the_nearest(shipped: Catalog) -> None:
    with pytest.raises(UnknownGPU) as err:
        shipped.gpu("rtx-4909")
    assert "rtx-4090" in err.value.suggestions
    assert str(err.value).startswith("unknown GPU 'rtx-4909'; did you mean")


def test_a_name_matching_only_a_variant_is_unknown_but_suggests_it(shipped: Catalog) -> None:
    # there is no plain RTX 4080 in the catalog; the 4080 SUPER is a different card (736 vs 717 GB/s)
    with pytest.raises(UnknownGPU) as err:
        shipped.gpu("4080")
    assert err.value.suggestions == ("rtx-4080-super",)


def test_mi250_is_not_the_mi250x(shipped: Catalog) -> None:
    # AMD's MI250 (104 CUs, 362 TFLOPS FP16) and MI250X (110 CUs, 383) are different products
    with pytest.raises(UnknownGPU) as err:
        shipped.gpu("MI250")
    assert err.value.suggestions == ("mi250x",)


def test_nonsense_is_unknown(shipped: Catalog) -> None:
    with pytest.raises(UnknownGPU):
        shipped.gpu("???")


def test_keys_and_tokens() -> None:
    assert compact_key("NVIDIA GeForce RTX 4090") == "rtx4090"
    assert compact_key("A100 80G") == compact_key("a100-80gb") == "a10080gb"
    assert tokens("A100 80 GB") == {"a", "100", "80", "gb"}


def test_index_on_a_tiny_catalog() -> None:
    index = NameIndex.build({"x-1": ["x-1", "Foo X1"], "x-1-ti": ["x-1-ti", "Foo X1 Ti"], "y-2": ["y-2"]})
    assert index.resolve("foo x1") == "x-1"
    assert index.resolve("X1 TI") == "x-1-ti"
    assert index.resolve("x1") == "x-1"
    with pytest.raises(UnknownGPU) as err:
        index.resolve("z-9")
    assert err.value.suggestions == ()
