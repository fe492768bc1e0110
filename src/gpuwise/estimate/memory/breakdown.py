"""What an estimate of memory holds: bytes per GPU by component, the card's capacity, and what every process adds
(the CUDA context, libraries' workspaces, NCCL buffers) -- on the cards whose runtime makes them (``for_card``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from gpuwise.catalog import GPU
from gpuwise.estimate import constants as C

CUDA_RUNTIME_PARTS = ("framework_overhead", "CUDA context, workspaces")  # the language models' key, the pipelines'
NOT_ALLOCATED = ("framework_overhead", "allocator_reserve")  # the CUDA context and the caching allocator's slack
COMPONENTS = ("weights", "master_weights", "gradients", "optimizer", "communication_buffers", "activations",
              "kv_cache", "logits", "framework_overhead", "allocator_reserve")


@dataclass(frozen=True)
class MemoryEstimate:
    """Per-GPU bytes by component; ``per_gpu_bytes`` is their sum (the peak one GPU must hold)."""

    breakdown_bytes: Mapping[str, float]
    capacity_bytes: float
    cuda_context_bytes: float
    assumptions: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    engine_reserved_bytes: float | None = None
    max_concurrency: int | None = None
    max_context: int | None = None
    kv_budget_bytes: float | None = None  # serving: what the engine's reservation leaves for the KV cache
    details: Mapping[str, float] = field(default_factory=dict)

    @property
    def per_gpu_bytes(self) -> float:
        return float(sum(self.breakdown_bytes.values()))

    @property
    def allocated_bytes(self) -> float:
        """The counterpart of torch.cuda.max_memory_allocated(): without the CUDA context, workspaces and the
        allocator's reserve."""
        return float(sum(v for k, v in self.breakdown_bytes.items() if k not in NOT_ALLOCATED))

    @property
    def reserved_bytes(self) -> float:
        """The counterpart of torch.cuda.max_memory_reserved(): allocated plus the caching allocator's slack."""
        return self.allocated_bytes + float(self.breakdown_bytes.get("allocator_reserve", 0.0))

    @property
    def fits(self) -> bool:
        return self.per_gpu_bytes <= self.capacity_bytes

    @property
    def headroom_bytes(self) -> float:
        return self.capacity_bytes - self.per_gpu_bytes


def framework_overhead(count: int, gpu: GPU) -> float:
    """The CUDA context, cuBLAS workspace and (several GPUs) NCCL buffers a process holds; none on a stack that makes
    no CUDA context (NO_CUDA_STACKS), so every figure computed from it (a KV pool, what fits) sees that too."""
    if gpu.software.stack in NO_CUDA_STACKS:
        return 0.0
    nccl = C.NCCL_BUFFERS.value if count > 1 else 0.0
    return C.CUDA_CONTEXT.value + C.CUBLAS_WORKSPACE.value + nccl


NO_CUDA_STACKS = frozenset({"metal"})
"""Stacks that make no CUDA context: Apple's Metal (PyTorch's MPS backend, llama.cpp's and MLX's Metal kernels).
ROCm's HIP makes its own context and rocBLAS workspace, of about the CUDA figures; it keeps them."""


def for_card(memory: MemoryEstimate, gpu: GPU) -> MemoryEstimate:
    """``memory`` as ``gpu``'s runtime holds it. On Metal there is no CUDA context, cuBLAS workspace or NCCL buffer:
    their part is zero (the contract's component, absent from the table) or gone (a pipeline's own row), the CUDA
    context assumption leaves, and a note says that the Metal runtime's own memory, for which no published figure
    exists, is not counted."""
    if gpu.software.stack not in NO_CUDA_STACKS:
        return memory
    parts = {k: 0.0 if k in CUDA_RUNTIME_PARTS else v for k, v in memory.breakdown_bytes.items()
             if k in COMPONENTS or k not in CUDA_RUNTIME_PARTS}  # a contract component stays, at zero
    kept = tuple(a for a in memory.assumptions if not a.startswith("CUDA context"))
    note = (f"{gpu.software.stack}: no CUDA context, cuBLAS workspace or NCCL buffers; the Metal runtime's own "
            "memory is not counted (no published figure)")
    return replace(memory, breakdown_bytes=parts, cuda_context_bytes=0.0, assumptions=(*kept, note))
