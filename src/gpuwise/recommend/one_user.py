"""One user's decode speed (--min-tokens-per-s): one copy of the model over the option's cards, tensor parallel
where the heads divide over them and the engine runs it, else split by layers (llama.cpp, exllamav2, or a pipeline
for any other engine; estimate/serving/layer_split.py)."""

from __future__ import annotations

from gpuwise import runtimes
from gpuwise.catalog import GPU, Catalog
from gpuwise.estimate.calibration import Calibration
from gpuwise.estimate.estimate import estimate
from gpuwise.estimate.plan import tp_divides
from gpuwise.estimate.serving.layer_split import SPLIT_MAX_CARDS, layer_split
from gpuwise.estimate.speed.bands import band
from gpuwise.estimate.speed.inference import InferPerf
from gpuwise.flags import command_line
from gpuwise.recommend.fit import GIB, Fit, Rejection, fullness, too_big
from gpuwise.recommend.machines import Machines
from gpuwise.recommend.request import Workload
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.architecture import Architecture


def one_user(arch: Architecture, workload: Workload, template: InferJob, gpu: GPU, catalog: Catalog, count: int,
             calibration: Calibration | None, machines: Machines) -> Fit | Rejection:
    """One stream on one copy of the model over all ``count`` cards: its decode speed at the job's context, at the
    slow end of the measured band, against --min-tokens-per-s. More cards than one copy needs serve no single user
    faster here."""
    per_machine = machines.gpus_per_node
    if count > per_machine:
        return Rejection("network", f"one copy of the model over {count} GPUs needs them in one machine; these hold "
                                    f"{per_machine} each", count / per_machine)
    splits_layers = runtimes.engine(template.engine).splits_layers  # its multi-GPU default (llama.cpp -sm layer)
    by_layers = count > 1 and (splits_layers is not None or not tp_divides(arch, count))
    if by_layers:
        return _split_by_layers(arch, workload, template, gpu, catalog, count, calibration)
    result = estimate(arch, template.updated(tp=count, count=count, batch=1), gpu, catalog, calibration=calibration)
    if not result.memory.fits:
        return too_big(result.memory, count)
    perf = result.perf
    assert isinstance(perf, InferPerf) and perf.tpot_ms
    command = command_line(result.job, command="estimate", head=(workload.model, "--task", "infer", "--gpu", gpu.id))
    return _held(workload, perf.tpot_ms) or Fit(
        per_gpu_bytes=result.memory.per_gpu_bytes, tokens_per_s=1e3 / perf.tpot_ms, tp=count,
        output_tokens_per_s=1e3 / perf.tpot_ms, settings=({"split": "tensor", "tp": count},),
        notes=tuple(fullness(result.memory.per_gpu_bytes, result.memory.capacity_bytes)), commands=(command,))


def _held(workload: Workload, tpot_ms: float) -> Rejection | None:
    """Why the speed misses the target at the slow end of the measured band, or None."""
    speed = 1e3 / tpot_ms
    likely = band("infer", "tpot_ms", tpot_ms)
    slow = 1e3 / likely[1] if likely else speed
    target = workload.min_tokens_per_s or 0.0
    if slow >= target:
        return None
    return Rejection("slo", f"{speed:,.1f} tokens/s for one user (as low as {slow:,.1f}) < {target:,.1f} needed",
                     target / max(slow, 1e-9))


def _split_by_layers(arch: Architecture, workload: Workload, template: InferJob, gpu: GPU, catalog: Catalog,
                     count: int, calibration: Calibration | None) -> Fit | Rejection:
    splits_layers = runtimes.engine(template.engine).splits_layers
    if count > SPLIT_MAX_CARDS:
        why = (f"{template.engine} splits by layers" if splits_layers is not None else
               f"{arch.name}'s {arch.heads} heads do not divide over them for tensor parallelism")
        return Rejection("count", f"{count} cards: a layer split runs on 2-{SPLIT_MAX_CARDS} and {why}")
    split = layer_split(arch, template, [gpu] * count, catalog, calibration=calibration)
    fullest = max(split.cards, key=lambda c: c.per_gpu_bytes / c.capacity_bytes)
    if not split.fits:
        return Rejection("memory", f"split by layers over {count}: {fullest.per_gpu_bytes / GIB:,.1f} GiB on the "
                                   f"fullest card, has {fullest.capacity_bytes / GIB:,.1f}",
                         fullest.per_gpu_bytes / fullest.capacity_bytes)
    how = splits_layers.value if splits_layers is not None else "pipeline parallel, one sequence"
    note = (f"split by layers over {count} cards ({', '.join(str(c.layers) for c in split.cards)} layers; {how}): "
            "one user decodes at one card's pace, the extra cards add room, not speed")
    cards = ",".join([gpu.id] * count)
    command = command_line(template.updated(tp=1, count=1, batch=1), command="estimate",
                           head=(workload.model, "--task", "infer", "--gpu", cards))
    return _held(workload, split.tpot_ms) or Fit(
        per_gpu_bytes=fullest.per_gpu_bytes, tokens_per_s=split.tokens_per_s, tp=1,
        output_tokens_per_s=split.tokens_per_s,
        settings=({"split": "layer", "layers": [c.layers for c in split.cards]},),
        notes=(note, *fullness(fullest.per_gpu_bytes, fullest.capacity_bytes)), commands=(command,))
