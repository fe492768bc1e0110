"""The architecture of a model type gpuwise has no closed form for, read from transformers' own build on the meta
device (the ``hf`` extra): every nn.Linear with its shape, the expert banks (3-D parameters under ``experts``), the
embeddings and the repeated layers, so the memory and speed models run on it as on a counted family.

The layer stack is the longest nn.ModuleList of the model; a linear inside it is attention when its path names
attention (``attn``, ``attention``, ``mixer``), else MLP. Heads, KV heads and head size come from the config's
standard keys, checked against the projections' shapes. No weights are loaded and no remote code runs. The build and
what its modules hold (torch's classes) are workload/exact.py's; this reads them into gpuwise's blocks and counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuwise.errors import ConfigError
from gpuwise.workload.exact import embedding_and_head, layer_linears, layer_stack, meta_model, unique_param_count
from gpuwise.workload.model.blocks import Attention, Block, FeedForward
from gpuwise.workload.model.counts import Linear, ParamCount
from gpuwise.workload.model.families import _mla

DERIVED = "architecture derived from the module tree (transformers' meta-device build)"
_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
_FIXED_STATE = ("linearattention", "lightningattention", "rwkv", "retention", "deltanet", "mamba", "lstm")


def _softmax_attention(module: Any) -> bool:
    """A softmax-attention module, which caches keys and values per token: its class is named ``...Attention``
    (LlamaAttention, DeepseekV2Attention, RecurrentGemmaSdpaAttention) and is not one of the linear or recurrent
    mixers that keep a fixed state instead (MiniMaxLightningAttention, RwkvSelfAttention, mamba, xLSTM)."""
    name = type(module).__name__.lower()
    return name.endswith("attention") and not any(word in name for word in _FIXED_STATE)


def _caching_layers(stack: Any) -> int:
    return sum(1 for layer in stack if any(_softmax_attention(m) for m in layer.modules()))


def _block_linears(stack: Any) -> list[Linear]:
    """Every linear and expert bank of the stack, merged over the layers that hold the same ones."""
    layers: dict[tuple[str, int, int, str, int], int] = {}
    for layer in stack:
        for (name, d_in, d_out, group), count in layer_linears(layer).items():
            layers[(name, d_in, d_out, group, count)] = layers.get((name, d_in, d_out, group, count), 0) + 1
    return [Linear(name, d_in, d_out, group, count, n) for (name, d_in, d_out, group, count), n in layers.items()]


def _active(config: Mapping[str, Any], linears: list[Linear], total: int) -> tuple[int, int, int]:
    """(experts, experts per token, active parameters): a token runs top-k of E experts in each MoE layer."""
    experts = next((int(config[k]) for k in _EXPERT_KEYS if isinstance(config.get(k), int)), 0)
    top_k = int(config.get("num_experts_per_tok") or config.get("moe_k") or 0)
    if experts <= 1 or not top_k:
        return 0, 0, total
    unrouted = sum(x.d_in * x.d_out * x.layers * (experts - top_k) for x in linears
                   if x.count == experts and "expert" in x.name)
    return experts, top_k, total - unrouted


def derive(config: Mapping[str, Any], *, name: str, source: str) -> dict[str, Any]:
    """The fields of an :class:`~gpuwise.workload.model.architecture.Architecture` (its blocks included) of any model
    type transformers builds; ConfigError when it cannot."""
    model = meta_model(config)
    total = unique_param_count(model)
    _, stack = layer_stack(model)
    linears = _block_linears(stack)
    embedding, vocab, width, head = embedding_and_head(model)
    linear = sum(x.d_in * x.d_out * x.count * x.layers for x in linears)
    experts, top_k, active = _active(config, linears, total)
    hidden = int(config.get("hidden_size") or config.get("d_model") or width)
    heads = int(config.get("num_attention_heads") or config.get("n_head") or 1)
    head_dim = int(config.get("head_dim") or hidden // heads)
    mlp = [x for x in linears if x.group == "mlp" and x.d_in == hidden]
    intermediate = int(config.get("intermediate_size") or config.get("moe_intermediate_size")
                       or (max(x.d_out for x in mlp) if mlp else 4 * hidden))
    params = ParamCount(embedding=embedding, linear=linear, head=head, other=total - embedding - linear - head,
                        active=active, linears=tuple(linears))
    layers = len(stack)
    # only softmax-attention layers of a generative model keep a KV cache (recurrent mixers hold a fixed state
    # gpuwise does not model; an encoder caches nothing)
    generates = bool(getattr(model, "can_generate", lambda: False)())
    attending = _caching_layers(stack)
    if not generates and not attending:
        raise ConfigError(f"{name}: a {config.get('model_type')} model of {total:,} parameters with no attention "
                          "layers (convolutional or recurrent encoder): gpuwise's speed and memory models need "
                          "transformer or generative layers")
    caching = attending if generates else 0
    lm_head = generates and (head > 0 or vocab > 0)
    fields: dict[str, Any] = dict(
        name=name, family=str(config.get("model_type")), kind="decoder" if generates else "encoder", params=params,
        hidden=hidden, layers=layers,
        heads=heads, kv_heads=int(config.get("num_key_value_heads") or heads), head_dim=head_dim,
        intermediate=intermediate, gated_mlp=sum(1 for x in mlp if x.count == 1) >= 2, vocab=vocab,
        max_positions=config.get("max_position_embeddings"), lm_head=lm_head, experts=experts,
        experts_per_token=top_k, decoder_layers=layers if generates else 0, source=source, config=dict(config),
        resolved_as=DERIVED)
    return {**fields, "blocks": _blocks(fields, config, caching)}


def _blocks(fields: Mapping[str, Any], config: Mapping[str, Any], caching: int) -> tuple[Block, ...]:
    """The caching (softmax-attention) layers and the others: recurrent mixers of a generative model, or an
    encoder's layers. Multi-head latent attention caches its latent and RoPE key (workload/model/families.py _mla)."""
    attention = Attention("gqa", fields["heads"], fields["kv_heads"], fields["head_dim"], fields["head_dim"])
    ffn = FeedForward(fields["intermediate"], fields["gated_mlp"], fields["experts"], fields["experts_per_token"])
    cached = _mla(config) if config.get("kv_lora_rank") and caching else attention
    others = fields["layers"] - caching
    return ((Block(others, attention, ffn, caches=False),) if others else ()) + (
        (Block(caching, cached, ffn),) if caching else ())
