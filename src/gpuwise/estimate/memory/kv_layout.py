"""How vLLM lays its KV pool out in blocks, and the token count and concurrency it prints from them.

vllm-project/vllm v1/core/kv_cache_utils.py (hybrid allocator, v0.10 on): the layers are sorted by type (full
attention, each sliding window, linear attention / mamba) and cut into groups of ``group_size`` = the fewest layers
of any type (_get_kv_cache_groups_uniform_page_size); every layer's page holds one block, all pages the same size
(a linear layer's page is one sequence's state, and the attention block grows to match it, 16 x
cdiv(state, 16 x one token's page)); one block id spans one layer of each group, so the pool holds
pool // (page x group_size) blocks (get_num_blocks). The log's 'GPU KV cache size' is
num_blocks // len(groups) x the smallest block (_report_kv_cache_config): with one sliding group beside one full
group (gpt-oss) that is the pool over every layer's bytes per token; with uneven groups (Gemma-3's 52 sliding
and 10 full layers: 6 + 1 groups of 10) or linear groups it is less. 'Maximum concurrency' is num_blocks over the
blocks one request of max_model_len takes in every group (get_max_concurrency_for_kv_cache_config): a full group
cdiv(len, block), a sliding one cdiv(min(window - 1 + the token budget, len), block) + 1, a linear one 1.

Without the hybrid allocator (V0, SGLang) every attention layer holds every token: one group of all of them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from gpuwise.estimate.memory.kv_cache import caches_latent, elements_on_gpu
from gpuwise.estimate.plan import InferPlan


@dataclass(frozen=True)
class LayerType:
    kind: Literal["full", "sliding", "linear"]
    window: int | None
    layers: int
    token_bytes: float  # one token of one attention layer on one GPU
    state_bytes: float  # one sequence of one linear layer on one GPU


@dataclass(frozen=True)
class KvLayout:
    block_tokens: int
    page_bytes: float  # one block of one layer (of all layers when ``group_size`` is 1 and there is one type)
    group_size: int
    groups: int
    types: tuple[LayerType, ...]

    def blocks(self, pool_bytes: float) -> int:
        return int(max(pool_bytes, 0.0) // (self.page_bytes * self.group_size))

    def tokens(self, blocks: int) -> int:
        return blocks // self.groups * self.block_tokens

    def blocks_per_request(self, context: int, budget: int) -> int:
        """Blocks one request of ``context`` tokens takes, one block id per layer group."""
        b, total = self.block_tokens, 0
        for t in self.types:
            if t.kind == "linear":
                need = 1
            elif t.kind == "sliding" and t.window:
                need = -(-min(t.window - 1 + budget, context) // b) + 1
            else:
                need = -(-context // b)
            total += -(-t.layers // self.group_size) * need
        return total


def layer_types(plan: InferPlan) -> tuple[LayerType, ...]:
    """The caching layers by type, with their bytes per token (attention) or per sequence (linear) on one GPU."""
    tp, latent = plan.job.tp, caches_latent(plan)
    found: dict[LayerType, int] = {}
    for block in plan.arch.caching_blocks:
        a = block.attention
        if a.kind == "linear":  # vLLM keeps kernel - 1 conv columns, the state in mamba_ssm_dtype when set
            recurrent, conv = a.state_elements
            conv_kept = conv * (a.conv_kernel - 1) / a.conv_kernel if a.conv_kernel else 0.0
            state = (recurrent * _ssm_bytes(plan) + conv_kept * plan.act_bytes) / tp
            kind = LayerType("linear", None, 0, 0.0, state)
        else:
            kind = LayerType("sliding" if a.window else "full", a.window, 0,
                             elements_on_gpu(a, tp, latent=latent) * plan.kv_bytes, 0.0)
        found[kind] = found.get(kind, 0) + block.count
    return tuple(replace(kind, layers=n) for kind, n in found.items())


def _ssm_bytes(plan: InferPlan) -> int:
    """Bytes of a recurrent-state element: float32 where the config says mamba_ssm_dtype float32 (Qwen3.5), else the
    model's dtype (vLLM's mamba_ssm_cache_dtype 'auto')."""
    config = plan.arch.config
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    dtype = config.get("mamba_ssm_dtype") or (text or {}).get("mamba_ssm_dtype")
    return 4 if dtype == "float32" else plan.act_bytes


def kv_layout(plan: InferPlan, block_tokens: int, *, grouped: bool) -> KvLayout:
    """The pool's layout: vLLM's layer groups when ``grouped`` (its hybrid allocator), else one group of every
    attention layer, a sliding one holding every token too."""
    types = layer_types(plan)
    attention = [t for t in types if t.kind != "linear"]
    token_bytes = max((t.token_bytes for t in attention), default=0.0)
    if not grouped or len(types) == 1:
        flat = LayerType("full", None, 1, sum(t.layers * t.token_bytes for t in attention), 0.0)
        return KvLayout(block_tokens, block_tokens * flat.token_bytes, 1, 1, (flat,))
    state = max((t.state_bytes for t in types if t.kind == "linear"), default=0.0)
    block = block_tokens
    if state and token_bytes:
        block = block_tokens * -(-int(state) // int(block_tokens * token_bytes))
    page = max(block * token_bytes, state)
    group_size = min(t.layers for t in types)
    groups = sum(-(-t.layers // group_size) for t in types)
    return KvLayout(block, page, group_size, groups, types)
