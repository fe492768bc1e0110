"""Making a job fit: the largest micro-batch, gradient accumulation, and the changes that save the most memory.

Each change is one edit of the user's flags, re-estimated with the same memory model, so the saving
shown is what the model predicts for this model, card and job -- the seeds' "memory compression" table,
computed for this case rather than quoted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpuwise import budget
from gpuwise.catalog import GPU
from gpuwise.errors import GpuwiseError
from gpuwise.estimate.dtypes import bytes_per_element
from gpuwise.estimate.estimate import Estimate, estimate
from gpuwise.estimate.memory.knobs import CHECKPOINTING, CHUNKED_LOSS, EIGHT_BIT_ADAM, FUSED_LOSS, Knob
from gpuwise.estimate.plan import InferPlan, TrainPlan
from gpuwise.runtimes import engine_runs
from gpuwise.workload.jobs.job import InferJob, Job, TrainJob
from gpuwise.workload.model.architecture import Architecture

MAX_BATCH = 4096


@dataclass(frozen=True)
class Change:
    """One edit of the job: the flags to add, what the edit costs in quality or speed, and its effect."""

    flags: str
    description: str
    tradeoff: str
    per_gpu_bytes: float
    saving_bytes: float
    fits: bool


def _with(job: Job, **changes: Any) -> Job:
    """A validated copy of ``job`` with some flags changed (ConfigError when incoherent)."""
    changed: Job = job.updated(**changes)
    return changed


def _try(arch: Architecture, job: Job, gpu: GPU, **changes: Any) -> tuple[Job, float] | None:
    """The edited job and its per-GPU bytes, or None when the edit is not a valid job for this model."""
    try:
        edited = _with(job, **changes)
        return edited, estimate(arch, edited, gpu).memory.per_gpu_bytes
    except GpuwiseError:  # e.g. a tensor-parallel degree that does not divide the heads
        return None


def largest_batch(arch: Architecture, job: Job, gpu: GPU) -> int:
    """Largest micro-batch (train) or concurrent batch (infer) that fits; 0 when batch 1 does not."""
    def fits(batch: int) -> bool:
        return estimate(arch, _with(job, batch=batch), gpu).memory.fits

    if not fits(1):
        return 0
    low, high = 1, 2
    while high <= MAX_BATCH and fits(high):
        low, high = high, high * 2
    high = min(high, MAX_BATCH + 1)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return low


def gradient_accumulation(job: TrainJob, micro_batch: int, global_batch: int) -> int:
    """Steps to accumulate so that micro-batch x data-parallel ranks x steps >= the global batch."""
    return math.ceil(global_batch / (max(micro_batch, 1) * job.data_parallel))


def _edit(knob: Knob) -> tuple[str, str, str, dict[str, Any]]:
    return knob.flag, knob.what, knob.cost, dict(knob.changes)


def _training_edits(job: TrainJob, gpu: GPU, done: Estimate) -> list[tuple[str, str, str, dict[str, Any]]]:
    """The training edits worth trying on ``job``, whose estimate (its plan's ZeRO stage included) is ``done``."""
    edits: list[tuple[str, str, str, dict[str, Any]]] = []
    stage = done.plan.sharding.stage if isinstance(done.plan, TrainPlan) else 0
    if job.ckpt != "full":
        edits.append(_edit(CHECKPOINTING))
    flash = Knob("--flash-attn", "FlashAttention-2", "none (faster)", {"flash_attn": True})
    if not job.flash_attn and flash.runs_on(job, gpu):
        edits.append(_edit(flash))
    if job.loss == "standard":
        edits += [_edit(CHUNKED_LOSS), _edit(FUSED_LOSS)]
    if job.method == "full" and not job.optimizer_in_backward and job.global_batch is None:
        edits.append(("--optim-in-bwd", "optimizer step fused into backward (torchtune)",
                      "no gradient accumulation", {"optimizer_in_backward": True}))
    if not job.activation_offload and job.ckpt == "full":  # offload the checkpoints (torchtune, Unsloth)
        edits.append(("--cpu-activations", "saved activations in host memory (torchtune offloading)",
                      "PCIe traffic, hidden behind compute when it overlaps", {"activation_offload": True}))
    if job.optimizer == "adamw" and EIGHT_BIT_ADAM.runs_on(job, gpu):
        edits.append(_edit(EIGHT_BIT_ADAM))
    if job.method == "full":
        edits.append(("--method lora", "LoRA adapters instead of full fine-tuning", "fewer trainable parameters",
                      {"method": "lora"}))
    qlora = Knob("--method qlora", "QLoRA: 4-bit NF4 base + LoRA", "slower steps (dequantization)",
                 {"method": "qlora"})
    if job.method != "qlora" and qlora.runs_on(job, gpu):
        edits.append(_edit(qlora))
    if job.precision in ("bf16", "fp16") and job.method == "full":
        edits.append(("--precision pure-bf16", "pure bf16 weights, gradients and states",
                      "needs care (Kahan summation / stochastic rounding)", {"precision": "pure-bf16"}))
    if job.seq >= 256:
        edits.append((f"--seq {job.seq // 2}", "half the sequence length", "shorter context per sample",
                      {"seq": job.seq // 2}))
    if job.batch > 1:
        edits.append(("--batch 1", "micro-batch 1 with gradient accumulation", "lower GPU utilisation",
                      {"batch": 1}))
    if stage < 3 and job.data_parallel > 1:
        edits.append(("--zero 3", f"ZeRO-3 / FSDP full shard over {job.data_parallel} GPUs", "more communication",
                      {"zero": 3}))
    if job.count == 1 and job.method == "full":
        for n in (2, 4, 8):
            edits.append((f"--count {n} --zero 3", f"ZeRO-3 / FSDP over {n} GPUs", f"{n} GPUs",
                          {"count": n, "zero": 3}))
    if stage >= 1 and job.offload == "none":  # DeepSpeed's ZeRO-Offload (an edit its runtime refuses is dropped)
        edits.append(("--offload optimizer", "optimizer states in CPU memory", "slower steps (PCIe traffic)",
                      {"offload": "optimizer"}))
    return edits


def _smaller_than_shipped(arch: Architecture, quant: str) -> bool:
    """Whether ``quant`` stores a weight in fewer bytes than the checkpoint ships it: re-quantizing an MXFP4 release
    to Q4_K_M adds bytes and loses quality, so it is never suggested."""
    shipped = arch.checkpoint.quant if arch.checkpoint is not None else "bf16"
    return bytes_per_element(quant) < bytes_per_element(shipped)


def _inference_edits(done: Estimate) -> list[tuple[str, str, str, dict[str, Any]]]:
    """Edits the plan's engine runs: its weight formats (none larger than the checkpoint ships), its KV-cache
    formats, and tensor parallelism only where it splits a model by heads (llama.cpp and exllamav2 split layers)."""
    plan = done.plan
    assert isinstance(plan, InferPlan)
    arch, job, gpu, profile = plan.arch, plan.job, plan.gpu, plan.engine
    edits: list[tuple[str, str, str, dict[str, Any]]] = []
    layers = _fewest_cpu_moe(arch, job, gpu) if profile.expert_offload is not None and arch.experts else None
    if layers:
        edits.append((f"--n-cpu-moe {layers}", f"the first {layers} layers' routed experts in host RAM",
                      "decode bound by host RAM bandwidth; needs that much host RAM", {"cpu_moe": layers}))
    if job.weights in ("fp32", "bf16", "fp16", "fp8", "fp8-block", "int8") and _smaller_than_shipped(arch, "awq-int4"):
        edits.append(("--quant awq-int4", "4-bit AWQ weights", "small quality loss", {"quant": "awq-int4"}))
    gguf_only = not engine_runs(job.engine, "awq-int4") and engine_runs(job.engine, "gguf-q4_k_m")
    if gguf_only and job.weights != "gguf-q4_k_m" and _smaller_than_shipped(arch, "gguf-q4_k_m"):
        edits.append(("--quant gguf-q4_k_m", "4-bit GGUF (llama.cpp Q4_K_M)", "small quality loss; llama.cpp",
                      {"quant": "gguf-q4_k_m"}))
    if job.weights in ("fp32", "bf16", "fp16") and gpu.software.fp8:
        edits.append(("--quant fp8", "FP8 weights", "minimal quality loss", {"quant": "fp8"}))
    eight_bit = next((f for f in ("fp8", "q8_0") if f in profile.kv_formats.value), None)  # the engine's 8-bit KV
    if eight_bit is not None and plan.kv_bytes > 1.0625:
        edits.append((f"--kv-dtype {eight_bit}", f"8-bit KV cache ({eight_bit})", "minimal quality loss",
                      {"kv_dtype": eight_bit}))
    if job.batch > 1:
        edits.append((f"--batch {job.batch // 2}", "half the concurrent sequences", "lower throughput",
                      {"batch": job.batch // 2}))
    if job.input_len >= 256:
        edits.append((f"--input-len {job.input_len // 2}", "half the prompt length", "shorter context",
                      {"input_len": job.input_len // 2}))
    for n in (2, 4, 8):
        if n > job.tp and profile.splits_layers is None:
            edits.append((f"--tp {n} --count {max(n, job.count)}", f"tensor parallel over {n} GPUs",
                          f"{n} GPUs", {"tp": n, "count": max(n, job.count)}))
    return edits


def _fewest_cpu_moe(arch: Architecture, job: InferJob, gpu: GPU) -> int | None:
    """The fewest leading layers whose experts, kept in host RAM (llama.cpp --n-cpu-moe), let the rest fit: a
    bisection over the layer count; every layer when even that does not fit, None when nothing is to gain."""
    if job.cpu_moe >= arch.decoder_layers:
        return None
    low, high = job.cpu_moe + 1, arch.decoder_layers
    for _ in range(max(1, arch.decoder_layers).bit_length() + 1):
        if low >= high:
            break
        middle = (low + high) // 2
        tried = _try(arch, job, gpu, cpu_moe=middle)
        if tried is not None and tried[1] <= gpu.usable_memory_bytes:
            high = middle
        else:
            low = middle + 1
    return high


def changes(arch: Architecture, job: Job, gpu: GPU) -> list[Change]:
    """Single-flag edits ranked by the memory they save (largest first); edits that save nothing are dropped."""
    done = estimate(arch, job, gpu)
    base = done.memory.per_gpu_bytes
    edits = _training_edits(job, gpu, done) if isinstance(job, TrainJob) else _inference_edits(done)
    found = []
    for flags, description, tradeoff, update in edits:
        budget.checkpoint()
        tried = _try(arch, job, gpu, **update)
        if tried is None:
            continue
        saving = base - tried[1]
        if saving > 0:
            found.append(Change(flags, description, tradeoff, tried[1], saving, tried[1] <= gpu.usable_memory_bytes))
    return sorted(found, key=lambda c: (not c.fits, -c.saving_bytes))


def plan(arch: Architecture, job: Job, gpu: GPU, *, max_steps: int = 6) -> tuple[tuple[str, ...], Job | None]:
    """A combination of edits that makes the job fit: first one that keeps the method (full fine-tuning stays full
    fine-tuning) and the GPU count, else any. Returns the flags and the resulting job (None if nothing fits)."""
    for keep_method in (True, False):
        flags, planned = _greedy(arch, job, gpu, max_steps=max_steps, keep_method=keep_method)
        if planned is not None:
            return flags, planned
    return (), None


def _greedy(arch: Architecture, job: Job, gpu: GPU, *, max_steps: int,
            keep_method: bool) -> tuple[tuple[str, ...], Job | None]:
    """At each step the edit saving the most memory, preferring edits that keep the GPU count."""
    flags: list[str] = []
    current = job
    for _ in range(max_steps):
        done = estimate(arch, current, gpu)
        if done.memory.fits:
            return tuple(flags), current
        resolved = done.plan.job  # the edits read the job as resolved (its framework's recipe filled)
        edits = (_training_edits(resolved, gpu, done) if isinstance(resolved, TrainJob)
                 else _inference_edits(done))
        best: tuple[float, str, Job] | None = None
        for flag, _d, _t, update in edits:
            budget.checkpoint()
            if keep_method and ("method" in update or "count" in update or "tp" in update):
                continue
            tried = _try(arch, current, gpu, **update)
            if tried is None:
                continue
            candidate, memory = tried
            score = (memory, candidate.count != job.count)
            if best is None or (score[1], score[0]) < (best[2].count != job.count, best[0]):
                best = (memory, flag, candidate)
        if best is None:
            break
        flags = _merged(flags, best[1])
        current = best[2]
    return (tuple(flags), current) if estimate(arch, current, gpu).memory.fits else ((), None)


def _options(flags: str) -> list[tuple[str, str | None]]:
    """``"--tp 2 --count 2"`` -> [("--tp", "2"), ("--count", "2")]; a switch has no value."""
    tokens = flags.split()
    out: list[tuple[str, str | None]] = []
    for i, token in enumerate(tokens):
        if token.startswith("--"):
            value = tokens[i + 1] if i + 1 < len(tokens) and not tokens[i + 1].startswith("--") else None
            out.append((token, value))
    return out


def _merged(plan: list[str], edit: str) -> list[str]:
    """The plan with ``edit`` applied last: an option it sets again leaves the earlier edits (halving the prompt
    twice is one --input-len, not two), so the printed command names each flag once."""
    again = {option for option, _ in _options(edit)}
    out = []
    for earlier in plan:
        kept = [(o, v) for o, v in _options(earlier) if o not in again]
        if kept:
            out.append(" ".join(o if v is None else f"{o} {v}" for o, v in kept))
    return [*out, edit]


@dataclass(frozen=True)
class FitReport:
    estimate: Estimate
    largest_batch: int
    gradient_accumulation: int | None
    changes: tuple[Change, ...]
    plan: tuple[str, ...] = ()
    plan_per_gpu_bytes: float | None = None


def fit(arch: Architecture, job: Job, gpu: GPU) -> FitReport:
    result = estimate(arch, job, gpu)
    job = result.plan.job  # as resolved: an inference job's weights in the checkpoint's format unless --quant says
    biggest = largest_batch(arch, job, gpu)
    accumulation = None
    if isinstance(job, TrainJob) and job.global_batch and biggest:  # nothing fits: no accumulation to speak of
        accumulation = gradient_accumulation(job, min(biggest, job.batch), job.global_batch)
    flags, planned = ((), None) if result.memory.fits else plan(arch, job, gpu)
    planned_bytes = estimate(arch, planned, gpu).memory.per_gpu_bytes if planned is not None else None
    return FitReport(result, biggest, accumulation, tuple(changes(arch, job, gpu)), flags, planned_bytes)
