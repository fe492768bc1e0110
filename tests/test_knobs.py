"""One knob policy serves `fit` and `recommend`: the same table, the same capability check, the same words."""

from __future__ import annotations

import pytest

from gpuwise.catalog import Catalog
from gpuwise.estimate.memory.fit import changes
from gpuwise.estimate.memory.knobs import EIGHT_BIT_ADAM, free_knobs
from gpuwise.workload.jobs.job import TrainJob
from gpuwise.workload.model.resolve import resolve_model

FULL = TrainJob(method="full", precision="bf16", optimizer="adamw", batch=4, seq=2048, ckpt="none")


@pytest.mark.parametrize(("gpu", "bitsandbytes"), [("rtx-4090", True), ("apple-m4-max-128gb", False)])
def test_8_bit_adam_is_offered_only_where_bitsandbytes_runs(gpu: str, bitsandbytes: bool, shipped: Catalog) -> None:
    """bitsandbytes has CUDA builds (and ROCm for some cards) but none for Apple's Metal (catalog software stack)."""
    arch, card = resolve_model("llama-3.2-1b"), shipped.gpu(gpu)
    fit_flags = {c.flags for c in changes(arch, FULL, card)}
    free = {k.flag for k in free_knobs(arch, TrainJob(), FULL, card)}
    assert (EIGHT_BIT_ADAM.flag in fit_flags) is bitsandbytes
    assert (EIGHT_BIT_ADAM.flag in free) is bitsandbytes


def test_fit_and_recommend_describe_a_knob_in_the_same_words(shipped: Catalog) -> None:
    arch, card = resolve_model("llama-3.2-1b"), shipped.gpu("rtx-4090")
    fit_rows = {c.flags: (c.description, c.tradeoff) for c in changes(arch, FULL, card)}
    for knob in free_knobs(arch, TrainJob(), FULL, card):
        if knob.flag in fit_rows:
            assert fit_rows[knob.flag] == (knob.what, knob.cost)


def test_recommend_keeps_what_the_user_set(shipped: Catalog) -> None:
    arch, card = resolve_model("llama-3.2-1b"), shipped.gpu("rtx-4090")
    mine = TrainJob(method="full", precision="bf16", optimizer="adamw", batch=4, seq=2048, ckpt="none")
    assert {k.free for k in free_knobs(arch, mine, mine, card)}.isdisjoint({"ckpt", "optimizer", "batch"})
    left_free = TrainJob(method="full")
    assert {"ckpt", "optimizer"} <= {k.free for k in free_knobs(arch, left_free, FULL, card)}
