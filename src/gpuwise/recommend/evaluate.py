"""How one GPU type at one count does on every workload: fits, time per job, serving capacity, or why not.

Training on several GPUs runs the workload's job over them, laid out by recommend/train_layout.py, on the
machines recommend/placement.py chose (nodes of 8 when none is given). Serving uses replicas of the
tensor-parallel degree inside one machine that carries the most requests/s on the count (or, with --disagg auto,
separate prefill and decode pools where they carry more); a replica's capacity is the closed form of
``estimate/serving/capacity.py``, the model ``serve-sim`` brackets its simulation with, with the user's
calibration where one was measured for this card; the options the ranking shows are then simulated as their
serve-sim command simulates them (recommend/simulated.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import replace

from gpuwise.catalog import GPU, Catalog
from gpuwise.errors import GpuwiseError
from gpuwise.estimate.calibration import Calibration
from gpuwise.estimate.compat import unmet
from gpuwise.estimate.plan import InferPlan, resolve, tp_divides
from gpuwise.estimate.serving.capacity import capacity, replica
from gpuwise.estimate.serving.disagg import kv_transfer_s
from gpuwise.estimate.serving.disagg_plan import PlannedSplit, plan_split
from gpuwise.estimate.serving.session_load import session_job, session_serving, session_workload
from gpuwise.recommend.batch_serving import BatchPlan, plan_batches
from gpuwise.recommend.fit import Fit, Rejection, too_big
from gpuwise.recommend.hpc import evaluate_hpc
from gpuwise.recommend.image_fit import images as _images
from gpuwise.recommend.image_fit import whole_answer_s as _slo_s
from gpuwise.recommend.machines import Machines, default_machines
from gpuwise.recommend.one_user import one_user
from gpuwise.recommend.request import Workload
from gpuwise.recommend.simulated import rate_unit, serve_command, simulate
from gpuwise.recommend.train_layout import train as train_fit
from gpuwise.workload.diffusion.pipeline import Pipeline
from gpuwise.workload.hpc.apps import HpcApp
from gpuwise.workload.jobs.hpc import HpcJob
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.architecture import Architecture

P99s = Callable[[float], dict[str, float]]  # a replica's P99s by SLO name (ms) at a rate
Served = tuple[float, float, P99s, int | None]  # bytes per GPU, planned rate, P99s at a rate, batch


REPLICAS: ContextVar[dict[tuple[object, ...], object] | None] = ContextVar("gpuwise_replicas", default=None)
"""Replicas already planned in this recommendation: every count of a card reuses its TP-1 (TP-2 ...) replica."""


def _cached(plan: Callable[[], object], key: tuple[object, ...]) -> object:
    """A replica planned once per recommendation (see REPLICAS): every count of a card reuses it."""
    cache = REPLICAS.get()
    if cache is not None and key in cache:
        return cache[key]
    outcome = plan()
    if cache is not None:
        cache[key] = outcome
    return outcome


def _replica(arch: Architecture, workload: Workload, job: InferJob, gpu: GPU, catalog: Catalog,
             calibration: Calibration | None) -> Served | Rejection:
    """(per-GPU bytes, planned requests/s, P99s at a rate, None) of one decoder replica, or why not."""
    key = ("decoder", gpu.id, arch.name, job.model_dump_json(), workload.slos, id(calibration),
           workload.turns, workload.think_time_s, workload.system_prompt_len, workload.kv_offload_gib)
    return _cached(lambda: _plan_replica(arch, workload, job, gpu, catalog, calibration), key)  # type: ignore[return-value]


def _plan_replica(arch: Architecture, workload: Workload, job: InferJob, gpu: GPU, catalog: Catalog,
                  calibration: Calibration | None) -> Served | Rejection:
    work = session_workload(workload.turns, workload.think_time_s, workload.system_prompt_len, job)
    plan = resolve(arch, session_job(arch, job, work) if work is not None else job, gpu, calibration)
    assert isinstance(plan, InferPlan)
    rep = replica(plan, catalog)
    if not rep.holds_a_sequence or (work is not None and rep.kv_capacity_tokens < work.last_context):
        return too_big(rep.memory, job.tp) if not rep.memory.fits else Rejection(
            "memory", f"no KV-cache room for one {plan.job.input_len}+{job.output_len}-token sequence at TP {job.tp}"
            + (f" (a session's last turn holds {work.last_context:,} tokens)" if work is not None else ""))
    sessions = (session_serving(plan, rep, gpu, catalog, work, kv_offload_gib=workload.kv_offload_gib)
                if work is not None else None)
    planned = (capacity(sessions.rep, slos=workload.slos, cached_share=sessions.cached_share)
               if sessions is not None else capacity(rep, slos=workload.slos))  # per turn
    if planned.rate_qps <= 0 and planned.slos:
        missed, gap = planned.slos.miss(planned.idle_p99_ms, planned.binding)
        return Rejection("slo", f"{missed} even with no other request", gap)
    turns, per_turn = (work.turns if work is not None else 1), planned.p99s_ms
    return rep.memory.per_gpu_bytes, planned.rate_qps / turns, lambda rate: per_turn(rate * turns), None


def _batch_replica(arch: Architecture, workload: Workload, job: InferJob, gpu: GPU, catalog: Catalog,
                   calibration: Calibration | None) -> Served | Rejection:
    """A model that does not generate tokens (encoder, CNN, ViT): a replica serves batches, of --batch samples or,
    left free, of the size a dynamic batcher would use (recommend/batch_serving.py). Its answer comes whole: TTFT
    and end-to-end are the same latency; a TPOT SLO bounds tokens it never generates."""
    if workload.tpot_p99_ms is not None:
        return Rejection("slo", f"--tpot-p99-ms bounds generated tokens; {arch.name} answers at once: use "
                                "--e2e-p99-ms")
    free = "batch" not in workload.job.model_fields_set
    key = ("batch", gpu.id, arch.name, job.model_dump_json(), workload.slos, free, id(calibration))
    outcome: BatchPlan | Rejection = _cached(lambda: plan_batches(  # type: ignore[assignment]
        arch, job, gpu, catalog, calibration, slo_s=_slo_s(workload), free_batch=free), key)
    if isinstance(outcome, Rejection):
        return outcome
    per_gpu, rate, p99, batch = outcome

    def p99s(at: float) -> dict[str, float]:
        whole = p99(at) * 1e3
        return {"ttft": whole, "tpot": math.nan, "e2e": whole}

    return per_gpu, rate, p99s, batch


def _serve(arch: Architecture, workload: Workload, gpu: GPU, catalog: Catalog, count: int,
           calibration: Calibration | None, machines: Machines) -> Fit | Rejection:
    template = workload.job
    assert isinstance(template, InferJob)
    serve = one_user if workload.min_tokens_per_s is not None else _serve_as
    formats = _free_formats(arch, workload, template, gpu)
    first: Rejection | None = None
    simulated_misses: list[str] = []  # formats tried first that serve-sim's simulation refused (simulated.py)
    for fmt, note in formats:
        job = machines.place(template if fmt is None else template.updated(quant=fmt))
        assert isinstance(job, InferJob)
        outcome = serve(arch, workload, job, gpu, catalog, count, calibration, machines)
        if isinstance(outcome, Fit):
            chosen = {"quant": job.for_checkpoint(arch.checkpoint).weights, "engine": job.engine, "tp": outcome.tp,
                      "kv_dtype": job.kv_dtype}
            notes = (*outcome.notes, *simulated_misses, *((note,) if note is not None else ()))
            return replace(outcome, notes=notes, settings=({**chosen, **(outcome.settings or ({},))[0]},))
        if outcome.reason.startswith("serve-sim"):
            simulated_misses.append(f"{job.for_checkpoint(arch.checkpoint).weights} weights were tried first: "
                                    f"{outcome.reason}")
            first = first if first is not None and first.reason.startswith("serve-sim") else outcome  # says most
        first = first or outcome
    assert first is not None
    return first


_FORMAT_NOTES = {
    "fp8": "served FP8 weights (--quant was left free): half the bytes of bf16, usually within about a point of its "
           "benchmark scores -- check your task",
    "nvfp4": "served NVFP4 weights (--quant was left free; native on this card): a quarter of bf16's bytes, a larger "
             "accuracy loss than FP8 -- check your task",
    "awq-int4": "served 4-bit AWQ weights (--quant was left free): about a quarter of bf16's bytes, a few points of "
                "accuracy lost on hard tasks -- check your task",
}


def _free_formats(arch: Architecture, workload: Workload, job: InferJob,
                  gpu: GPU) -> list[tuple[str | None, str | None]]:
    """The weight formats to try when the user left --quant free, the first that fits kept: FP8 where the card has
    FP8 tensor cores (its best native format: half of bf16's bytes and time, near-lossless; the same on every such
    card, so their rows compare like for like), else the checkpoint's own; then, only to fit, NVFP4 where native and
    4-bit AWQ. An explicit --quant, a checkpoint shipped quantized, or --same-quant keeps one format for all."""
    if ("quant" in job.model_fields_set or arch.checkpoint is not None or not arch.decoder_layers
            or workload.same_quant):
        return [(None, None)]
    native: list[tuple[str | None, str | None]] = []
    for fmt in ("fp8", "nvfp4", "awq-int4"):
        try:
            candidate = job.updated(quant=fmt)
        except ValueError:  # an engine that cannot run the format (llama.cpp runs GGUF only)
            continue
        if any(r.feature == fmt for r in unmet(candidate, gpu)):
            continue  # no native FP8/NVFP4 tensor cores: the saving would be memory only
        native.append((fmt, _FORMAT_NOTES[fmt]))
    first = [f for f in native if f[0] == "fp8"]
    return first + [(None, None)] + [f for f in native if f[0] != "fp8"]


def _serve_as(arch: Architecture, workload: Workload, template: InferJob, gpu: GPU, catalog: Catalog, count: int,
              calibration: Calibration | None, machines: Machines) -> Fit | Rejection:
    """``count`` GPUs serving ``template`` as replicas of one tensor-parallel degree inside a machine: of the
    degrees that hold the model, the one whose replicas carry the most requests/s on these GPUs (the best cost per
    unit of throughput at this count), not merely the smallest that fits. While the ranking checks what it shows
    (recommend/simulated.py), the degree kept is the first, in that order, that serve-sim's simulation holds."""
    fits: list[Fit] = []
    refused: list[Rejection] = []
    for tp in (1, 2, 4, 8):
        if tp > min(count, machines.gpus_per_node) or count % tp or not tp_divides(arch, tp):
            continue
        outcome = _serve_at(arch, workload, template, gpu, catalog, count, calibration, machines, tp)
        if isinstance(outcome, Rejection):
            refused.append(outcome)
        else:
            fits.append(outcome)
    while fits:
        best = _most_capacity(fits)
        checked = simulate(arch, workload, _served(template, best.tp, count), gpu, catalog, calibration, best)
        if isinstance(checked, Fit):
            return checked
        refused.insert(0, checked)  # what the simulation found says more than any closed-form refusal
        fits.remove(best)
    telling = [r for r in refused if r.code != "memory"] + refused  # an SLO miss says more than a smaller TP's size
    inside = f" inside one machine of {machines.gpus_per_node}" if machines.gpus_per_node < count else ""
    return telling[0] if telling else Rejection("memory", f"does not fit on {count} GPU(s) at any tensor-parallel "
                                                          f"degree{inside}")


def _most_capacity(fits: list[Fit]) -> Fit:
    """The fit that carries the most requests/s; a larger degree only where it carries 0.1 % more."""
    best = fits[0]
    for fit in fits[1:]:
        if (fit.qps_capacity or 0.0) > (best.qps_capacity or 0.0) * 1.001:
            best = fit
    return best


def _served(template: InferJob, tp: int, count: int) -> InferJob:
    """The job serve-sim runs for ``count`` GPUs as replicas of ``tp``: the option's reproduce command spells it."""
    job = template.updated(tp=tp, count=tp).updated(count=count)
    assert isinstance(job, InferJob)
    return job


def _serve_at(arch: Architecture, workload: Workload, template: InferJob, gpu: GPU, catalog: Catalog, count: int,
              calibration: Calibration | None, machines: Machines, tp: int) -> Fit | Rejection:
    """``count`` GPUs as replicas of ``tp`` GPUs (disaggregated where --disagg auto carries more)."""
    job = template.updated(tp=tp, count=tp)
    serve_one = _replica if arch.decoder_layers else _batch_replica
    outcome = serve_one(arch, workload, job, gpu, catalog, calibration)
    if isinstance(outcome, Rejection):
        return outcome
    per_gpu, rate, p99s, batch = outcome
    replicas = machines.replicas(count, tp)
    total = rate * replicas
    split = _disaggregated(arch, workload, job, gpu, catalog, calibration, replicas, machines)
    if split is not None and split.rate_qps > total:
        return _split_fit(workload, template, per_gpu, tp, split, total)
    binding = workload.slos.binding(p99s(rate))
    if workload.qps is not None and total < workload.qps:
        unit = rate_unit(workload)
        return Rejection("slo", f"{count} GPU(s) serve {total:,.1f} {unit} {workload.slos.within(binding)} < "
                                f"{workload.qps:,.1f} {unit} needed", workload.qps / max(total, 1e-9))
    shown = p99s(workload.qps / replicas if workload.qps is not None else rate)
    latency, e2e = shown[workload.slos.headline], shown["e2e"]
    return Fit(per_gpu_bytes=per_gpu, qps_capacity=total, tp=tp, binding_slo=binding, p99_slo=workload.slos.headline,
               p99_ms=latency if math.isfinite(latency) else None, e2e_p99_ms=e2e if math.isfinite(e2e) else None,
               output_tokens_per_s=total * template.output_len * (workload.turns or 1) if arch.decoder_layers
               else None,
               settings=({"batch": batch},) if batch is not None else (),
               commands=(serve_command(workload, _served(template, tp, count), gpu, total),) if arch.decoder_layers
               else (), closed_form=bool(arch.decoder_layers),
               notes=(f"batches {batch} requests per forward pass (--batch was left free: a dynamic batcher, "
                      "e.g. Triton's max_batch_size)",) if batch is not None and batch > 1 else ())


def _disaggregated(arch: Architecture, workload: Workload, job: InferJob, gpu: GPU, catalog: Catalog,
                   calibration: Calibration | None, replicas: int, machines: Machines) -> PlannedSplit | None:
    """With --disagg auto, ``replicas`` replicas of ``job`` split into prefill and decode pools where the engine runs
    them (its profile's ``disaggregates``) and a link carries the KV caches between them (one machine, or machines
    on a network: not separate cloud pods); None otherwise, or when no split is stable within the SLO."""
    if workload.disagg != "auto" or replicas < 2 or not arch.decoder_layers or workload.turns is not None:
        return None  # serve-sim's --disagg simulates independent requests, not sessions
    if not machines.linked:
        return None
    key = ("disagg", gpu.id, arch.name, job.model_dump_json(), workload.slos, replicas, id(calibration))

    def planned() -> PlannedSplit | None:
        plan = resolve(arch, job.updated(count=job.tp * replicas), gpu, calibration)
        assert isinstance(plan, InferPlan)
        if not plan.engine.disaggregates.value:  # the engine runs no prefill/decode split
            return None
        rep = replica(plan, catalog)
        if not rep.holds_a_sequence:
            return None
        return plan_split(rep, replicas, kv_s=kv_transfer_s(plan, catalog), slos=workload.slos)

    return _cached(planned, key)  # type: ignore[return-value]


def _split_fit(workload: Workload, job: InferJob, per_gpu: float, tp: int, split: PlannedSplit,
               aggregated_qps: float) -> Fit | Rejection:
    """An option served by separate prefill and decode pools (estimate/serving/disagg_plan.py)."""
    pools = f"{split.pools.prefill}P{split.pools.decode}D"
    total = split.rate_qps
    if workload.qps is not None and total < workload.qps:
        return Rejection("slo", f"{pools} pools serve {total:,.1f} QPS {workload.slos.within(split.binding)} < "
                                f"{workload.qps:,.1f} QPS needed", workload.qps / max(total, 1e-9))
    latency = split.p99s_ms(workload.qps if workload.qps is not None else total)[workload.slos.headline]
    note = (f"disaggregated {pools}: {split.pools.prefill} prefill and {split.pools.decode} decode replica(s) of "
            f"{tp} GPU(s), {total:,.1f} QPS where the same replicas serving prompts and decoding together sustain "
            f"{aggregated_qps:,.1f} (--disagg auto; a closed form no measured disaggregated run has checked yet; "
            f"`serve-sim --disagg {pools} --concurrency C` simulates it)")
    return Fit(per_gpu_bytes=per_gpu, qps_capacity=total, tp=tp, binding_slo=split.binding,
               p99_slo=workload.slos.headline,
               p99_ms=latency if math.isfinite(latency) else None,
               output_tokens_per_s=total * job.output_len, settings=({"disagg": pools},), notes=(note,))


def _hpc_speed(fits: list[Fit]) -> float | None:
    """The ranking's speed of HPC workloads: one app's work per second, or for several (whose units do not add) the
    jobs per hour of all of them in turn."""
    hpc = [f for f in fits if f.work_per_s is not None]
    if len(hpc) == 1:
        return hpc[0].work_per_s
    hours = sum(f.job_hours or 0.0 for f in hpc)
    return 1.0 / hours if hpc and hours > 0 else None


def evaluate(archs: dict[str, Architecture | Pipeline | HpcApp], workloads: tuple[Workload, ...], gpu: GPU,
             catalog: Catalog,
             count: int, calibration: Calibration | None = None, machines: Machines | None = None) -> Fit | Rejection:
    """Every workload on ``count`` x ``gpu`` in ``machines`` (default: nodes of 8 over InfiniBand); the first
    rejection wins, else the combined figures."""
    machines = machines or default_machines(count)
    hours, high = 0.0, 0.0
    fits: list[Fit] = []
    for workload in workloads:
        model = archs[workload.model]
        try:
            if isinstance(model, Pipeline):
                outcome = _images(model, workload, gpu, catalog, count)
            elif isinstance(workload.job, HpcJob):
                outcome = evaluate_hpc(workload.job, workload.deadline_hours, gpu, catalog, count, machines)
            else:
                assert isinstance(model, Architecture)
                run = train_fit if workload.task == "train" else _serve
                outcome = run(model, workload, gpu, catalog, count, calibration, machines)
        except GpuwiseError as exc:  # e.g. a count that does not divide into the requested TP x PP
            return Rejection("count", str(exc))
        if isinstance(outcome, Rejection):
            return outcome
        fits.append(outcome)
        hours += outcome.job_hours or 0.0
        high += outcome.job_hours_high or outcome.job_hours or 0.0
    train = [f for f in fits if f.job_hours is not None]
    # several serving workloads: the figures shown are those of the slowest, the one the machine is sized by
    serve = sorted((f for f in fits if f.qps_capacity is not None), key=lambda f: f.qps_capacity or 0.0)
    return Fit(
        per_gpu_bytes=max(f.per_gpu_bytes for f in fits), job_hours=hours if train else None,
        job_hours_high=high if train else None,
        tokens_per_s=next((f.tokens_per_s for f in train + fits if f.tokens_per_s is not None), None),
        qps_capacity=serve[0].qps_capacity if serve else None, p99_ms=serve[0].p99_ms if serve else None,
        e2e_p99_ms=serve[0].e2e_p99_ms if serve else None, busy_fraction=serve[0].busy_fraction if serve else None,
        prefill_share=serve[0].prefill_share if serve else None,
        simulated_tokens_per_s=serve[0].simulated_tokens_per_s if serve else None,
        tp=serve[0].tp if serve else max((f.tp for f in fits), default=1),
        seconds_per_image=serve[0].seconds_per_image if serve else None,
        output_tokens_per_s=sum(f.output_tokens_per_s for f in fits if f.output_tokens_per_s) or None,
        hpc_value=next((f.hpc_value for f in fits if f.hpc_value is not None), None),
        hpc_unit=next((f.hpc_unit for f in fits if f.hpc_unit is not None), None),
        work_per_s=_hpc_speed(fits),
        notes=tuple(dict.fromkeys(note for f in fits for note in f.notes)),
        settings=tuple(setting for f in fits for setting in f.settings),
        commands=tuple(command for f in fits for command in f.commands),
        workloads=tuple(fits), closed_form=any(f.closed_form for f in fits),
        binding_slo=serve[0].binding_slo if serve else None, p99_slo=serve[0].p99_slo if serve else "e2e",
    )
