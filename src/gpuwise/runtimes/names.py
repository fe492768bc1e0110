"""The runtimes' names: as types for the job schema (``--engine``, ``--framework``, ``--sharding`` are typed
Literals, so the CLI's help and the API's schema list them; tests/test_runtimes.py keeps each equal to its registry),
and every name the registries hold (:func:`registered`: the words tests/test_structure.py finds compared nowhere
outside this package).
"""

from __future__ import annotations

from typing import Literal

Engine = Literal["vllm", "sglang", "trtllm", "lmdeploy", "hf", "llamacpp", "exllamav2"]
"""The serving engines (runtimes/engines.py ENGINES holds what each does)."""
ImageEngine = Literal["diffusers", "comfyui"]
"""The image-pipeline runtimes (runtimes/engines.py IMAGE_ENGINES)."""
Framework = Literal["hf", "torchtune", "unsloth", "axolotl", "llama-factory", "deepspeed", "torchtitan", "megatron"]
"""The training frameworks (runtimes/frameworks.py FRAMEWORKS)."""
Sharding = Literal["ddp", "deepspeed", "fsdp", "fsdp2", "megatron"]
"""The data-parallel runtimes (runtimes/sharding.py SHARDERS holds what each keeps)."""
ServingEngine = Literal["vllm", "sglang", "trtllm", "lmdeploy", "llamacpp"]
"""The engines a served benchmark's run is predicted on (``calibrate --engine``): those with a serving load."""


def registered() -> frozenset[str]:
    """Every runtime's and tool's name the registries hold: engines, image runtimes, frameworks, sharding runtimes,
    the serving and fine-tuning launch tools, and the benchmark tools whose exports gpuwise reads."""
    from gpuwise.runtimes.bench_tools import BENCH_TOOLS
    from gpuwise.runtimes.engines import ENGINES, IMAGE_ENGINES
    from gpuwise.runtimes.finetune_launch import TRAINING_LAUNCHERS
    from gpuwise.runtimes.frameworks import FRAMEWORKS
    from gpuwise.runtimes.launch import LAUNCHES
    from gpuwise.runtimes.sharding import SHARDERS

    return frozenset({*ENGINES, *IMAGE_ENGINES, *FRAMEWORKS, *SHARDERS, *LAUNCHES, *TRAINING_LAUNCHERS,
                      *TRAINING_LAUNCHERS.values(), *BENCH_TOOLS})
