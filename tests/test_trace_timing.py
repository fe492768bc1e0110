"""--trace times its step kernel by kernel (workload/trace/kernels.py, estimate/speed/traced.py): operator counts,
FLOPs and bytes worked by hand, and the timed step against training steps measured on an H200
(benchmarks/results/h200-2026-11-29/training.jsonl: real model code, random weights, synchronized timers)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwise import api
from gpuwise.workload.jobs.job import TrainJob

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch

from gpuwise.workload.trace.kernels import recorder_class

MEASURED = Path(__file__).parents[1] / "benchmarks" / "results" / "h200-2026-11-29" / "training.jsonl"


def test_a_matmul_is_one_launch_of_2mnk_flops_moving_its_three_matrices() -> None:
    a, b = torch.ones(64, 128), torch.ones(128, 256)
    recorder = recorder_class()()
    with recorder:
        a.view(128, 64).view(64, 128) @ b
    ops = recorder.traced_ops()
    assert ops["aten.mm"].flops == 2 * 64 * 128 * 256
    assert ops["aten.mm"].bytes == 4 * (64 * 128 + 128 * 256 + 64 * 256)
    assert (ops["aten.mm"].launches, ops["aten.mm"].kind) == (1, "gemm")
    assert (ops["aten.view"].dispatches, ops["aten.view"].launches, ops["aten.view"].bytes) == (2, 0, 0.0)


def test_causal_attention_counts_half_the_score_matrix() -> None:
    q = k = v = torch.ones(1, 2, 32, 16)
    flops = {}
    for causal in (False, True):
        recorder = recorder_class()()
        with recorder:
            torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        flops[causal] = sum(op.flops for op in recorder.traced_ops().values() if op.kind == "attention")
    assert flops[False] == 4 * 2 * 32 * 32 * 16  # Q K^T and P V, 2 b h q k d each
    assert flops[True] == flops[False] / 2


def test_an_nll_loss_reads_one_logit_per_row_not_the_whole_matrix() -> None:
    logits, target = torch.zeros(8, 1000), torch.zeros(8, dtype=torch.long)
    recorder = recorder_class()()
    with recorder:
        torch.nn.functional.nll_loss(logits, target)
    assert recorder.traced_ops()["aten.nll_loss_forward"].bytes < 1000  # not 8 x 1000 x 4


def test_the_timed_trace_lands_within_10_percent_of_a_measured_h200_step() -> None:
    row = next(json.loads(line) for line in MEASURED.read_text().splitlines() if '"batch": 4' in line)
    job = TrainJob(method="full", precision="bf16", optimizer="adamw", batch=row["batch"], seq=row["seq"],
                   ckpt=row["ckpt"])
    result = api.estimate(row["preset"], gpu="h200-sxm-141gb", job=job)
    timed = api.trace_time(api.trace(row["preset"], result.job), result)
    assert timed.seconds == pytest.approx(row["step_s_median"], rel=0.10)
    assert timed.gpu_s > timed.host_s  # a batch of 8,192 tokens keeps the GPU busier than the host
