"""What a job needs of the card and its software stack: the one compatibility table.

Each row maps a job setting to a catalog feature -- the same predicates ``gpuwise catalog list --feature`` filters
by (:data:`gpuwise.catalog.FEATURES`). ``estimate`` reports every unmet row as a warning and still answers;
``recommend`` rejects a card for an unmet *hard* row (the job cannot run there as asked) and only notes a soft one
(the framework falls back, e.g. SDPA instead of FlashAttention-2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpuwise import runtimes
from gpuwise.catalog import FEATURES, GPU
from gpuwise.runtimes.schema import EngineProfile
from gpuwise.workload.jobs.hpc import HpcJob
from gpuwise.workload.jobs.image import ImageJob
from gpuwise.workload.jobs.job import InferJob, Job, TrainJob


@dataclass(frozen=True)
class Requirement:
    feature: str  # a key of gpuwise.catalog.FEATURES
    hard: bool  # without it the job does not run as asked (a recommender rejection); else it falls back
    code: str  # the rejection code: "feature" (the chip) or "stack" (its software)
    message: str  # what is missing and what to do, with {gpu} and {stack} to fill in


_TRAIN_ROWS: tuple[tuple[Callable[[TrainJob], bool], Requirement], ...] = (
    (lambda j: j.precision in ("bf16", "pure-bf16"),
     Requirement("bf16", True, "feature", "{gpu} has no BF16 tensor math; use --precision fp16")),
    (lambda j: j.precision == "fp8",
     Requirement("fp8", True, "feature", "{gpu} has no FP8 tensor cores; --precision fp8 needs Ada, Hopper or newer")),
    (lambda j: j.method == "qlora",
     Requirement("bitsandbytes", True, "stack", "QLoRA needs bitsandbytes, which has no {stack} build for {gpu}")),
    (lambda j: j.optimizer in ("adamw-8bit", "paged-adamw-8bit", "paged-adamw"),
     Requirement("bitsandbytes", True, "stack",
                 "8-bit and paged optimizers need bitsandbytes, which has no {stack} build for {gpu}")),
)
_INFER_ROWS: tuple[tuple[Callable[[InferJob], bool], Requirement], ...] = (
    (lambda j: j.weights in ("fp8", "fp8-block"),
     Requirement("fp8", False, "feature", "{gpu} has no FP8 tensor cores (its datasheet lists no FP8 rate; FP8 "
                                          "arrives with Ada and Hopper): the engine runs FP8 weights through a "
                                          "weight-only kernel at the 16-bit rate")),
    (lambda j: j.weights == "nvfp4",
     Requirement("nvfp4", False, "feature", "{gpu} has no NVFP4 tensor cores (NVFP4 is NVIDIA's Blackwell format; "
                                            "AMD's CDNA 4 runs the OCP MX formats): the engine dequantizes these "
                                            "weights to 16-bit, the matmuls run at the 16-bit rate")),
    (lambda j: j.weights == "mxfp4",
     Requirement("fp4", False, "feature", "{gpu} has no FP4 tensor cores (its datasheet lists no FP4 rate; FP4 "
                                          "arrives with Blackwell): the engine dequantizes these weights to 16-bit "
                                          "in a weight-only kernel -- the memory saving holds, the matmuls run at "
                                          "the 16-bit rate")),
)
_FLASH = Requirement("flash-attention-2", False, "stack",
                     "FlashAttention-2 does not support {gpu}; PyTorch SDPA (memory-efficient) is the fallback")


def requirements(job: Job | ImageJob | HpcJob, engine: EngineProfile | None = None) -> tuple[Requirement, ...]:
    """Every feature ``job`` relies on, in table order (an image pipeline: none -- diffusers runs on PyTorch's
    CUDA, ROCm and MPS backends, and fp8/nf4 weights are only stored so). ``engine``: the plan's engine profile; a
    job not yet resolved (recommend's search, before it has a plan) names its engine's shipped profile."""
    if isinstance(job, (ImageJob, HpcJob)):
        return ()  # an HPC job's needs are its profile's (ports, FP64): estimate/hpc/estimate.py, recommend/engine.py
    if isinstance(job, TrainJob):
        needed = [r for applies, r in _TRAIN_ROWS if applies(job)]
        own_attention = False
    else:
        engine = engine if engine is not None else runtimes.engine(job.engine)
        needs = [Requirement(engine.needs.feature, True, "stack", engine.needs.message)] if engine.needs else []
        needed = needs + [r for applies, r in _INFER_ROWS if applies(job)]
        own_attention = engine.own_attention.value
    # FlashAttention-2 is transformers' kernel (attn_implementation); serving engines and llama.cpp bring their own
    return (*needed, _FLASH) if job.flash_attn and not own_attention else tuple(needed)


def unmet(job: Job | ImageJob | HpcJob, gpu: GPU, engine: EngineProfile | None = None) -> tuple[Requirement, ...]:
    """The requirements ``gpu`` (its chip and its software stack as the catalog records them) does not meet."""
    return tuple(r for r in requirements(job, engine) if not FEATURES[r.feature](gpu))


def describe(requirement: Requirement, gpu: GPU) -> str:
    return requirement.message.format(gpu=gpu.id, stack=gpu.software.stack)
