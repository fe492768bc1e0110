"""llama.cpp's expert offload (``--n-cpu-moe N``): the routed experts of the first N MoE layers stay in host RAM.

What it costs (ggml-org/llama.cpp common/arg.cpp ``--n-cpu-moe``: "keep the Mixture of Experts (MoE) weights of the
first N layers in the CPU", a tensor-buffer override of ``blk.<i>.ffn_(up|down|gate)_exps`` onto the CPU buffer):

- memory: those experts leave the GPU and take host RAM instead;
- a decode step: the CPU runs those layers' expert matmuls itself, reading each expert the step's tokens route to
  once from host RAM, at the host's memory bandwidth, while the GPU waits (the layers run in order);
- a prompt micro-batch: at 32 tokens or more, ggml's scheduler copies the CPU-held weights to the GPU for the
  matmul (ggml-backend.cpp op offload, ggml-cuda ``offload_op``: batch >= 32), so every micro-batch moves all of
  those layers' experts over the host link once.
"""

from __future__ import annotations

from gpuwise.catalog import Catalog
from gpuwise.estimate import constants as C
from gpuwise.estimate.plan import InferPlan

OP_OFFLOAD_MIN_BATCH = 32
"""ggml-cuda's ggml_backend_cuda_device_offload_op: a CPU-held weight goes to the GPU for an op of >= 32 rows."""


def moe_layers(plan: InferPlan) -> int:
    """Layers with routed experts: the layers of one of the model's ``experts.*`` linears, over every block type
    that has it (gpt-oss counts its sliding and full-attention layers apart)."""
    experts = [x for x in plan.arch.params.linears if x.name.startswith("experts.")]
    return sum(x.layers for x in experts if x.name == experts[0].name) if experts else 0


def offloaded_layers(plan: InferPlan) -> int:
    """The MoE layers among the first --n-cpu-moe layers (llama.cpp counts layer indices; DeepSeek's first dense
    layers have no experts to keep)."""
    dense_first = max(plan.arch.decoder_layers - moe_layers(plan), 0)
    return max(0, min(plan.job.cpu_moe - dense_first, moe_layers(plan)))


def expert_bytes_per_layer(plan: InferPlan) -> float:
    layers = moe_layers(plan)
    return plan.stored.expert_bytes / layers if layers else 0.0


def host_expert_bytes(plan: InferPlan) -> float:
    """Bytes of routed experts held in host RAM (taken off the GPU)."""
    return offloaded_layers(plan) * expert_bytes_per_layer(plan)


def _experts_touched(plan: InferPlan, tokens: int) -> float:
    """Distinct experts a layer reads for ``tokens`` tokens routed top-k of E uniformly: E (1 - (1 - k/E)^tokens)."""
    experts, top = plan.arch.experts, plan.arch.experts_per_token
    if not experts or not top:
        return 0.0
    return experts * (1 - (1 - top / experts) ** max(tokens, 1))


def host_bytes_per_s(plan: InferPlan) -> float:
    """What the CPU's expert matmuls read per second: --host-bandwidth-gb-s (default a desktop's dual-channel
    DDR5-5600) at the share a CPU matrix-vector product reaches."""
    peak = (plan.job.host_bandwidth_gb_s or C.DESKTOP_HOST_BANDWIDTH_GB_S.value) * 1e9
    return peak * C.CPU_MATVEC_BANDWIDTH_SHARE.value


def decode_host_s(plan: InferPlan, tokens: int) -> float:
    """Seconds a decode step of ``tokens`` tokens spends in the CPU's expert matmuls."""
    layers = offloaded_layers(plan)
    if not layers:
        return 0.0
    per_expert = expert_bytes_per_layer(plan) / plan.arch.experts
    return layers * _experts_touched(plan, tokens) * per_expert / host_bytes_per_s(plan)


def prefill_copy_s(plan: InferPlan, catalog: Catalog, micro_batch_tokens: int) -> float:
    """Seconds one prompt micro-batch spends copying the host-held experts to the GPU (op offload), or 0 below
    ggml's op-offload batch, where the CPU computes them as in decode."""
    held = host_expert_bytes(plan)
    if not held:
        return 0.0
    if micro_batch_tokens < OP_OFFLOAD_MIN_BATCH:
        return decode_host_s(plan, micro_batch_tokens)
    link = catalog.interconnects.get(plan.gpu.native_link)
    rate = link.achieved_bytes_per_s if link is not None else host_bytes_per_s(plan)
    return held / rate


def offload_note(plan: InferPlan) -> str:
    """The assumption in words, with the host RAM it takes."""
    layers = offloaded_layers(plan)
    bandwidth = plan.job.host_bandwidth_gb_s or C.DESKTOP_HOST_BANDWIDTH_GB_S.value
    return (f"--n-cpu-moe {plan.job.cpu_moe}: the routed experts of {layers} of {moe_layers(plan)} MoE layers "
            f"({host_expert_bytes(plan) / 2**30:,.1f} GiB) stay in host RAM; the CPU runs them in decode at "
            f"{bandwidth:,.0f} GB/s x {C.CPU_MATVEC_BANDWIDTH_SHARE.value:.0%}, and each prompt micro-batch copies "
            "them to the GPU over the host link")
