"""Speed of inference: the prefill of a batch, one decode step, and what a replica's engine adds (CUDA graphs,
speculative decoding, tensor- and expert-parallel communication).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gpuwise.catalog import GPU, Catalog
from gpuwise.estimate import constants as C
from gpuwise.estimate.plan import InferPlan, resolve
from gpuwise.estimate.roofline import Machine, Op, PhaseTime, machine, phase_time
from gpuwise.estimate.speed.breakdown import top_ops
from gpuwise.estimate.speed.convolutions import conv_dtype, conv_ops
from gpuwise.estimate.speed.eager import host_seconds
from gpuwise.estimate.speed.expert_offload import decode_host_s, prefill_copy_s
from gpuwise.estimate.speed.operators import Pass, forward_ops
from gpuwise.estimate.speed.parallel import (
    GPUS_PER_NODE,
    all_reduce_s,
    all_to_all_s,
    links,
)
from gpuwise.runtimes.bench_tools import LLAMA_BENCH
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.resolve import resolve_model


@dataclass(frozen=True)
class InferPerf:
    bound: str
    top_ops: tuple[tuple[str, float], ...]
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    decode_tokens_per_s: float | None = None
    output_tokens_per_s: float | None = None
    e2e_latency_ms: float | None = None
    samples_per_s: float | None = None
    assumptions: tuple[str, ...] = field(default_factory=tuple)
    replicas: int = 1  # --count / --tp copies, each serving the job's batch: the figures above are one replica's
    bound_why: str = ""  # why the step is bound as it is, when that is not the roofline's own answer


def _infer_pass(plan: InferPlan, job: InferJob, *, query: int, context: float, logits: int = 1) -> Pass:
    """One forward of the replica running ``job`` (the plan's job or a copy at another batch); ``logits`` positions
    per sequence reach the LM head (a verifying step scores every drafted token)."""
    w = plan.stored
    return Pass(batch=job.local_batch, query=query, context=context, act_bytes=plan.act_bytes,
                weight_bytes=w.dense_bytes_per_weight, kv_bytes=plan.kv_bytes, tp=job.tp,
                flash=job.flash_attn, logits_tokens=job.local_batch * logits,
                absorb_mla=plan.engine.absorbs_mla.value, expert_bytes=w.expert_bytes_per_weight, ep=job.ep,
                dp=job.attention_dp, moe_call_s=_moe_call_s(plan),
                act_quant=job.weights != "fp32" and plan.matmul_dtype in ("fp8", "int8", "fp4"))


def _moe_call_s(plan: InferPlan) -> float:
    call = plan.engine.kernels.moe_call_s
    return call.value if call is not None else 0.0


def _dequantize(plan: InferPlan, job: InferJob) -> list[Op]:
    """Batched GEMMs on AWQ/GPTQ weights unpack them to fp16 first (AutoAWQ's GEMM path above its batch
    threshold): read the packed weights, write and read fp16 copies -- unless the engine's kernels dequantize inside
    the GEMM on this card (its profile's ``int4_fused_from``: vLLM's and SGLang's Marlin from compute capability 8.0).
    llama.cpp's MMQ kernels (ggml-cuda/mmq.cu) multiply the quantized GGUF blocks directly, so GGUF prefill pays no
    such pass."""
    if job.weights not in ("awq-int4", "gptq-int4", "int4"):
        return []
    fused = plan.engine.kernels.int4_fused_from
    capability = plan.gpu.compute_capability if plan.gpu.vendor == "nvidia" else None
    if fused is not None and capability is not None and float(capability) >= fused.value:
        return []
    w, arch = plan.stored, plan.arch
    quantized = w.quantized / job.tp
    return [Op("dequantize", "memory", 0.0, quantized * (w.bits / 8 * w.scale + 2 + 2), 7 * arch.layers)]


def _tp_comm_s(plan: InferPlan, job: InferJob, tokens: int, catalog: Catalog) -> float:
    """Per layer under TP: an all-reduce after attention and one after a dense MLP; under --ep a dispatch and a
    combine all-to-all per MoE layer instead of its all-reduce, each GPU sending the top-k copies of its own tokens'
    hidden states (``tokens`` is the replica's, split over the attention groups)."""
    if job.replica_gpus <= 1:
        return 0.0
    arch, gpu = plan.arch, plan.gpu
    nodes = max(job.nodes, math.ceil(job.replica_gpus / GPUS_PER_NODE))  # a replica larger than a node spans nodes
    path = links(gpu, catalog, network=job.network, nodes=nodes, slot_link=job.slot_link)
    size = tokens / job.attention_dp * arch.hidden * plan.act_bytes
    moe_layers = sum(b.count for b in arch.blocks if b.ffn.experts) if job.ep > 1 else 0
    seconds = 0.0
    if job.ep > 1:
        local = size * max(arch.experts_per_token, 1)
        group = path.for_group(job.ep, spans_nodes=path.leaves_node(job.ep, nodes))
        seconds += 2 * moe_layers * all_to_all_s(local, job.ep, group)
    if job.tp > 1:
        ring = path.for_group(job.tp, spans_nodes=path.leaves_node(job.tp, nodes))
        seconds += (2 * arch.layers - moe_layers) * all_reduce_s(size, job.tp, ring)
    return seconds


def infer_perf(plan: InferPlan, catalog: Catalog, *, backend_scaled: bool = True) -> InferPerf:
    arch, job, gpu = plan.arch, plan.job, plan.gpu
    m = plan.machine
    if arch.kind == "cnn":
        m = machine(gpu, conv_dtype(m.dtype, gpu), calibration=plan.calibration)

        images = phase_time(conv_ops(arch.config, batch=job.batch, act_bytes=2, train=False, image=job.image_size), m)
        return InferPerf(bound=images.bound, top_ops=top_ops(images.by_op, images.seconds),
                         samples_per_s=job.batch / images.seconds, assumptions=_infer_assumptions(m))
    causal = arch.kind == "decoder"
    prefill = _prefill_phase(plan, catalog, m, job, query=job.input_len,
                             context=job.input_len / 2 if causal else job.input_len)
    prefill_s = prefill.seconds + _tp_comm_s(plan, job, job.batch * job.input_len, catalog)
    server_s = plan.engine.server_overhead_s  # a served request's HTTP, tokenizer and streaming, outside the GPU
    if not arch.decoder_layers:  # encoders: one forward pass per batch
        return InferPerf(bound=prefill.bound, top_ops=top_ops(prefill.by_op, prefill.seconds),
                         samples_per_s=job.batch / prefill_s, assumptions=_infer_assumptions(m))
    average_context = job.input_len + job.output_len / 2  # a sliding-window layer reads at most its window
    decode = phase_time(forward_ops(arch, _infer_pass(plan, job, query=1, context=average_context)), m)
    factor = decode_factor(plan, catalog) if backend_scaled and plan.calibration is None else 1.0
    tpot = _decode_s(plan, catalog, m, batch=job.batch, context=average_context, factor=factor)
    e2e = server_s + prefill_s + max(job.output_len - 1, 0) * tpot
    scaled = (f"{plan.engine.name} decode on {gpu.software.stack} scaled by {factor:.2f}, its published measurement "
              "against the model (estimate/speed/inference.py)",) if factor != 1.0 else ()
    host = _host_s(plan, job.local_batch)
    notes = _host_note(plan, host, decode.seconds) + ((
        f"TTFT includes {server_s * 1e3:,.1f} ms of {plan.engine.name}'s server per request (HTTP, tokenizer, "
        "streaming; a fitted global parameter, gpuwise/fitted/parameters.yaml)",) if server_s else ())
    cpu_experts = decode_host_s(plan, job.batch)
    if cpu_experts > decode.seconds:  # --n-cpu-moe: the host's memory bounds the step
        notes = (f"host RAM-bound: the CPU's expert matmuls take {cpu_experts * 1e3:,.1f} ms of each decode step, "
                 f"the GPU's share {decode.seconds * 1e3:,.1f} ms", *notes)
    return InferPerf(
        bound="host-memory" if cpu_experts > decode.seconds else "host" if host >= decode.seconds else decode.bound,
        top_ops=top_ops(decode.by_op, decode.seconds),
        ttft_ms=(server_s + prefill_s) * 1e3,
        tpot_ms=tpot * 1e3, decode_tokens_per_s=job.batch / tpot,
        output_tokens_per_s=job.batch * job.output_len / e2e if job.output_len else None,
        e2e_latency_ms=e2e * 1e3, assumptions=_infer_assumptions(m) + scaled + notes,
        bound_why=notes[0] if notes and max(host, cpu_experts) >= decode.seconds else "",
    )


def _host_note(plan: InferPlan, host_s: float, gpu_s: float) -> tuple[str, ...]:
    cost = plan.engine.launch_cost_s
    if not host_s or cost is None:
        return ()
    longer = "longer than" if host_s >= gpu_s else "under"
    return (f"{plan.engine.name} runs eager: the host dispatches {host_s / cost.value:,.0f} operators per forward at "
            f"{cost.value * 1e6:.0f} us each ({host_s * 1e3:,.1f} ms, {longer} the GPU's {gpu_s * 1e3:,.1f} ms; "
            "runtimes/engines.py; --compile removes it)",)


def decode_step_s(plan: InferPlan, catalog: Catalog, *, batch: int, context: float) -> float:
    """One decode step of ``batch`` sequences at ``context`` tokens (the serving simulator's clock)."""
    return _decode_s(plan, catalog, plan.machine, batch=batch, context=context)


def _decode_s(plan: InferPlan, catalog: Catalog, m: Machine, *, batch: int, context: float,
              factor: float = 1.0) -> float:
    """Seconds per token of each sequence in a decode step of ``batch`` sequences: the step over the tokens each
    gains (``job.tokens_per_step``). With --spec-tokens K the step is one verifying forward of K + 1 tokens per
    sequence plus K passes of the draft head (one decoder layer and the LM head, as EAGLE and DeepSeek's MTP
    module are). The step replays the engine's CUDA graph of the next captured batch size (the engine profile's
    GraphCapture, runtimes/rules.py); a batch the engine does not capture launches each kernel from Python, at
    least EAGER_OVERHEAD apiece."""
    arch, job = plan.arch, plan.job
    query = job.spec_tokens + 1
    local = -(-batch // job.attention_dp)
    sizes = plan.captured_sizes(query)
    graphed = plan.graph_batch(local, query)
    shaped = job.model_copy(update={"batch": (graphed or local) * job.attention_dp})
    ops = forward_ops(arch, _infer_pass(plan, shaped, query=query, context=context, logits=query))
    if job.spec_tokens:
        ops += forward_ops(arch, _infer_pass(plan, shaped, query=1, context=context), layers=1) * job.spec_tokens
    step = max(phase_time(ops, m).seconds / factor, _host_s(plan, local * query) * (1 + job.spec_tokens))
    if sizes is not None and graphed is None:
        step = max(step, sum(op.count for op in ops) * C.EAGER_OVERHEAD.value)
    step += _tp_comm_s(plan, shaped, shaped.batch * query, catalog)
    step += decode_host_s(plan, local * query)  # --n-cpu-moe: the CPU runs those layers' experts, the GPU waits
    return step / job.tokens_per_step


def prefill_s(plan: InferPlan, catalog: Catalog, *, tokens: int) -> float:
    """Prefill of ``tokens`` prompt tokens: whole prompts of the job's input length batched together, and what is
    left as one chunk of a prompt (chunked prefill), its queries attending to about half a prompt of keys."""
    job, m = plan.job, plan.machine
    whole, rest = divmod(max(tokens, 1), job.input_len)
    seconds = 0.0
    for batch, query in ((whole, job.input_len), (1 if rest else 0, rest)):
        if not batch:
            continue
        shaped = job.model_copy(update={"batch": batch})
        seconds += _prefill_phase(plan, catalog, m, shaped, query=query, context=job.input_len / 2).seconds
        seconds += _tp_comm_s(plan, shaped, batch * query, catalog)
    return seconds


def prefill_attention_pair_s(plan: InferPlan, catalog: Catalog) -> float:
    """Seconds one more key adds to each query of a prefill, per (query, key) pair: a chunk of the planned prompt's
    tokens (at most 2,048) attending to twice the planned keys less attending to them, over the added pairs. Zero
    where the chunk is bound by reading the weights, not by its attention (the roofline's max hides the keys)."""
    job = plan.job.model_copy(update={"batch": 1})
    query, keys = min(max(job.input_len, 1), 2048), max(job.input_len / 2, 1.0)
    near = _prefill_phase(plan, catalog, plan.machine, job, query=query, context=keys).seconds
    far = _prefill_phase(plan, catalog, plan.machine, job, query=query, context=2 * keys).seconds
    return max(far - near, 0.0) / (query * keys)


def _prefill_phase(plan: InferPlan, catalog: Catalog, m: Machine, job: InferJob, *, query: int,
                   context: float) -> PhaseTime:
    """A prefill of ``job.batch`` prompts of ``query`` tokens. An engine that runs prompts in micro-batches of a fixed
    size (llama.cpp's n_ubatch, its profile's micro_batch_tokens) runs that many tokens per forward: each one reads
    the weights again, and a routed expert sees only its share of the micro-batch (512 tokens, top-4 of 32 experts:
    64 rows per expert GEMM). Each forward is at least the host's dispatch of its operators (eager engines)."""
    tokens = job.batch * query
    micro = plan.engine.micro_batch_tokens.value if plan.engine.micro_batch_tokens else tokens
    if tokens <= micro:
        shaped, forwards = job, 1
    else:
        shaped, forwards = job.model_copy(update={"batch": 1}), math.ceil(tokens / micro)
        query = micro
    one = phase_time(forward_ops(plan.arch, _infer_pass(plan, shaped, query=query, context=context))
                     + _dequantize(plan, shaped), m)
    seconds = max(one.seconds, _host_s(plan, min(tokens, micro))) + prefill_copy_s(plan, catalog, min(tokens, micro))
    return PhaseTime(forwards * seconds, forwards * one.compute_s, forwards * one.memory_s,
                     {k: forwards * v for k, v in one.by_op.items()})


def _host_s(plan: InferPlan, tokens: int) -> float:
    """The host's time to dispatch one forward of ``tokens`` tokens, for an eager engine (transformers): the floor of a
    step. A compiled model (--compile) replays CUDA graphs instead."""
    if plan.job.compile:
        return 0.0
    return host_seconds(plan.engine, plan.arch, sixteen_bit=plan.act_bytes == 2, tokens=tokens)


def _infer_assumptions(m: Machine) -> tuple[str, ...]:
    return (
        f"matmuls in {m.dtype} at {m.gemm_efficiency:.0%} of the {m.peak_flops / 1e12:,.0f} TFLOPS dense peak; "
        f"memory traffic at {m.memory_bytes_per_s / 1e9:,.0f} GB/s",
        f"each kernel costs at least {m.kernel_floor_s * 1e6:.0f} us (launch/tail)",
    )


# ---------------------------------------------------------------- an engine's decode off CUDA
REFERENCE_MODEL, REFERENCE_QUANT = "llama-2-7b", "gguf-q4_k_m"  # llama 7B Q4_0 maps to q4_k_m (about 7% more bytes)


def decode_factor(plan: InferPlan, catalog: Catalog) -> float:
    """Measured / modelled decode speed of the engine on the card's stack, where its profile says a published
    reference applies (llama.cpp's llama-bench runs on ROCm, SYCL, Metal); 1.0 elsewhere."""
    gpu = plan.gpu
    if not plan.engine.decode_scaled_off_cuda.value or gpu.segment == "datacenter":
        return 1.0
    reference = C.LLAMACPP_DECODE_REFERENCE.get(gpu.software.stack)
    if reference is None or reference[0] not in catalog.gpus:
        return 1.0
    card = catalog.gpus[reference[0]]
    key = (gpu.software.stack, card)  # the reference card's record: an override of it is a new reference
    if key not in _FACTORS:
        _FACTORS[key] = _factor(card, reference[1].value, catalog)
    return _FACTORS[key]


_FACTORS: dict[tuple[str, GPU], float] = {}  # one entry per stack and version of its reference card's record


def _factor(card: GPU, measured_tokens_per_s: float, catalog: Catalog) -> float:
    # the reference runs are llama-bench's tg128: its engine, one stream, 128 generated tokens
    job = InferJob(engine=LLAMA_BENCH.engine.value, quant=REFERENCE_QUANT, batch=1, input_len=1, output_len=128)
    plan = resolve(resolve_model(REFERENCE_MODEL), job, card)
    assert isinstance(plan, InferPlan)
    modelled = infer_perf(plan, catalog, backend_scaled=False)
    assert modelled.decode_tokens_per_s
    return measured_tokens_per_s / modelled.decode_tokens_per_s
