"""FLOPs and bytes of every operator of a transformer forward pass, on one tensor-parallel shard, block by block.

Legend: b sequences, q query tokens per sequence (s in prefill/training, 1 in decode), c key/value tokens
attended to, h hidden, a heads, k KV heads, d head dim, i MLP width, V vocabulary, t tensor-parallel
degree, e bytes per activation, w bytes per weight. A GEMM of an (m x n) by (n x p) product costs 2mnp
FLOPs and moves its weight (n x p x w) plus input and output activations. Causal self-attention over s
tokens attends to s/2 keys on average; a decode step of a sliding-window layer reads at most its window.
Worked check: one Llama-3-8B decode step at batch 1 reads the 16 GB of bf16 weights once, so on a 3.35 TB/s H100
it cannot take less than ~4.8 ms.

Each block (workload/model/blocks.py) contributes its attention (GQA, latent MLA, or gated-DeltaNet linear attention)
and its feed-forward part (dense, or routed experts with shared ones). A routed expert's GEMM is as large as the
tokens that reach it: few tokens per expert make small GEMMs, which run far below peak (the size curve of
roofline.py applies per expert, not per layer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuwise.estimate import constants as C
from gpuwise.estimate.roofline import Op
from gpuwise.estimate.speed.stacks import elementwise_op, loss_op
from gpuwise.runtimes.schema import Fusions
from gpuwise.workload.model.architecture import Architecture
from gpuwise.workload.model.blocks import Attention, Block, FeedForward


@dataclass(frozen=True)
class Pass:
    """The shape of one forward pass: what runs, on how many tokens, in which dtypes."""

    batch: int
    query: int  # tokens per sequence computed now
    context: float  # keys/values attended to per query token (s/2 for causal prefill)
    act_bytes: int
    weight_bytes: float  # per linear weight (quantized formats: bits / 8)
    kv_bytes: float  # per cached K/V element
    tp: int = 1
    flash: bool = True
    logits_tokens: int | None = None  # positions whose logits are computed (None: all)
    loss: bool = False  # cross-entropy over the logits (training)
    lm_head: bool = True
    absorb_mla: bool = True  # decode MLA on its latent (serving engines) rather than re-expanding every key
    expert_bytes: float | None = None  # per routed-expert weight, when the format covers the experts only
    ep: int = 1  # expert-parallel group: the routed experts are spread over ep GPUs
    dp: int = 1  # attention data-parallel groups: ``batch`` is one group's share; the MoE sees every group's tokens
    eager_modules: bool = False  # norms, rotary and gating run as transformers' Python modules, op by op (training
    # without torch.compile): stacks.py ``_eager_parts``
    fusions: Fusions | None = None  # the operators the stack runs as fused kernels (training: stacks.stack_fusions)
    stream_bytes: int | None = None  # the residual stream's element size when it differs (fp32 under autocast)
    moe_call_s: float = 0.0  # the engine's measured floor of one MoE layer's grouped-GEMM call (its profile)
    act_quant: bool = False  # W8A8/W4A4 matmuls: each linear first quantizes its input in a kernel of its own

    @property
    def tokens(self) -> int:
        return self.batch * self.query

    @property
    def decode(self) -> bool:
        return self.query == 1


def _gemm(name: str, tokens: int, d_in: float, d_out: float, p: Pass, weight_bytes: float, count: int) -> Op:
    flops = 2.0 * tokens * d_in * d_out
    moved = d_in * d_out * weight_bytes + tokens * (d_in + d_out) * p.act_bytes
    return Op(name, "gemm", flops * count, moved * count, count)


MMA_TILE_ROWS = 16  # rows of the smallest tensor-core tile a grouped GEMM pads each expert's tokens to (PTX ISA
# mma.sync .m16n8k16; vLLM's fused_moe configs use BLOCK_SIZE_M >= 16)


def tile_row_fill(tokens_per_expert: float) -> float:
    """Share of the padded tile rows that hold tokens: 1 token per expert uses 1 of 16, 24 use 24 of 32."""
    if tokens_per_expert >= 8 * MMA_TILE_ROWS:
        return 1.0
    return tokens_per_expert / (MMA_TILE_ROWS * max(1, math.ceil(tokens_per_expert / MMA_TILE_ROWS)))


def experts_touched(ffn: FeedForward | Architecture, tokens: int) -> float:
    """Distinct experts a layer runs for ``tokens`` tokens under uniform top-k routing: E(1 - (1 - k/E)^T)."""
    experts, k = (ffn.experts, ffn.top_k) if isinstance(ffn, FeedForward) else (ffn.experts, ffn.experts_per_token)
    if not experts:
        return 1.0
    return experts * (1.0 - (1.0 - k / experts) ** tokens)


def _context(attention: Attention, p: Pass) -> float:
    """Keys each query attends: all it holds, or at most its sliding window, or the DSA indexer's top-k. A causal
    prefill of s tokens averages s/2 keys per query; under a window w < s the query at position i attends
    min(i, w), which averages w - w^2 / (2 s)."""
    limit = attention.window or attention.selected
    if not limit:
        return p.context
    if p.decode:
        return min(p.context, limit)
    s = 2 * p.context
    return p.context if s <= limit else limit - limit * limit / (2 * s)


def _indexer(attention: Attention, p: Pass, n: int) -> list[Op]:
    """DeepSeek sparse attention's lightning indexer (DeepSeek-V3.2-Exp report, eq. 1; GLM-5): every query scores
    every key it holds with n_I small heads of d_I (q_I . k_I per head, weighted, ReLU) before the top-k select; decode
    reads the cached index keys."""
    if not attention.indexer_heads:
        return []
    heads = attention.indexer_heads / p.tp
    keys = p.context  # all keys, not the selected ones
    flops = 2.0 * p.tokens * keys * heads * attention.indexer_dim
    cache = p.batch * (keys if p.decode else p.query) * attention.indexer_dim * p.kv_bytes
    return [Op("dsa_indexer", "attention", flops * n, cache * n, n)]


def _gqa(attention: Attention, p: Pass, n: int, h: int) -> list[Op]:
    t = p.tp
    ad, kvd = attention.q_width / t, attention.kv_heads * attention.head_dim / t
    q_out = ad * (2 if attention.q_gate else 1)
    ops = [_gemm("qkv_proj", p.tokens, h, q_out + 2 * kvd, p, p.weight_bytes, n),
           _gemm("o_proj", p.tokens, attention.out_width / t, h, p, p.weight_bytes, n)]
    heads, kv_heads = attention.heads / t, max(attention.kv_heads / t, 1.0)
    context = _context(attention, p)
    flops = 2.0 * p.batch * p.query * context * heads * (attention.head_dim + attention.value_dim)
    qo = p.tokens * heads * (attention.head_dim + attention.value_dim) * p.act_bytes
    keys = p.query if p.query > 1 else context  # prefill reads its own fresh K/V; decode reads the cache
    kv = p.batch * keys * kv_heads * (attention.head_dim + attention.value_dim) * p.kv_bytes
    return ops + _attention_core(flops, qo + kv, p, heads, context, n)


def _attention_core(flops: float, moved: float, p: Pass, heads: float, context: float, n: int) -> list[Op]:
    if p.flash:
        return [Op("attention", "attention", flops * n, moved * n, n)]
    scores = p.batch * heads * p.query * context * 2  # causal averages c; the kernel writes full rows
    return [Op("attention_matmuls", "gemm", flops * n, moved * n, 2 * n),
            Op("attention_softmax", "memory", 0.0, 4 * scores * p.act_bytes * n, 2 * n)]


def _mla(attention: Attention, p: Pass, n: int, h: int) -> list[Op]:
    """DeepSeek-V2/V3 multi-head latent attention (V2 sec. 2.1.2-2.1.3). Prefill and training expand keys and values
    from the latent (kv_b_proj) for all tokens; a serving engine's decode absorbs W^UK into the query and W^UV into
    the output (V2 appendix C), attending MQA-like over the cached latent + RoPE key; transformers' decode instead
    re-expands every cached latent each step (DeepseekV3Attention.expand_kv)."""
    t, a = p.tp, attention
    heads = a.heads / t
    qk, r_kv, d_v = a.head_dim, a.kv_lora_rank, a.value_dim
    nope = qk - a.rope_dim
    q_ops = ([_gemm("q_a_proj", p.tokens, h, a.q_lora_rank, p, p.weight_bytes, n),
              _gemm("q_b_proj", p.tokens, a.q_lora_rank, heads * qk, p, p.weight_bytes, n)] if a.q_lora_rank
             else [_gemm("q_proj", p.tokens, h, heads * qk, p, p.weight_bytes, n)])
    ops = [*q_ops, _gemm("kv_a_proj", p.tokens, h, r_kv + a.rope_dim, p, p.weight_bytes, n),
           _gemm("o_proj", p.tokens, heads * d_v, h, p, p.weight_bytes, n)]
    context = _context(a, p)
    ops += _indexer(a, p, n)
    latent = p.batch * context * (r_kv + a.rope_dim) * p.kv_bytes  # the cache read: one latent for all heads
    if p.decode and p.absorb_mla:
        # one batched GEMM per layer over the heads (torch.einsum / bmm): each head a tokens x nope x r_kv product
        for name, d_in, d_out in (("mla_absorb_k", nope, r_kv), ("mla_absorb_v", r_kv, d_v)):
            head = _gemm(name, p.tokens, d_in, d_out, p, p.weight_bytes, 1)
            ops.append(Op(name, "gemm", head.flops * heads * n, head.bytes * heads * n, n))
        flops = 2.0 * p.batch * context * heads * (2 * r_kv + a.rope_dim)
        return ops + _attention_core(flops, latent + p.tokens * heads * (r_kv + a.rope_dim) * p.act_bytes, p, heads,
                                     context, n)
    expanded = p.query if p.query > 1 else context  # prefill expands its own tokens; eager decode every cached one
    ops.append(_gemm("kv_b_proj", p.batch * int(expanded), r_kv, heads * (nope + d_v), p, p.weight_bytes, n))
    flops = 2.0 * p.batch * p.query * context * heads * (qk + d_v)
    moved = p.tokens * heads * (qk + d_v) * p.act_bytes + (latent if p.decode else 0.0)
    return ops + _attention_core(flops, moved, p, heads, context, n)


CHUNK = 64  # tokens per chunk of the chunked gated-delta-rule prefill (FLA chunk_gated_delta_rule; transformers 64)


def _linear(attention: Attention, p: Pass, n: int, h: int) -> list[Op]:
    """Gated DeltaNet (Qwen3-Next/Qwen3.5): projections, a depthwise conv, and the delta-rule recurrence. A decode step
    reads and writes each sequence's fp32 state (value heads x key dim x value dim); a prefill runs it in chunks of
    64 tokens: intra-chunk attention plus a state update per chunk (Yang et al. 2024, Gated Delta Networks)."""
    t, a = p.tp, attention
    keys, values = a.key_heads * a.head_dim / t, a.kv_heads * a.value_dim / t
    state = a.kv_heads / t * a.head_dim * a.value_dim
    ops = [_gemm("linear_in_proj", p.tokens, h, 2 * keys + 2 * values + 2 * a.kv_heads / t, p, p.weight_bytes, n),
           _gemm("linear_out_proj", p.tokens, values, h, p, p.weight_bytes, n),
           Op("linear_conv", "memory", 0.0, p.tokens * (2 * keys + values) * p.act_bytes * 2 * n, n)]
    if p.decode:
        moved = p.batch * state * 4 * 2  # the fp32 state, read and written
        return [*ops, Op("delta_rule_step", "memory", 6.0 * p.batch * state * n, moved * n, n)]
    flops = p.tokens * (6.0 * state + 2.0 * CHUNK * a.kv_heads / t * (a.head_dim + a.value_dim))
    chunks = p.batch * max(p.query / CHUNK, 1.0)
    return [*ops, Op("delta_rule_chunks", "attention", flops * n, chunks * state * 4 * 2 * n, n)]


def _feed_forward(ffn: FeedForward, p: Pass, n: int, h: int) -> list[Op]:
    t = p.tp
    width, tokens = ffn.width / t, p.tokens
    mlp_in = (2 if ffn.gated else 1) * width
    if not ffn.experts:
        ops = [_gemm("mlp_up_gate", tokens, h, mlp_in, p, p.weight_bytes, n),
               _gemm("mlp_down", tokens, width, h, p, p.weight_bytes, n)]
    else:
        # under --ep this GPU holds E/ep whole experts and computes every token of the replica routed to them (the
        # tokens of all attention groups; TP ranks of a group share theirs); without EP each expert is TP-sharded
        if p.ep > 1:
            width = ffn.width
            mlp_in = (2 if ffn.gated else 1) * width
        group_tokens = tokens * p.dp
        touched = experts_touched(ffn, group_tokens) / p.ep
        routed = -(-group_tokens * ffn.top_k // p.ep)  # this GPU's share of the routed token copies
        # FLOPs follow the k experts of each token; weight bytes follow the distinct experts touched. One grouped
        # GEMM per layer runs them all, each expert's rows padded to the MMA tile: few tokens per expert fill
        # little of it
        fill = tile_row_fill(routed / touched)
        up, down = _gemm("mlp_up_gate", routed, h, mlp_in, p, 0.0, n), _gemm("mlp_down", routed, width, h, p, 0.0, n)
        expert_bytes = touched * n * (p.expert_bytes if p.expert_bytes is not None else p.weight_bytes)
        ops = [Op(up.name, "gemm", up.flops, up.bytes + h * mlp_in * expert_bytes, n, row_fill=fill),
               Op(down.name, "gemm", down.flops, down.bytes + width * h * expert_bytes, n, row_fill=fill),
               *_routing(ffn, p, n, h)]
    shared = ffn.shared_width / t
    if shared:  # shared experts (Qwen2-MoE, DeepSeek-V3): a dense gated MLP on every token
        ops += [_gemm("shared_expert_up_gate", tokens, h, 2 * shared, p, p.weight_bytes, n),
                _gemm("shared_expert_down", tokens, shared, h, p, p.weight_bytes, n)]
    return ops


def _routing(ffn: FeedForward, p: Pass, n: int, h: int) -> list[Op]:
    """The kernels a MoE layer runs besides its two grouped GEMMs (vLLM fused_moe: the router GEMM, fused_topk,
    moe_align_block_size and moe_sum after the down projection): small, each paying a kernel's floor."""
    tokens = p.tokens
    router = _gemm("moe_router", tokens, h, ffn.experts, p, 2.0, n)  # the gate, h x E in 16-bit
    moved = tokens * (ffn.experts * 4 + ffn.top_k * (4 + 4) + ffn.top_k * h * p.act_bytes)  # logits, ids, sum
    # the engine's measured call floor (top-k, alignment, the two grouped GEMMs, the sum: vLLM's benchmark_moe.py
    # times fused_topk and fused_experts together), less the five launch tails the roofline already charges them
    floor = max(p.moe_call_s - 5 * C.KERNEL_OVERHEAD.value, 0.0) * n
    return [router, Op("moe_topk_align_sum", "memory", 0.0, moved * n, 3 * n, fixed_s=floor)]


ATTENTION = {"gqa": _gqa, "mla": _mla, "linear": _linear}


def block_ops(arch: Architecture, block: Block, p: Pass, n: int) -> list[Op]:
    """Every operator of ``n`` layers of ``block`` for pass ``p`` (one TP shard)."""
    if not n:
        return []
    h = arch.hidden
    return [*ATTENTION[block.attention.kind](block.attention, p, n, h), *_feed_forward(block.ffn, p, n, h),
            elementwise_op(block, p, n, h)]


def layer_ops(arch: Architecture, p: Pass, layers: float) -> list[Op]:
    """Every operator of ``layers`` of the model's layers (a pipeline stage takes its share of each block)."""
    share = layers / max(arch.layers, 1)
    ops: list[Op] = []
    for block in arch.blocks:
        ops += block_ops(arch, block, p, round(block.count * share))
    return ops


def head_ops(arch: Architecture, p: Pass) -> list[Op]:
    """Embedding lookup, final norm, LM head (or a small task head) and, in training, the loss."""
    h, e = arch.hidden, p.act_bytes
    ops = [Op("embedding", "memory", 0.0, p.tokens * h * e * 2, 1)]
    if not (arch.lm_head and p.lm_head) or not arch.vocab:
        return ops
    positions = p.tokens if p.logits_tokens is None else p.logits_tokens
    vocab = arch.vocab / p.tp
    ops.append(_gemm("lm_head", positions, h, vocab, p, 2.0, 1))
    if p.loss:
        ops.append(loss_op(positions * vocab, e, p.fusions.loss if p.fusions else "fp32_logits"))
    return ops


def forward_ops(arch: Architecture, p: Pass, layers: float | None = None) -> list[Op]:
    ops = layer_ops(arch, p, arch.layers if layers is None else layers) + head_ops(arch, p)
    return ops + _activation_quant(ops) if p.act_quant else ops


_UNQUANTIZED = ("lm_head", "moe_router", "attention_matmuls", "mla_absorb_k", "mla_absorb_v")


def _activation_quant(ops: list[Op]) -> list[Op]:
    """A W8A8 (FP8, INT8) or W4A4 (NVFP4) linear quantizes its 16-bit input first, in a kernel of its own: vLLM's
    Fp8LinearOp (ops.scaled_fp8_quant, dynamic scales), W8A8BlockFp8LinearOp (per_token_group_quant_fp8) and
    fused_moe's moe_kernel_quantize_input before each grouped GEMM (vllm model_executor/layers/quantization/utils
    fp8_utils.py, fused_moe/utils.py). One launch per linear; its bytes (read 2, write 1 per input element) are small
    beside the GEMM's and are not counted."""
    launches = sum(op.count for op in ops if op.kind == "gemm" and op.name not in _UNQUANTIZED)
    return [Op("activation_quant", "memory", 0.0, 0.0, launches)] if launches else []


def model_flops_per_token(arch: Architecture, seq: int, *, weight_gradients: bool = True) -> float:
    """Training model FLOPs per token, PaLM appendix B: 6N + 12 L h_a s (attention; no recompute).

    N counts the active parameters that multiply (embedding lookups excluded, a tied head included); the
    attention term counts the full s x s matrix, as PaLM and llm-foundry do when they report MFU -- twice what a
    causal kernel computes, so at long sequences this MFU can pass the hardware's utilisation. Per block: heads x
    (key + value dims) over the tokens a layer attends (its window, if it slides); linear attention has no s term.
    """
    attention = sum(6 * b.count * b.attention.heads * (b.attention.head_dim + b.attention.value_dim)
                    * min(seq, b.attention.window or seq) for b in arch.blocks if b.attention.kind != "linear")
    params = arch.active_params - arch.params.embedding + (arch.params.embedding if arch.params.head == 0
                                                          and arch.lm_head else 0)
    # frozen weights (LoRA/QLoRA) skip their weight-gradient GEMMs: 2N forward + 2N input gradients
    return (6 if weight_gradients else 4) * params + attention
