"""FLOPs and bytes of every operator of a transformer forward pass, on one tensor-parallel shard.

Legend: b sequences, q query tokens per sequence (s in prefill/training, 1 in decode), c key/value tokens
attended to, h hidden, a heads, k KV heads, d head dim, i MLP width, V vocabulary, t tensor-parallel
degree, e bytes per activation, w bytes per weight. A GEMM of an (m x n) by (n x p) product costs 2mnp
FLOPs and moves its weight (n x p x w) plus input and output activations. Causal self-attention over s
tokens attends to s/2 keys on average. Worked check: one Llama-3-8B decode step at batch 1 reads the 16 GB of
bf16 weights once, so on a 3.35 TB/s H100 it cannot take less than ~4.8 ms.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwise.estimate.roofline import Op
from gpuwise.workload.architecture import Architecture


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

    @property
    def tokens(self) -> int:
        return self.batch * self.query


def _gemm(name: str, tokens: int, d_in: float, d_out: float, p: Pass, weight_bytes: float, count: int) -> Op:
    flops = 2.0 * tokens * d_in * d_out
    moved = d_in * d_out * weight_bytes + tokens * (d_in + d_out) * p.act_bytes
    return Op(name, "gemm", flops * count, moved * count, count)


def experts_touched(arch: Architecture, tokens: int) -> float:
    """Distinct experts a layer runs for ``tokens`` tokens under uniform top-k routing: E(1 - (1 - k/E)^T)."""
    if not arch.experts:
        return 1.0
    e, k = arch.experts, arch.experts_per_token
    return e * (1.0 - (1.0 - k / e) ** tokens)


def layer_ops(arch: Architecture, p: Pass, layers: float) -> list[Op]:
    """Every operator of ``layers`` identical transformer layers for pass ``p`` (one TP shard)."""
    n = round(layers)
    t, e, h = p.tp, p.act_bytes, arch.hidden
    tokens = p.tokens
    ad, kvd = arch.heads * arch.head_dim / t, arch.kv_heads * arch.head_dim / t
    width = arch.intermediate / t
    ops = [
        _gemm("qkv_proj", tokens, h, ad + 2 * kvd, p, p.weight_bytes, n),
        _gemm("o_proj", tokens, ad, h, p, p.weight_bytes, n),
    ]
    ops += _attention(arch, p, n)
    active = max(arch.experts_per_token, 1)
    mlp_in = (2 if arch.gated_mlp else 1) * width
    touched = experts_touched(arch, tokens)
    # MoE: FLOPs follow the k experts of each token; weight bytes follow the distinct experts touched
    up = _gemm("mlp_up_gate", tokens * active, h, mlp_in, p, 0.0, n)
    down = _gemm("mlp_down", tokens * active, width, h, p, 0.0, n)
    expert_bytes = touched * n * p.weight_bytes
    ops += [Op(up.name, "gemm", up.flops, up.bytes + h * mlp_in * expert_bytes, n),
            Op(down.name, "gemm", down.flops, down.bytes + width * h * expert_bytes, n)]
    shared = arch.shared_expert_intermediate / t
    if shared:  # Qwen2-MoE's shared expert: a dense gated MLP on every token
        ops += [_gemm("shared_expert_up_gate", tokens, h, 2 * shared, p, p.weight_bytes, n),
                _gemm("shared_expert_down", tokens, shared, h, p, p.weight_bytes, n)]
    elementwise = tokens * e * (
        2 * 2 * h  # two norms: read + write the hidden state
        + 2 * 3 * h  # two residual adds: read two, write one
        + (3 if arch.gated_mlp else 2) * width * active  # activation (and the gate product)
        + 3 * shared  # the shared expert's activation and gate product
        + 2 * (ad + kvd)  # rotary on q and k, or bias adds
    )
    ops.append(Op("norms_residuals_activation", "memory", 0.0, elementwise * n, 6 * n))
    return ops


def _attention(arch: Architecture, p: Pass, n: int) -> list[Op]:
    heads = arch.heads / p.tp
    kv_heads = max(arch.kv_heads / p.tp, 1.0)
    d = arch.head_dim
    flops = 4.0 * p.batch * p.query * p.context * heads * d
    qo = 2 * p.tokens * heads * d * p.act_bytes
    keys = p.query if p.query > 1 else p.context  # prefill reads its own fresh K/V; decode reads the cache
    kv = 2 * p.batch * keys * kv_heads * d * p.kv_bytes
    if p.flash:
        return [Op("attention", "attention", flops * n, (qo + kv) * n, n)]
    scores = p.batch * heads * p.query * p.context * 2  # causal averages c; the kernel writes full rows
    return [Op("attention_matmuls", "gemm", flops * n, (qo + kv) * n, 2 * n),
            Op("attention_softmax", "memory", 0.0, 4 * scores * p.act_bytes * n, 2 * n)]


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
        ops.append(Op("loss", "memory", 0.0, positions * vocab * (e + 4 + 4), 3))
    return ops


def forward_ops(arch: Architecture, p: Pass, layers: float | None = None) -> list[Op]:
    return layer_ops(arch, p, arch.layers if layers is None else layers) + head_ops(arch, p)


def model_flops_per_token(arch: Architecture, seq: int, *, weight_gradients: bool = True) -> float:
    """Training model FLOPs per token, PaLM appendix B: 6N + 12 L h_a s (attention; no recompute).

    N counts the active parameters that multiply (embedding lookups excluded, a tied head included); the
    attention term counts the full s x s matrix, as PaLM and llm-foundry do when they report MFU.
    """
    attention = 12 * arch.layers * arch.heads * arch.head_dim * seq
    params = arch.active_params - arch.params.embedding + (arch.params.embedding if arch.params.head == 0
                                                          and arch.lm_head else 0)
    # frozen weights (LoRA/QLoRA) skip their weight-gradient GEMMs: 2N forward + 2N input gradients
    return (6 if weight_gradients else 4) * params + attention
