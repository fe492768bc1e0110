"""The layers of a model as runs of identical blocks: what each block's attention caches and computes, and what its
feed-forward part holds and runs.

A 2026 model is rarely one layer repeated: DeepSeek-V3 has 3 dense layers and 58 MoE layers with latent (MLA)
attention; Qwen3-Next mixes 36 gated-DeltaNet (linear attention) layers with 12 full-attention ones; gpt-oss and
Gemma 3 alternate sliding-window and full layers. The memory and speed models read these blocks; a family with one
kind of layer is one block.

Attention kinds:
    gqa      multi-, grouped- or multi-query attention: caches K and V of ``kv_heads`` heads (of ``head_dim`` and
             ``value_dim``) per token, or of the last ``window`` tokens on a sliding/chunked layer
    mla      multi-head latent attention (DeepSeek-V2 sec. 2.1): caches one latent of ``kv_lora_rank`` plus one RoPE
             key of ``rope_dim`` per token, shared by all heads
    linear   gated DeltaNet (Qwen3-Next, Qwen3.5): no per-token cache; a fixed state per sequence of
             ``kv_heads`` (value heads) x ``head_dim`` (key dim) x ``value_dim`` (fp32) and a short conv window
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

AttentionKind = Literal["gqa", "mla", "linear"]
Bias = Literal["none", "qkv", "all"]  # which attention projections carry a bias
QKNorm = Literal["none", "head", "width"]  # RMSNorm on q and k: per head (Qwen3, Gemma 3) or over the whole width


@dataclass(frozen=True)
class Attention:
    kind: AttentionKind
    heads: int  # query heads
    kv_heads: int  # gqa: K/V heads; mla: heads (keys and values per head once decompressed); linear: value heads
    head_dim: int  # gqa: q/k head dim; mla: nope + rope dims of q/k; linear: key head dim
    value_dim: int  # dims of a value head
    window: int | None = None  # sliding window or attention chunk: the tokens a layer keeps (None: all)
    sinks: int = 0  # learned attention sinks per head (gpt-oss): parameters, not cache
    q_gate: bool = False  # the query projection also carries a sigmoid output gate (Qwen3-Next, Qwen3.5)
    q_lora_rank: int = 0  # mla: the query latent (0: a plain q projection)
    kv_lora_rank: int = 0  # mla: the cached K/V latent
    rope_dim: int = 0  # mla: the decoupled RoPE key, cached beside the latent
    key_heads: int = 0  # linear: key heads (values have ``kv_heads``)
    conv_kernel: int = 0  # linear: the depthwise convolution's width
    bias: Bias = "none"
    qk_norm: QKNorm = "none"
    indexer_heads: int = 0  # DeepSeek sparse attention (GLM-5): the lightning indexer's heads ...
    indexer_dim: int = 0  # ... and head dim; its one key per token is cached beside the latent
    selected: int | None = None  # tokens each query attends after the indexer's top-k (None: all it holds)

    @property
    def cache_elements_per_token(self) -> int:
        """Elements one token adds to this layer's cache (all heads, before tensor parallelism)."""
        if self.kind == "mla":
            return self.kv_lora_rank + self.rope_dim + self.indexer_dim
        if self.kind == "linear":
            return 0
        return self.kv_heads * (self.head_dim + self.value_dim)

    @property
    def state_elements(self) -> tuple[int, int]:
        """(recurrent-state elements kept in fp32, conv-state elements in the activation dtype) per sequence."""
        if self.kind != "linear":
            return 0, 0
        conv = (2 * self.key_heads * self.head_dim + self.kv_heads * self.value_dim) * self.conv_kernel
        return self.kv_heads * self.head_dim * self.value_dim, conv

    @property
    def q_width(self) -> int:
        return self.heads * self.head_dim

    @property
    def out_width(self) -> int:
        """Width of the attention output that the output projection reads."""
        return self.heads * self.value_dim


@dataclass(frozen=True)
class FeedForward:
    width: int  # intermediate width of the dense MLP, or of one expert
    gated: bool
    experts: int = 0  # routed experts (0: a dense MLP)
    top_k: int = 0  # experts each token runs
    shared_width: int = 0  # total intermediate width of the shared expert(s) every token runs
    bias: bool = False  # the MLP (or every expert) has biases (gpt-oss)
    router_bias: bool = False  # the router is a Linear with a bias (gpt-oss)
    shared_gate: bool = False  # a Linear(h, 1) whose sigmoid scales the shared expert (Qwen2-MoE, Qwen3-Next)

    @property
    def active_width(self) -> int:
        """Intermediate width one token runs through: the dense MLP, or top-k experts plus the shared ones."""
        return (self.width * max(self.top_k, 1) if self.experts else self.width) + self.shared_width


@dataclass(frozen=True)
class Block:
    count: int
    attention: Attention
    ffn: FeedForward
    caches: bool = True  # keeps a cache when the model generates (decoder layers; not an encoder's)
    norms: int = 2  # hidden-size norms per layer (pre-attention and pre-MLP; Gemma 2/3 add two post-norms)


def uniform(count: int, attention: Attention, ffn: FeedForward) -> tuple[Block, ...]:
    return (Block(count, attention, ffn),) if count else ()


def split_windows(count: int, windowed: int, attention: Attention, ffn: FeedForward) -> tuple[Block, ...]:
    """``windowed`` of ``count`` layers keep only ``attention.window`` tokens, the others the whole context."""
    full = replace(attention, window=None)
    return tuple(b for b in (Block(windowed, attention, ffn), Block(count - windowed, full, ffn)) if b.count)
