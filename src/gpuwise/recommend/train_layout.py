"""A training workload on one GPU type at one count, laid out as a tuned run would be for what the user left free:
the knobs that make it fit, the micro-batch that fills the memory, the tensor-parallel degree inside a machine, the
ZeRO stage. Pipeline parallelism is not searched: with the global batch left free a step is one micro-batch per
GPU, and a pipeline's bubble is hidden only by accumulating many (set --pp with --global-batch to try it)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from gpuwise import runtimes
from gpuwise.catalog import GPU, Catalog
from gpuwise.errors import GpuwiseError
from gpuwise.estimate.calibration import Calibration
from gpuwise.estimate.compat import describe, unmet
from gpuwise.estimate.estimate import Estimate, estimate
from gpuwise.estimate.memory.knobs import free_knobs
from gpuwise.estimate.plan import TrainPlan, tp_divides
from gpuwise.estimate.sharding import Sharding
from gpuwise.estimate.speed.bands import band
from gpuwise.estimate.speed.stacks import unmeasured_stack_note
from gpuwise.estimate.speed.training import TrainPerf
from gpuwise.flags import command_line
from gpuwise.recommend.fit import FULL_WARNING_SHARE, Fit, Rejection, fullness, too_big
from gpuwise.recommend.machines import Machines
from gpuwise.recommend.request import Workload
from gpuwise.runtimes.sharding import UNSHARDED
from gpuwise.workload.jobs.job import TrainJob
from gpuwise.workload.model.architecture import Architecture


def train(arch: Architecture, workload: Workload, gpu: GPU, catalog: Catalog, count: int,
           calibration: Calibration | None, machines: Machines) -> Fit | Rejection:
    template = workload.job
    assert isinstance(template, TrainJob)
    if template.tp > machines.gpus_per_node:
        return Rejection("count", f"a tensor-parallel group of {template.tp} spans machines of "
                                  f"{machines.gpus_per_node} GPUs; keep --tp within one machine")
    best: tuple[TrainJob, Estimate, list[str]] | Rejection | None = None
    for tp in _tp_choices(arch, template, count, machines):
        for zero in _zero_choices(template, count // (tp * template.pp)):
            job = machines.place(template.updated(tp=tp, count=count, nodes=machines.nodes, **zero))
            assert isinstance(job, TrainJob)
            laid = _laid_out(arch, template, job, gpu, catalog, calibration)
            if isinstance(laid, Rejection):
                best = best or laid
            elif not isinstance(best, tuple) or _speed(laid[1]) > _speed(best[1]):
                best = laid
    assert best is not None
    if isinstance(best, Rejection):
        return best
    job, result, notes = best
    if "tp" not in template.model_fields_set and job.tp > 1:
        notes.append(f"tensor parallel {job.tp} inside each machine (--tp was left free: the layout with the most "
                     "tokens/s of TP 1, 2, 4, 8)")
    sharding = result.plan.sharding if isinstance(result.plan, TrainPlan) else None
    if "zero" not in template.model_fields_set and job.zero == 2 and sharding is not None:
        notes.append(f"ZeRO-2 ({sharding.name}): gradients and optimizer states sharded, the 16-bit weights whole "
                     "on every GPU from forward to backward, so no gathers in backward (--zero was left free: the "
                     "faster of ZeRO-2 and ZeRO-3 that fits)")
    perf = result.perf
    assert isinstance(perf, TrainPerf)
    hours = workload.tokens / perf.tokens_per_s / 3600
    likely = band("train", "tokens_per_s", perf.tokens_per_s)
    high = workload.tokens / likely[0] / 3600 if likely else hours  # the slow end of what past cases measured
    if workload.deadline_hours is not None and high > workload.deadline_hours:
        need = math.ceil(count * high / workload.deadline_hours)
        return Rejection("deadline", f"takes up to {high:,.1f} h (expected {hours:,.1f} h) > deadline "
                                     f"{workload.deadline_hours:,.1f} h; about {need:,} GPUs at this pace per GPU, "
                                     f"or a deadline of {high:,.0f} h", high / workload.deadline_hours)
    notes += fullness(result.memory.per_gpu_bytes, result.memory.capacity_bytes)
    notes += unmeasured_stack_note(gpu, calibration, "training")
    command = command_line(job, command="estimate", head=(workload.model, "--gpu", gpu.id))
    return Fit(per_gpu_bytes=result.memory.per_gpu_bytes, job_hours=hours, job_hours_high=high,
               tokens_per_s=perf.tokens_per_s, notes=tuple(notes),
               settings=(_train_settings(_resolved(result), sharding),),
               commands=(command,))


def _tp_choices(arch: Architecture, template: TrainJob, count: int, machines: Machines) -> tuple[int, ...]:
    """The tensor-parallel degrees to try: the user's, or with --tp free those of 1, 2, 4, 8 that fit in one
    machine, divide the count with the pipeline and divide the model's heads -- for full training by a stack that
    runs tensor parallelism (torchtitan, Megatron-LM, or none named: a tuned pre-training run); adapter
    fine-tuning and the data-parallel stacks keep whole copies."""
    stack = runtimes.framework(template.framework) if template.framework else None
    runs_tp = stack.tensor_parallel.value if stack is not None else template.method == "full"
    if "tp" in template.model_fields_set or count == 1 or not runs_tp:
        return (template.tp,)
    fits = [tp for tp in (1, 2, 4, 8) if tp <= min(machines.gpus_per_node, count)
            and count % (tp * template.pp) == 0 and tp_divides(arch, tp)]
    return tuple(fits) or (template.tp,)


def _zero_choices(template: TrainJob, data_parallel: int) -> tuple[dict[str, int], ...]:
    """The ZeRO stages to try over several data-parallel GPUs when --zero was left free: the default ZeRO-3 (FSDP
    full shard) and ZeRO-2, which keeps whole weights on every GPU and so skips the gathers when they fit (ZeRO-1
    moves as much as ZeRO-2 and holds more: never better)."""
    if "zero" in template.model_fields_set or data_parallel <= 1:
        return ({},)
    return ({}, {"zero": 2})


def _hard_need(result: Estimate, gpu: GPU) -> Rejection | None:
    """What the job as resolved needs and the card lacks (a framework's recipe for this GPU count may ask for paged
    8-bit AdamW, which needs bitsandbytes): the card-level check saw only the user's flags."""
    need = next((r for r in unmet(_resolved(result), gpu) if r.hard), None)
    return Rejection(need.code, describe(need, gpu)) if need is not None else None


def _resolved(result: Estimate) -> TrainJob:
    """The job as the estimate's plan resolved it (its framework's recipe filled in)."""
    job = result.plan.job
    assert isinstance(job, TrainJob)
    return job


def _speed(result: Estimate) -> float:
    return result.perf.tokens_per_s if isinstance(result.perf, TrainPerf) else 0.0


def _laid_out(arch: Architecture, template: TrainJob, job: TrainJob, gpu: GPU, catalog: Catalog,
              calibration: Calibration | None) -> tuple[TrainJob, Estimate, list[str]] | Rejection:
    """One layout: the knobs the user left free turned on until it fits, then the micro-batch filled."""
    try:
        result = estimate(arch, job, gpu, catalog, calibration=calibration)
    except GpuwiseError as exc:  # a layout this model cannot take
        return Rejection("count", str(exc))
    missing = _hard_need(result, gpu)
    if missing is not None:
        return missing
    notes: list[str] = []
    for knob in free_knobs(arch, template, _resolved(result), gpu):
        if result.memory.fits:
            break
        # a knob the user left free, turned on cumulatively in the order that costs least (an explicit flag is kept)
        job = job.updated(**knob.changes)
        result = estimate(arch, job, gpu, catalog, calibration=calibration)
        notes.append(f"used {knob.what} ({knob.flag}; --{knob.free.replace('_', '-')} was left free): {knob.cost}")
    if not result.memory.fits:
        return too_big(result.memory)
    if "batch" not in template.model_fields_set and template.global_batch is None:
        job, result, note = _fill_memory(arch, job, result, gpu, catalog, calibration)
        notes += note
    return job, result, notes


MAX_MICRO_BATCH = 64  # doublings stop here: past it a step's tokens no longer move the GPU's efficiency
LARGE_STEP_TOKENS = 16 * 2**20  # Llama 3 (arXiv 2407.21783, sec. 3.4.1) grew its batch from 4M to 16M tokens


def _fill_memory(arch: Architecture, job: TrainJob, result: Estimate, gpu: GPU, catalog: Catalog,
                 calibration: Calibration | None) -> tuple[TrainJob, Estimate, list[str]]:
    """With --batch left free, the micro-batch a tuned run uses: doubled while the step still fits within
    FULL_WARNING_SHARE of the card and its tokens/s grows (a micro-batch of 1 leaves a large cluster waiting on
    ZeRO-3's gathers, which a larger one hides behind compute)."""
    start = job.batch
    for _ in range(MAX_MICRO_BATCH.bit_length()):
        if job.batch * 2 > MAX_MICRO_BATCH:
            break
        bigger = job.updated(batch=job.batch * 2)
        trial = estimate(arch, bigger, gpu, catalog, calibration=calibration)
        faster = (isinstance(trial.perf, TrainPerf) and isinstance(result.perf, TrainPerf)
                  and trial.perf.tokens_per_s > result.perf.tokens_per_s * 1.02)
        if trial.memory.per_gpu_bytes > FULL_WARNING_SHARE * trial.memory.capacity_bytes or not faster:
            break
        job, result = bigger, trial
    if job.batch == start:
        return job, result, []
    step_tokens = job.batch * job.seq * job.data_parallel
    note = [f"micro-batch {job.batch} per GPU (--batch was left free: the largest that keeps "
            f"{1 - FULL_WARNING_SHARE:.0%} of memory free and still speeds the step up)"]
    if step_tokens > LARGE_STEP_TOKENS:
        note.append(f"{step_tokens / 2**20:,.0f}M tokens per optimizer step over {job.data_parallel:,} data-parallel "
                    "GPUs, above the 16M Llama 3 ended its pre-training at: a larger batch may need more tokens to "
                    "reach the same loss; set --global-batch to hold it")
    return job, result, note


def _train_settings(job: TrainJob, sharding: Sharding | None) -> Mapping[str, object]:
    """The training job as it was evaluated (its plan's: the framework's recipe and the knobs recommend turned on
    included)."""
    runtime = sharding.profile.id if sharding else UNSHARDED.id
    chosen: dict[str, object] = {"method": job.method, "precision": job.precision, "optimizer": job.optimizer,
                                 "ckpt": job.ckpt, "loss": job.loss, "batch": job.batch,
                                 "zero": sharding.stage if sharding else 0, "sharding": runtime, "tp": job.tp,
                                 "pp": job.pp}
    if job.global_batch is not None:
        chosen["global_batch"] = job.global_batch
    return chosen
