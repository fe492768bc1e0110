"""What an estimate of memory holds: bytes per GPU by component, the card's capacity, and what every process adds
(the CUDA context, libraries' workspaces, NCCL buffers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpuwise.estimate import constants as C

NOT_ALLOCATED = ("framework_overhead", "allocator_reserve")  # the CUDA context and the caching allocator's slack
COMPONENTS = ("weights", "master_weights", "gradients", "optimizer", "activations", "kv_cache", "logits",
              "framework_overhead", "allocator_reserve")


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


def framework_overhead(count: int) -> float:
    nccl = C.NCCL_BUFFERS.value if count > 1 else 0.0
    return C.CUDA_CONTEXT.value + C.CUBLAS_WORKSPACE.value + nccl
