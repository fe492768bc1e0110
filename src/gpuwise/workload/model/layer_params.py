"""Parameters of a decoder described block by block: each block's attention and feed-forward weights, norms,
biases and routers, summed into a :class:`ParamCount` with the linears LoRA adapts and quantized formats store.

Per layer, with h hidden, a/k query/KV heads, d/dv key/value head dims (workload/model/blocks.py for the kinds):
    GQA      q h x a d (x2 with an output gate), k and v h x k d, o a dv x h; biases and q/k norms as flagged;
             one sink logit per head (gpt-oss)
    MLA      q_a h x r_q + norm r_q, q_b r_q x a d (or q h x a d), kv_a h x (r_kv + r), norm r_kv,
             kv_b r_kv x a (d - r + dv), o a dv x h (DeepSeek-V2 eqs. 9-19); the DSA indexer (GLM-5) adds
             wq_b r_q x n_I d_I, wk h x d_I, weights_proj h x n_I and a LayerNorm of d_I
    linear   gated DeltaNet: in_proj h x (2K + 2V) and h x 2n_v, conv (2K + V) x c, dt_bias and A_log n_v, a gated
             norm dv, out_proj V x h (K = key heads x d, V = value heads x dv; transformers Qwen3NextGatedDeltaNet)
    FFN      gate/up h x i, down i x h, per expert for MoE (x E), a router E x h, shared experts of width i_s
A token runs top-k of E experts, so active = total - (E - k) x the weights of one expert, in every MoE layer.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.workload.model.blocks import Attention, Block, FeedForward
from gpuwise.workload.model.counts import Linear, ParamCount


@dataclass(frozen=True)
class Layout:
    """A decoder as transformers builds it: vocabulary, blocks, and what sits outside the blocks."""

    hidden: int
    vocab: int
    tied: bool
    blocks: tuple[Block, ...]
    tower: int = 0  # vision encoder and projector (multimodal models), counted once
    mtp: int = 0  # multi-token-prediction layers in the checkpoint that transformers does not build (not in total)


def _gqa(a: Attention, h: int, n: int) -> tuple[tuple[Linear, ...], int]:
    q_out = a.q_width * (2 if a.q_gate else 1)
    kv = a.kv_heads * a.head_dim
    linears = tuple(Linear(name, d_in, d_out, "attn", 1, n) for name, d_in, d_out in (
        ("q_proj", h, q_out), ("k_proj", h, kv), ("v_proj", h, a.kv_heads * a.value_dim), ("o_proj", a.out_width, h)))
    bias = (q_out + kv + a.kv_heads * a.value_dim) * (a.bias != "none") + h * (a.bias == "all")
    norm = {"none": 0, "head": 2 * a.head_dim, "width": a.q_width + kv}[a.qk_norm]
    return linears, n * (bias + norm + a.sinks)


def _mla(a: Attention, h: int, n: int) -> tuple[tuple[Linear, ...], int]:
    nope = a.head_dim - a.rope_dim
    q = (("q_a_proj", h, a.q_lora_rank), ("q_b_proj", a.q_lora_rank, a.q_width)) if a.q_lora_rank else (
        ("q_proj", h, a.q_width),)
    shapes = (*q, ("kv_a_proj_with_mqa", h, a.kv_lora_rank + a.rope_dim),
              ("kv_b_proj", a.kv_lora_rank, a.heads * (nope + a.value_dim)), ("o_proj", a.out_width, h))
    other = a.q_lora_rank + a.kv_lora_rank  # the RMSNorms of the two latents
    if a.bias != "none":
        other += a.q_lora_rank + a.kv_lora_rank + a.rope_dim + h
    if a.indexer_heads:
        shapes += (("indexer.wq_b", a.q_lora_rank, a.indexer_heads * a.indexer_dim), ("indexer.wk", h, a.indexer_dim),
                   ("indexer.weights_proj", h, a.indexer_heads))
        other += 2 * a.indexer_dim  # the indexer's key LayerNorm (weight and bias)
    return tuple(Linear(name, d_in, d_out, "attn", 1, n) for name, d_in, d_out in shapes), n * other


def _linear_attention(a: Attention, h: int, n: int) -> tuple[tuple[Linear, ...], int]:
    keys, values = a.key_heads * a.head_dim, a.kv_heads * a.value_dim
    linears = tuple(Linear(name, d_in, d_out, "attn", 1, n) for name, d_in, d_out in (
        ("in_proj_qkvz", h, 2 * keys + 2 * values), ("in_proj_ba", h, 2 * a.kv_heads), ("out_proj", values, h)))
    other = (2 * keys + values) * a.conv_kernel + 2 * a.kv_heads + a.value_dim
    return linears, n * other


def attention_params(a: Attention, h: int, n: int) -> tuple[tuple[Linear, ...], int]:
    """The linears of ``n`` layers of attention ``a`` and their other parameters (biases, norms, sinks)."""
    return {"gqa": _gqa, "mla": _mla, "linear": _linear_attention}[a.kind](a, h, n)


def _mlp(prefix: str, h: int, width: int, gated: bool, count: int, n: int) -> tuple[Linear, ...]:
    shapes = (("gate_proj", h, width), ("up_proj", h, width), ("down_proj", width, h)) if gated else (
        ("up_proj", h, width), ("down_proj", width, h))
    return tuple(Linear(prefix + name, d_in, d_out, "mlp", count, n) for name, d_in, d_out in shapes)


def _mlp_bias(h: int, width: int, gated: bool) -> int:
    return (2 if gated else 1) * width + h


def ffn_params(f: FeedForward, h: int, n: int) -> tuple[tuple[Linear, ...], int, int]:
    """The linears of ``n`` layers of ``f``, their other parameters, and the parameters a token does not run."""
    bias = _mlp_bias(h, f.width, f.gated) if f.bias else 0
    if not f.experts:
        return _mlp("", h, f.width, f.gated, 1, n), n * bias, 0
    linears = _mlp("experts.", h, f.width, f.gated, f.experts, n)
    other = f.experts * (bias + h + f.router_bias)
    if f.shared_width:
        linears += _mlp("shared_expert.", h, f.shared_width, f.gated, 1, n)
        other += h * f.shared_gate
    expert = (3 if f.gated else 2) * h * f.width + bias
    return linears, n * other, n * (f.experts - f.top_k) * expert


def count_layout(layout: Layout) -> ParamCount:
    """Total, active and their parts: embedding, untied head, block linears, everything else."""
    h = layout.hidden
    linears: tuple[Linear, ...] = ()
    other, inactive = h + layout.tower, 0  # the final norm and a vision tower
    for block in layout.blocks:
        attention, attention_other = attention_params(block.attention, h, block.count)
        mlp, mlp_other, unused = ffn_params(block.ffn, h, block.count)
        linears += attention + mlp
        other += attention_other + mlp_other + block.norms * h * block.count
        inactive += unused
    linear = sum(x.d_in * x.d_out * x.count * x.layers for x in linears)
    embedding = layout.vocab * h
    head = 0 if layout.tied else embedding
    total = embedding + linear + head + other
    active = total - inactive - layout.tower  # a text token runs neither the unrouted experts nor the vision tower
    return ParamCount(embedding, linear, head, other, active, linears, tower=layout.tower, mtp=layout.mtp)
