"""What ``--emit`` writes from: the launch-tool records by id (serving engines, fine-tuning tools, SkyPilot), each
saying its kind and what its config can express; the keys and names each tool defines at the commit cited; the
pre-quantized checkpoints a serving engine can load; and the figures of a job a launch repeats or refuses by (the hub
id a preset downloads, the micro-batches per optimizer step, the flags that would make it fit).

The report layer's launch writers (``report/emit.py``, ``launch.py``, ``finetune_launch.py``, ``skypilot.py``,
``hf_settings.py``) read these and compare no runtime's name: what a tool starts, and which data-parallel runtime its
config can shard with, are fields of its record in ``gpuwise.runtimes``. Not part of the Python API
(``gpuwise.api.__all__``).
"""

from __future__ import annotations

from collections.abc import Mapping

from gpuwise import runtimes
from gpuwise.api.catalog import load_catalog
from gpuwise.estimate.estimate import Estimate
from gpuwise.estimate.fit import gradient_accumulation
from gpuwise.estimate.fit import plan as fitting_plan
from gpuwise.runtimes.finetune_launch import (
    AXOLOTL,
    AXOLOTL_COMMIT,
    AXOLOTL_CUT_CROSS_ENTROPY,
    TORCHTUNE,
    TORCHTUNE_ATTENTION,
    TORCHTUNE_COMMIT,
    TORCHTUNE_CONFIGS,
    TORCHTUNE_LOSSES,
    TORCHTUNE_MODEL_DIR,
    TORCHTUNE_MODELS,
    TORCHTUNE_NOTE,
    TORCHTUNE_OPTIMIZERS,
    TORCHTUNE_TENSOR_PARALLEL,
    TORCHTUNE_TOKENIZER_FILES,
    TRAINING_TOOLS,
    TRANSFORMERS_OPTIMIZERS,
    Sharded,
    TrainingTool,
    training_launcher,
)
from gpuwise.runtimes.launch import LAUNCHES, Launch, ToolKind
from gpuwise.runtimes.skypilot import (
    ACCELERATORS,
    CLOUD_NAMES,
    CLOUDS,
    DEFAULT_DISK_GB,
    NOT_REGIONS,
    SKYPILOT,
    SKYPILOT_SOURCE,
    ClusterTool,
)
from gpuwise.workload.jobs.job import TrainJob
from gpuwise.workload.model.presets import Preset, hub_index, presets
from gpuwise.workload.model.quantized import GGUF_TAGS, QuantizedCheckpoint, listed_for, quantized_checkpoint

EmitTool = Launch | TrainingTool | ClusterTool

EMIT_TOOLS: Mapping[str, EmitTool] = {**LAUNCHES, **TRAINING_TOOLS, SKYPILOT.id: SKYPILOT}
"""Every tool ``--emit`` writes for, by id: the serving engines' launches, then the fine-tuning tools, then the cluster
tool that runs either; ``EMIT_TOOLS[id].kind`` says which."""


def tool_kind(tool: str) -> ToolKind:
    """Whether ``--emit tool`` starts a server, a training run or a cluster task (``tool`` one of ``EMIT_TOOLS``)."""
    return EMIT_TOOLS[tool].kind


def engine_name(engine: str) -> str:
    """The engine as its profile names it (vLLM, SGLang, llama.cpp)."""
    return runtimes.engine(engine).name


def hub_id(model: str) -> str:
    """A preset id as the hub id its engine downloads (llama-3.1-8b -> meta-llama/Llama-3.1-8B); any other name as
    given."""
    preset = presets().get(model)
    return preset.hub_ids[0] if preset is not None and preset.hub_ids else model


def preset_of(model: str, resolved: str) -> Preset | None:
    """The preset ``model`` names (its id or one of its hub ids), else the one a model resolved to as ``resolved``."""
    found = hub_index().get(model.lower()) or hub_index().get(resolved.lower())
    return presets().get(found) if found else None


def fitting_flags(result: Estimate) -> tuple[str, ...]:
    """The flags ``gpuwise fit`` adds to make an estimated job fit its card (none where no change does), searched
    from the job as the estimate's plan resolved it, not resolved again; the card as ``gpuwise fit`` without
    --catalog finds it (UnknownGPU for a card of the user's own catalog file)."""
    card = load_catalog().gpu(result.gpu.id)
    return fitting_plan(result.model, result.plan.job, card)[0]


def accumulation_steps(job: TrainJob) -> int:
    """Micro-batches per optimizer step: what --global-batch asks of the job's micro-batch and data-parallel ranks."""
    return gradient_accumulation(job, job.batch, job.global_batch) if job.global_batch else 1


__all__ = [
    "ACCELERATORS", "AXOLOTL", "AXOLOTL_COMMIT", "AXOLOTL_CUT_CROSS_ENTROPY", "CLOUDS", "CLOUD_NAMES",
    "DEFAULT_DISK_GB", "EMIT_TOOLS", "GGUF_TAGS", "LAUNCHES", "NOT_REGIONS", "SKYPILOT", "SKYPILOT_SOURCE", "TORCHTUNE",
    "TORCHTUNE_ATTENTION", "TORCHTUNE_COMMIT", "TORCHTUNE_CONFIGS", "TORCHTUNE_LOSSES", "TORCHTUNE_MODELS",
    "TORCHTUNE_MODEL_DIR", "TORCHTUNE_NOTE", "TORCHTUNE_OPTIMIZERS", "TORCHTUNE_TENSOR_PARALLEL",
    "TORCHTUNE_TOKENIZER_FILES", "TRAINING_TOOLS", "TRANSFORMERS_OPTIMIZERS", "ClusterTool", "EmitTool", "Launch",
    "Preset", "QuantizedCheckpoint", "Sharded", "ToolKind", "TrainingTool", "accumulation_steps", "engine_name",
    "fitting_flags", "hub_id", "listed_for", "preset_of", "quantized_checkpoint", "tool_kind", "training_launcher",
]
