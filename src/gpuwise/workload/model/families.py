"""The decoders of 2025-2026 read from their config.json into blocks (workload/model/blocks.py), one function per
model_type, each following the modeling code of transformers 5.24 (``models/<type>/modeling_<type>.py``).

Which layers are which comes from the config's ``layer_types`` when it has one, else from the rule its config
class applies (Gemma 3: every 6th layer global; Qwen3-Next: every 4th full attention; Llama 4: every 4th NoPE
layer global, the others chunked). The counts these layouts give equal the meta-device build of every preset
(tests/test_families.py) and the published totals.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from gpuwise.errors import ConfigError
from gpuwise.workload.model import towers as towers
from gpuwise.workload.model.blocks import Attention, Block, FeedForward
from gpuwise.workload.model.layer_params import Layout, attention_params, ffn_params

Config = Mapping[str, Any]
Layer = tuple[Attention, FeedForward, int]  # attention, feed-forward, hidden-size norms


def text_config(config: Config) -> Config:
    """The language model's config: ``text_config`` of a multimodal wrapper, else the config itself."""
    text = config.get("text_config")
    return text if isinstance(text, Mapping) else config


def get(config: Config, key: str, default: Any = None) -> Any:
    value = config.get(key)
    if value is None:
        if default is None:
            raise ConfigError(f"config.json of model_type {config.get('model_type')!r} lacks {key!r}")
        return default
    return value


def _int(config: Config, key: str, default: int | None = None) -> int:
    return int(get(config, key, default))


def layer_kinds(config: Config, count: int, default: Callable[[int], str]) -> list[str]:
    """Per layer: the config's ``layer_types`` when it lists every layer, else ``default(layer index)``."""
    listed = config.get("layer_types")
    if isinstance(listed, list) and len(listed) == count and all(isinstance(k, str) for k in listed):
        return [str(k) for k in listed]
    return [default(i) for i in range(count)]


def group(layers: list[Layer]) -> tuple[Block, ...]:
    """Runs of identical layers as blocks, in order of first appearance."""
    counts = Counter(layers)
    return tuple(Block(n, attention, ffn, norms=norms) for (attention, ffn, norms), n in counts.items())


def _gqa(t: Config, *, window: int | None = None, **extra: Any) -> Attention:
    h, heads = _int(t, "hidden_size"), _int(t, "num_attention_heads")
    kv = int(t.get("num_key_value_heads") or heads)
    head_dim = int(t.get("head_dim") or h // heads)
    return Attention("gqa", heads, kv, head_dim, head_dim, window=window, **extra)


def _dense(width: int) -> FeedForward:
    return FeedForward(width, gated=True)


def _tied(config: Config, text: Config, default: bool) -> bool:
    for source in (config, text):
        if isinstance(source.get("tie_word_embeddings"), bool):
            return bool(source["tie_word_embeddings"])
    return default


def _layout(config: Config, t: Config, layers: list[Layer], *, tied: bool = False, tower: int = 0,
            mtp_layers: int = 0) -> Layout:
    """The layout of ``layers``; ``mtp_layers`` multi-token-prediction layers, each a decoder layer like the last
    one plus its input projection (2h x h) and three norms, are counted apart (DeepSeek-V3 sec. 2.2; Qwen3.5's
    mtp.* tensors)."""
    h = _int(t, "hidden_size")
    mtp = 0
    if mtp_layers:
        attention, ffn, norms = layers[-1]
        mtp = mtp_layers * (2 * h * h + 3 * h + layer_params(attention, ffn, norms, h))
    return Layout(hidden=h, vocab=_int(t, "vocab_size"), tied=_tied(config, t, tied), blocks=group(layers),
                  tower=tower, mtp=mtp)


def layer_params(attention: Attention, ffn: FeedForward, norms: int, h: int) -> int:
    linears, attention_other = attention_params(attention, h, 1)
    mlp, mlp_other, _ = ffn_params(ffn, h, 1)
    return sum(x.d_in * x.d_out * x.count for x in (*linears, *mlp)) + attention_other + mlp_other + norms * h


def _wrapped(config: Config) -> bool:
    """The config names the multimodal class (vision tower built), not the text-only one."""
    return str((config.get("architectures") or [""])[0]).endswith("ForConditionalGeneration")


def _sparse_layers(t: Config, count: int) -> list[bool]:
    """Qwen2/3-MoE rule: layer i is MoE unless listed in mlp_only_layers or off the decoder_sparse_step."""
    step, only = _int(t, "decoder_sparse_step", 1), set(t.get("mlp_only_layers") or [])
    return [i not in only and (i + 1) % step == 0 for i in range(count)]


def _experts(t: Config, *, width_key: str = "moe_intermediate_size", experts_key: str = "num_experts",
             shared: int = 0, **extra: Any) -> FeedForward:
    return FeedForward(_int(t, width_key), gated=True, experts=_int(t, experts_key),
                       top_k=_int(t, "num_experts_per_tok"), shared_width=shared, **extra)


# ---------------------------------------------------------------- Qwen3 and its hybrids
def qwen3(config: Config) -> Layout:
    t = text_config(config)
    attention = _gqa(t, qk_norm="head", bias="all" if t.get("attention_bias") else "none")
    return _layout(config, t, [(attention, _dense(_int(t, "intermediate_size")), 2)] * _int(t, "num_hidden_layers"))


def qwen3_moe(config: Config) -> Layout:
    t = text_config(config)
    attention = _gqa(t, qk_norm="head", bias="all" if t.get("attention_bias") else "none")
    moe, dense = _experts(t), _dense(_int(t, "intermediate_size", 1))
    count = _int(t, "num_hidden_layers")
    return _layout(config, t, [(attention, moe if sparse else dense, 2) for sparse in _sparse_layers(t, count)])


def _gated_delta_net(t: Config) -> Attention:
    values = _int(t, "linear_num_value_heads")
    return Attention("linear", values, values, _int(t, "linear_key_head_dim"), _int(t, "linear_value_head_dim"),
                     key_heads=_int(t, "linear_num_key_heads"), conv_kernel=_int(t, "linear_conv_kernel_dim", 4))


def _hybrid_attention(t: Config) -> list[Attention]:
    """Qwen3-Next / Qwen3.5: gated DeltaNet layers and, every ``full_attention_interval``-th, gated attention."""
    count, interval = _int(t, "num_hidden_layers"), _int(t, "full_attention_interval", 4)
    full, linear = _gqa(t, q_gate=True, qk_norm="head"), _gated_delta_net(t)
    kinds = layer_kinds(t, count, lambda i: "linear_attention" if (i + 1) % interval else "full_attention")
    return [linear if kind == "linear_attention" else full for kind in kinds]


def qwen3_next(config: Config) -> Layout:
    t = text_config(config)
    attentions = _hybrid_attention(t)
    moe = _experts(t, shared=_int(t, "shared_expert_intermediate_size", 0), shared_gate=True)
    dense = _dense(_int(t, "intermediate_size", 1))
    sparse = _sparse_layers(t, len(attentions))
    return _layout(config, t, [(a, moe if s else dense, 2) for a, s in zip(attentions, sparse, strict=True)])


def qwen3_5(config: Config) -> Layout:
    """qwen3_5 (dense MLP in every layer) and qwen3_5_moe (an MoE block in every layer); the multimodal class adds
    the vision tower. The checkpoint's MTP layer (not built by transformers) is counted apart."""
    t = text_config(config)
    moe = config.get("model_type") == "qwen3_5_moe" or t.get("model_type") == "qwen3_5_moe_text"
    ffn = _experts(t, shared=_int(t, "shared_expert_intermediate_size", 0), shared_gate=True) if moe else _dense(
        _int(t, "intermediate_size"))
    layers = [(a, ffn, 2) for a in _hybrid_attention(t)]
    vision = config.get("vision_config")
    tower = towers.qwen3_5_tower(vision) if _wrapped(config) and isinstance(vision, Mapping) else 0
    return _layout(config, t, layers, tower=tower, mtp_layers=_int(t, "mtp_num_hidden_layers", 0))


def qwen2_5_vl(config: Config) -> Layout:
    """Qwen2.5-VL: a Qwen2 decoder (biased q/k/v) and its window-attention vision transformer."""
    t = text_config(config)
    layers = [(_gqa(t, bias="qkv"), _dense(_int(t, "intermediate_size")), 2)] * _int(t, "num_hidden_layers")
    vision = config.get("vision_config")
    tower = towers.qwen2_5_vl_tower(vision) if isinstance(vision, Mapping) else 0
    return _layout(config, t, layers, tower=tower)


# ---------------------------------------------------------------- Llama-shaped decoders with a twist
def _llama_layers(t: Config, window_kinds: Callable[[int], str] | None = None, **extra: Any) -> list[Layer]:
    count, ffn = _int(t, "num_hidden_layers"), _dense(_int(t, "intermediate_size"))
    window = t.get("sliding_window")
    full = _gqa(t, **extra)
    sliding = _gqa(t, window=int(window), **extra) if window else full
    kinds = layer_kinds(t, count, window_kinds or (lambda i: "sliding_attention" if window else "full_attention"))
    return [(sliding if kind == "sliding_attention" else full, ffn, 2) for kind in kinds]


def mistral3(config: Config) -> Layout:
    """Mistral Small 3.x / Ministral 3: a Mistral decoder and the Pixtral vision tower with its patch merger. The
    checkpoint stores an untied head (Mistral3Config's default tie does not survive from_pretrained)."""
    t = text_config(config)
    tower = towers.pixtral_tower(config, _int(t, "hidden_size")) if _wrapped(config) else 0
    return _layout(config, t, _llama_layers(t), tower=tower)


def ministral(config: Config) -> Layout:
    """Ministral-8B: every layer slides when sliding_window is set (MinistralConfig), unless layer_types say not."""
    return _layout(config, config, _llama_layers(config))


def olmo2(config: Config) -> Layout:
    """OLMo 2 and 3: post-norms (two per layer), q/k RMSNorm over the whole projection; OLMo 3 lists sliding and
    full layers in layer_types."""
    return _layout(config, config, _llama_layers(config, lambda i: "full_attention", qk_norm="width"))


def gemma3(config: Config) -> Layout:
    """Gemma 3: 5 sliding (local) layers per global one, four norms per layer, per-head q/k norms, tied head; the
    multimodal class adds SigLIP and its projector. Gemma3TextConfig supplies what the 4B config omits."""
    t = {"vocab_size": 262_208, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
         "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26, "sliding_window": 4096,
         **{k: v for k, v in text_config(config).items() if v is not None}}
    pattern = _int(t, "sliding_window_pattern", 6)
    count, ffn = _int(t, "num_hidden_layers"), _dense(_int(t, "intermediate_size"))
    full = _gqa(t, qk_norm="head")
    sliding = _gqa(t, window=_int(t, "sliding_window"), qk_norm="head")
    kinds = layer_kinds(t, count, lambda i: "sliding_attention" if (i + 1) % pattern else "full_attention")
    layers = [(sliding if kind == "sliding_attention" else full, ffn, 4) for kind in kinds]
    tower = towers.gemma3_tower(config, _int(t, "hidden_size")) if _wrapped(config) else 0
    return _layout(config, t, layers, tied=True, tower=tower)


def gpt_oss(config: Config) -> Layout:
    """gpt-oss: sliding (128) and full attention alternate, every projection biased, a sink logit per head, MoE
    layers whose experts and router carry biases."""
    t = config
    count, window = _int(t, "num_hidden_layers"), _int(t, "sliding_window", 128)
    heads = _int(t, "num_attention_heads")
    full, sliding = _gqa(t, bias="all", sinks=heads), _gqa(t, window=window, bias="all", sinks=heads)
    moe = _experts(t, width_key="intermediate_size", experts_key="num_local_experts", bias=True, router_bias=True)
    kinds = layer_kinds(t, count, lambda i: "sliding_attention" if i % 2 == 0 else "full_attention")
    return _layout(config, t, [(sliding if k == "sliding_attention" else full, moe, 2) for k in kinds])


def llama4(config: Config) -> Layout:
    """Llama 4: MoE on every ``interleave_moe_layer_step``-th layer (routed top-k + a shared expert), dense layers
    of intermediate_size_mlp; RoPE layers attend within chunks of attention_chunk_size, every 4th (NoPE) layer
    attends globally; the multimodal class adds its vision encoder and projector."""
    t = text_config(config)
    count, step = _int(t, "num_hidden_layers"), _int(t, "interleave_moe_layer_step", 1)
    moe_layers = set(t.get("moe_layers") or range(step - 1, count, step))
    interval, chunk = _int(t, "no_rope_layer_interval", 4), t.get("attention_chunk_size")
    full, chunked = _gqa(t), _gqa(t, window=int(chunk)) if chunk else _gqa(t)
    kinds = layer_kinds(t, count, lambda i: "chunked_attention" if (i + 1) % interval and chunk else "full_attention")
    moe = _experts(t, width_key="intermediate_size", experts_key="num_local_experts",
                   shared=_int(t, "intermediate_size"))
    dense = _dense(_int(t, "intermediate_size_mlp"))
    layers = [(full if kind == "full_attention" else chunked, moe if i in moe_layers else dense, 2)
              for i, kind in enumerate(kinds)]
    tower = towers.llama4_tower(config, _int(t, "hidden_size")) if _wrapped(config) else 0
    return _layout(config, t, layers, tower=tower)


# ---------------------------------------------------------------- DeepSeek-V3 and the MoEs built like it
def _mla(t: Config, **extra: Any) -> Attention:
    heads, rope = _int(t, "num_attention_heads"), _int(t, "qk_rope_head_dim")
    return Attention("mla", heads, heads, _int(t, "qk_nope_head_dim") + rope, _int(t, "v_head_dim"),
                     q_lora_rank=int(t.get("q_lora_rank") or 0), kv_lora_rank=_int(t, "kv_lora_rank"), rope_dim=rope,
                     bias="all" if t.get("attention_bias") else "none", **extra)


def _deepseek_moe(t: Config) -> FeedForward:
    width = _int(t, "moe_intermediate_size")
    return FeedForward(width, gated=True, experts=_int(t, "n_routed_experts"), top_k=_int(t, "num_experts_per_tok"),
                       shared_width=width * _int(t, "n_shared_experts", 0))


def _first_dense(t: Config, attention: Attention) -> list[Layer]:
    """The first ``first_k_dense_replace`` layers run a dense MLP, the rest DeepSeek-style MoE."""
    count, dense_count = _int(t, "num_hidden_layers"), _int(t, "first_k_dense_replace", 0)
    dense, moe = _dense(_int(t, "intermediate_size")), _deepseek_moe(t)
    return [(attention, dense if i < dense_count else moe, 2) for i in range(count)]


def deepseek_v3(config: Config) -> Layout:
    """DeepSeek-V3/R1 and Kimi-K2 (kimi_k2 is deepseek_v3): MLA, first dense layers, routed + shared experts; the
    MTP layers (num_nextn_predict_layers) sit in the checkpoint but not in the model transformers builds."""
    t = text_config(config)
    layers = _first_dense(t, _mla(t))
    tower = towers.moonvit_tower(config, _int(t, "hidden_size")) if config.get("model_type") == "kimi_k25" else 0
    return _layout(config, t, layers, tower=tower, mtp_layers=_int(t, "num_nextn_predict_layers", 0))


def glm_moe_dsa(config: Config) -> Layout:
    """GLM-5: DeepSeek-V3's MLA and MoE plus the DSA lightning indexer on each layer: the indexer picks index_topk
    tokens for each query to attend, and caches one key of index_head_dim per token."""
    t = config
    attention = _mla(t, indexer_heads=_int(t, "index_n_heads"), indexer_dim=_int(t, "index_head_dim"),
                     selected=_int(t, "index_topk"))
    layers = _first_dense(t, attention)
    types = t.get("mlp_layer_types")
    if isinstance(types, list) and len(types) == len(layers):
        dense, moe = _dense(_int(t, "intermediate_size")), _deepseek_moe(t)
        layers = [(attention, dense if kind == "dense" else moe, 2) for kind in types]
    return _layout(config, t, layers, mtp_layers=_int(t, "num_nextn_predict_layers", 0))


def glm4_moe(config: Config) -> Layout:
    """GLM-4.5: GQA with biased q/k/v (o_proj unbiased) and optional per-head q/k norm, DeepSeek-V3's MoE."""
    t = config
    attention = _gqa(t, bias="qkv" if t.get("attention_bias") else "none",
                     qk_norm="head" if t.get("use_qk_norm") else "none")
    return _layout(config, t, _first_dense(t, attention), mtp_layers=_int(t, "num_nextn_predict_layers", 0))


def minimax_m2(config: Config) -> Layout:
    """MiniMax-M2/M2.5: GQA with q/k RMSNorm over the whole projection, an MoE block in every layer."""
    t = config
    attention = _gqa(t, qk_norm="width" if t.get("use_qk_norm", True) else "none")
    moe = _experts(t, width_key="intermediate_size", experts_key="num_local_experts")
    return _layout(config, t, [(attention, moe, 2)] * _int(t, "num_hidden_layers"))


LAYOUTS: Mapping[str, Callable[[Config], Layout]] = {
    "qwen3": qwen3, "qwen3_moe": qwen3_moe, "qwen3_next": qwen3_next, "qwen3_5": qwen3_5, "qwen3_5_moe": qwen3_5,
    "qwen3_5_text": qwen3_5, "qwen3_5_moe_text": qwen3_5, "qwen2_5_vl": qwen2_5_vl,
    "deepseek_v3": deepseek_v3, "kimi_k2": deepseek_v3, "kimi_k25": deepseek_v3, "glm_moe_dsa": glm_moe_dsa,
    "glm4_moe": glm4_moe, "minimax_m2": minimax_m2, "gpt_oss": gpt_oss, "llama4": llama4, "llama4_text": llama4,
    "gemma3": gemma3, "gemma3_text": gemma3, "mistral3": mistral3, "ministral": ministral, "ministral3": ministral,
    "olmo2": olmo2, "olmo3": olmo2,
}
"""model_type -> layout reader for the families counted block by block."""
