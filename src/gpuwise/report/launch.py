"""The launch command of an inference estimate's engine, with exactly the settings the estimate assumed: the checkpoint
that holds the estimated weight format (the preset's own repository, a listed pre-quantized one, or the 16-bit one
with the engine's documented quantize-on-load flag), the context the request needs and the batch it was planned at.
Comment lines above the command say where each choice comes from; what cannot start is a one-line error instead."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpuwise.api import Estimate, InferJob, InferPlan
from gpuwise.api.launching import (
    GGUF_TAGS,
    LAUNCHES,
    Launch,
    Preset,
    QuantizedCheckpoint,
    engine_name,
    hub_id,
    listed_for,
    preset_of,
    quantized_checkpoint,
)
from gpuwise.errors import ConfigError

SIXTEEN_BIT = frozenset({"bf16", "fp16", "fp32"})


@dataclass(frozen=True)
class Slots:
    """The sequences the server runs at once, and why that many (the batch estimated, or planned under load)."""

    count: int
    why: str


@dataclass(frozen=True)
class Checkpoint:
    """What the engine loads: a repository id (``repo:TAG`` for a GGUF) or a path, the --quantization value it needs
    ("" for none), and the comment lines that say where it comes from."""

    model: str
    from_hub: bool
    quantization: str
    notes: tuple[str, ...]


def launch_command(result: Estimate, model: str, engine: str, served: Mapping[str, object] | None = None, *,
                   slots: Slots | None = None) -> str:
    """``vllm serve MODEL --tensor-parallel-size 2 ...`` headed by comment lines: the estimate's replica as that engine
    starts it; ``served`` adds where it listens and its data-parallel copies ({"host": ..., "port": ..., "dp": ...});
    ``slots`` overrides the sequence cap (a recommended option's planned batch)."""
    job, plan = serving_plan(result, engine)
    spec = LAUNCHES[engine]
    checkpoint = _checkpoint(result, model, engine, job)
    seqs = slots or Slots(min(job.batch, plan.max_num_seqs), f"the batch estimated (--batch {job.batch})")
    values = {**_values(plan, spec, seqs.count), "quant": checkpoint.quantization, **(served or {})}
    program = spec.hub_program if checkpoint.from_hub and spec.hub_program else spec.program
    parts = [program.format(model=shlex.quote(checkpoint.model))]
    for setting, value in values.items():
        flag = spec.flags.get(setting)
        if flag is not None and value not in (None, ""):
            parts.append(f"{flag} {value}")
    notes = (*checkpoint.notes, _limits_note(job, spec, seqs))
    return "".join(f"# {note}\n" for note in notes) + " ".join(parts)


def serving_plan(result: Estimate, engine: str) -> tuple[InferJob, InferPlan]:
    """The estimate's inference job as its plan resolved it on its card (the plan the estimate carries, not resolved
    again), after checking that ``engine`` can start it."""
    job = result.job
    if not isinstance(job, InferJob):
        raise ConfigError("--emit vllm|sglang|llamacpp prints a serving command: use --task infer")
    if engine != job.engine:
        raise ConfigError(f"--emit {engine} launches {engine}: estimate it with --engine {engine}")
    if engine not in LAUNCHES:
        raise ConfigError(f"--emit {engine[:40]} launches a serving engine: use vllm, sglang or llamacpp")
    plan = result.plan
    assert isinstance(plan, InferPlan)
    limit = result.model.max_positions
    if limit and plan.job.context > limit:
        raise ConfigError(f"--input-len {job.input_len} + --output-len {job.output_len} = {plan.job.context:,} tokens "
                          f"exceed {result.model.name}'s {limit:,} positions, which {engine_name(engine)} will not "
                          "serve past: shorten the request")
    return plan.job, plan


def _preset(model: str, result: Estimate) -> Preset | None:
    """The preset ``model`` names (its id or one of its hub ids), else the one the estimate resolved to."""
    return preset_of(model, result.model.name)


def _from_hub(model: str) -> bool:
    return "/" in model and not model.endswith((".gguf", ".json")) and not Path(model).exists()


def _checkpoint(result: Estimate, model: str, engine: str, job: InferJob) -> Checkpoint:
    """The checkpoint that holds the estimate's weight format on ``engine``, or a one-line error naming the formats
    that have one."""
    weights, spec = job.weights, LAUNCHES[engine]
    preset = _preset(model, result)
    if "gguf" in spec.loads:  # an engine that loads GGUF files only (llama.cpp)
        return _gguf(model, preset, weights)
    shipped = result.model.checkpoint.quant if result.model.checkpoint is not None else "bf16"
    if weights == shipped or (weights in SIXTEEN_BIT and shipped in SIXTEEN_BIT):
        return Checkpoint(hub_id(model), _from_hub(hub_id(model)), "", ())
    listed = quantized_checkpoint(preset.id, weights) if preset is not None else None
    if listed is not None and listed.method in spec.loads:
        return Checkpoint(listed.repo, True, spec.loads[listed.method], _listed_notes(listed, preset))
    if weights in spec.quantize_on_load and shipped in SIXTEEN_BIT:
        return _quantized_on_load(result, model, engine, job)
    raise ConfigError(_none_known(result, preset, weights, engine))


def _listed_notes(listed: QuantizedCheckpoint, preset: Preset | None) -> tuple[str, ...]:
    notes = [f"{listed.quant} weights: {listed.repo}, a published quantization of {listed.quantizes} "
             f"({listed.source}, read {listed.as_of})"]
    if preset is not None and listed.other_model(preset.hub_ids):
        kind = "the instruct model" if "instruct" in listed.quantizes.lower() else "another model"
        notes.append(f"note: it quantizes {listed.quantizes}, {kind}, not {preset.hub_ids[0]} that {preset.id} names "
                     "(no quantization of that one is listed)")
    return tuple(notes)


def _quantized_on_load(result: Estimate, model: str, engine: str, job: InferJob) -> Checkpoint:
    """The 16-bit repository quantized as the engine loads it, where its 16-bit weights fit one GPU first (vLLM's and
    SGLang's online quantization loads them at their original precision: runtimes.launch VLLM_QUANT)."""
    spec, weights = LAUNCHES[engine], job.weights
    sixteen_bit = result.model.total_params * 2 / job.tp
    usable = result.gpu.usable_memory_bytes
    gib, name = f"{sixteen_bit / 2**30:,.1f} GiB per GPU", result.model.name
    if sixteen_bit > usable:
        raise ConfigError(f"no {weights} checkpoint of {name} is listed ({_offer(name, engine)}), and "
                          f"{engine_name(engine)} quantizes to {weights} on load only after loading the 16-bit weights"
                          f" ({gib} at TP {job.tp} > {usable / 2**30:,.1f} GiB): not emitted; raise --tp, or "
                          "quantize it offline (llm-compressor) and give its path as MODEL")
    note = (f"{weights} weights: {hub_id(model)} quantized on load (--quantization {spec.quantize_on_load[weights]}, "
            f"the engine's online quantization; its 16-bit weights, {gib}, load first)")
    return Checkpoint(hub_id(model), _from_hub(hub_id(model)), spec.quantize_on_load[weights], (note,))


def _offer(name: str, engine: str) -> str:
    formats = [c.quant for c in listed_for(name) if c.method in LAUNCHES[engine].loads]
    return f"listed for it: --quant {', '.join(formats)}" if formats else "none is listed for it"


def _none_known(result: Estimate, preset: Preset | None, weights: str, engine: str) -> str:
    name = preset.id if preset is not None else result.model.name
    offer = _offer(name, engine)
    load = ", ".join(LAUNCHES[engine].quantize_on_load) or "nothing"
    return (f"no pre-quantized {weights} checkpoint of {name} is known to gpuwise (workload/model/quantized.yaml; "
            f"{offer}) and {engine_name(engine)} quantizes only {load} on load: not emitted; estimate another "
            "--quant, or quantize it yourself and give its path or hub id as MODEL")


def _gguf(model: str, preset: Preset | None, weights: str) -> Checkpoint:
    """llama.cpp loads GGUF files: the given .gguf path, a listed GGUF repository with its quant tag (-hf repo:TAG),
    or a path for the user to fill, with how to make the file."""
    if model.endswith(".gguf"):
        return Checkpoint(model, False, "", ())
    listed = quantized_checkpoint(preset.id, weights) if preset is not None else None
    if listed is not None and listed.method == "gguf":
        target = f"{listed.repo}:{listed.tag}" if listed.tag else listed.repo
        untagged = () if listed.tag else (f"-hf takes the repository's one {weights} quantization without a tag",)
        return Checkpoint(target, True, "", (*_listed_notes(listed, preset), *untagged))
    name = preset.id if preset is not None else model.rsplit("/", 1)[-1]
    tag = GGUF_TAGS.get(weights, weights.upper())
    path = f"/path/to/{name}-{tag}.gguf"
    note = (f"no {weights} GGUF repository of {name} is listed (workload/model/quantized.yaml): make one with "
            f"llama.cpp's convert_hf_to_gguf.py and llama-quantize ({tag}), and put its path in place of {path}")
    return Checkpoint(path, False, "", (note,))


def _values(plan: InferPlan, spec: Launch, slots: int) -> dict[str, object]:
    job = plan.job
    kv = spec.kv.get(job.kv_dtype, "")
    tokens = plan.max_batched_tokens
    return {"tp": job.tp if job.tp > 1 else None, "max_num_seqs": slots,
            "memory_fraction": plan.memory_fraction, "kv": kv, "kv_k": kv, "kv_v": kv,
            "context": job.context * (slots if spec.context_is_total else 1),
            # vLLM's SchedulerConfig refuses a token budget below the sequence cap
            "max_batched_tokens": max(tokens, slots) if tokens else None,
            "gpu_layers": spec.gpu_layers, "cpu_moe": job.cpu_moe or None}


def _limits_note(job: InferJob, spec: Launch, slots: Slots) -> str:
    """Why the context and the sequence cap are what they are: the request's lengths and the batch behind them."""
    context, seqs = spec.flags["context"], spec.flags["max_num_seqs"]
    request = f"the {job.input_len:,}-token prompt and {job.output_len:,} output tokens asked for"
    if spec.context_is_total:
        each = "the slot" if slots.count == 1 else f"each of the {slots.count} slots"
        return (f"{context} {job.context * slots.count} gives {each} ({seqs} {slots.count}) {job.context:,} tokens, "
                f"{request}; {seqs} {slots.count}: {slots.why}")
    return f"{context} {job.context} holds {request}; {seqs} {slots.count}: {slots.why}"
