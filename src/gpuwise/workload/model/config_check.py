"""Validate the ``config.json`` keys gpuwise reads before any counter runs: type, range, consistency, cost.

A config arrives from a file, the hub or an HTTP body; each key the counters or the architecture read is checked
here once, so that nothing downstream meets a string where it expects a size, a negative window, a ``"no"`` that
reads as true, more experts per token than experts, or a depth list that would loop for ever.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuwise.errors import ConfigError
from gpuwise.safe_io import excerpt

SIZE_MAX = 10**9  # no width, vocabulary or position count of a real model reaches a billion
LAYERS_MAX = 10_000  # the deepest published transformers have a few hundred blocks
EXPERTS_MAX = 100_000
RESNET_BLOCKS_MAX = 10_000
PARAMS_MAX = 10**14  # ten times the largest published model; a count beyond is a typo or an attack

_LAYER_KEYS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers", "num_decoder_layers", "depth",
               "first_k_dense_replace", "mtp_num_hidden_layers", "num_nextn_predict_layers", "vt_num_hidden_layers")
_EXPERT_KEYS = ("num_local_experts", "num_experts", "num_experts_per_tok", "n_routed_experts", "n_shared_experts")
_SIZE_KEYS = (
    "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size", "vocab_size",
    "n_embd", "n_head", "n_head_kv", "n_inner", "num_heads", "num_kv_heads", "d_model", "d_ff", "d_kv", "ffn_dim",
    "ffn_hidden_size", "embedding_size", "moe_intermediate_size", "shared_expert_intermediate_size",
    "decoder_sparse_step", "max_position_embeddings", "n_positions", "max_seq_len", "type_vocab_size", "num_labels",
    "num_channels", "image_size", "patch_size", "word_embed_proj_dim", "relative_attention_num_buckets",
    "num_ln_in_parallel_attn", "n_heads",
    # 2025-2026 decoders (workload/model/families.py)
    "linear_num_value_heads", "linear_num_key_heads", "linear_key_head_dim", "linear_value_head_dim",
    "linear_conv_kernel_dim", "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
    "index_n_heads", "index_head_dim", "index_topk", "intermediate_size_mlp", "attention_chunk_size",
    "full_attention_interval", "sliding_window_pattern", "interleave_moe_layer_step", "no_rope_layer_interval",
    # vision towers
    "out_hidden_size", "spatial_merge_size", "temporal_patch_size", "num_position_embeddings", "in_chans",
    "in_channels", "projector_input_dim", "projector_output_dim", "vision_output_dim", "vt_hidden_size",
    "vt_intermediate_size", "mm_hidden_size", "init_pos_emb_height", "init_pos_emb_width",
)
_MAY_BE_ZERO = {"num_key_value_heads", "num_local_experts", "num_experts", "num_experts_per_tok", "type_vocab_size",
                "shared_expert_intermediate_size", "num_labels", "n_inner", "n_head_kv", "num_kv_heads", "head_dim",
                "embedding_size", "word_embed_proj_dim", "d_kv", "q_lora_rank", "n_shared_experts",
                "first_k_dense_replace", "mtp_num_hidden_layers", "num_nextn_predict_layers", "index_n_heads",
                "index_head_dim"}
_BOOL_KEYS = ("tie_word_embeddings", "attention_bias", "mlp_bias", "use_sliding_window", "new_decoder_architecture",
              "multi_query", "bias", "enable_bias", "do_layer_norm_before", "no_bias", "qkv_bias", "is_gated_act",
              "downsample_in_first_stage", "_remove_final_layer_norm", "is_encoder_decoder")
_FRACTION_KEYS = ("attention_probs_dropout_prob", "attention_dropout", "attn_pdrop", "dropout_rate",
                  "hidden_dropout_prob", "hidden_dropout", "resid_pdrop", "dropout")
_TEXT_KEYS = ("model_type", "feed_forward_proj", "layer_type", "_name_or_path", "_class_name")
_NAME_LISTS = ("layer_types", "mlp_layer_types")  # per layer: "full_attention", "sliding_attention", "dense", ...
_INDEX_LISTS = ("mlp_only_layers", "moe_layers", "merge_kernel_size")
_NESTED = ("text_config", "vision_config")  # multimodal wrappers: each sub-config is checked like the top level


def _whole(value: object) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and value.is_integer())


def _fail(name: str, key: str, expected: str, value: object) -> ConfigError:
    return ConfigError(f"{name}: config.json {key!r} must be {expected}, got {excerpt(value, 40)}")


def _check_numbers(name: str, config: Mapping[str, Any]) -> None:
    for keys, high in ((_SIZE_KEYS, SIZE_MAX), (_LAYER_KEYS, LAYERS_MAX), (_EXPERT_KEYS, EXPERTS_MAX)):
        for key in keys:
            value = config.get(key)
            if value is None:
                continue
            low = 0 if key in _MAY_BE_ZERO else 1
            if not _whole(value) or not low <= value <= high:
                raise _fail(name, key, f"a whole number from {low} to {high:,}", value)
    for key in _FRACTION_KEYS:
        value = config.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not 0 <= value <= 1):
            raise _fail(name, key, "a probability from 0 to 1", value)
    ratio = config.get("expansion_ratio")
    if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1e3):
        raise _fail(name, "expansion_ratio", "a number from 0 to 1,000", ratio)


def _check_kinds(name: str, config: Mapping[str, Any]) -> None:
    for key in _BOOL_KEYS:
        if config.get(key) is not None and not isinstance(config[key], bool):
            raise _fail(name, key, "true or false", config[key])
    for key in _TEXT_KEYS:
        if config.get(key) is not None and (not isinstance(config[key], str) or len(config[key]) > 300):
            raise _fail(name, key, "a short text", config[key])
    architectures = config.get("architectures")
    if architectures is not None and (not isinstance(architectures, list) or len(architectures) > 16 or not all(
            isinstance(a, str) and len(a) <= 200 for a in architectures)):
        raise _fail(name, "architectures", "a list of class names", architectures)
    labels = config.get("id2label")
    if labels is not None and (not isinstance(labels, dict) or len(labels) > 1_000_000):
        raise _fail(name, "id2label", "a mapping of label ids to names", labels)
    attn = config.get("attn_config")
    if attn is not None and (not isinstance(attn, dict) or not isinstance(attn.get("alibi", False), bool)):
        raise _fail(name, "attn_config", "a mapping whose 'alibi' is true or false", attn)


def _check_attention(name: str, config: Mapping[str, Any]) -> None:
    window = config.get("sliding_window")
    if window is not None and (not _whole(window) or not 1 <= window <= SIZE_MAX):
        raise _fail(name, "sliding_window", f"null or a whole number of tokens from 1 to {SIZE_MAX:,}", window)
    heads = config.get("num_attention_heads")
    kv = config.get("num_key_value_heads")
    if heads and kv and (kv > heads or heads % kv):
        raise ConfigError(f"{name}: config.json num_key_value_heads {kv} must divide num_attention_heads {heads} "
                          "(grouped-query attention shares each KV head among whole groups)")


def _check_experts(name: str, config: Mapping[str, Any]) -> None:
    experts = config.get("num_local_experts") or config.get("num_experts") or config.get("n_routed_experts") or 0
    top = config.get("num_experts_per_tok")
    if experts >= 1 and top is not None and not 1 <= top <= experts:
        raise ConfigError(f"{name}: config.json num_experts_per_tok {top} must be from 1 to the {experts} experts")
    for key in _INDEX_LISTS:
        values = config.get(key)
        if values is not None and (not isinstance(values, list) or len(values) > LAYERS_MAX or not all(
                _whole(n) and 0 <= n < LAYERS_MAX for n in values)):
            raise _fail(name, key, "a list of layer indices", values)
    for key in _NAME_LISTS:
        values = config.get(key)
        if values is not None and (not isinstance(values, list) or len(values) > LAYERS_MAX or not all(
                isinstance(v, str) and len(v) <= 64 for v in values)):
            raise _fail(name, key, "a list of layer kinds, one per layer", values)


def _check_resnet(name: str, config: Mapping[str, Any]) -> None:
    sizes, depths = config.get("hidden_sizes"), config.get("depths")
    for key, values, high in (("hidden_sizes", sizes, 1_000_000), ("depths", depths, RESNET_BLOCKS_MAX)):
        if values is not None and (not isinstance(values, list) or not 1 <= len(values) <= 16 or not all(
                _whole(v) and 1 <= v <= high for v in values)):
            raise _fail(name, key, f"a list of 1 to 16 whole numbers from 1 to {high:,}", values)
    if isinstance(depths, list) and sum(depths) > RESNET_BLOCKS_MAX:
        raise ConfigError(f"{name}: config.json depths sum to {sum(depths):,} blocks; no ResNet has more than "
                          f"{RESNET_BLOCKS_MAX:,}")
    if isinstance(sizes, list) and isinstance(depths, list) and len(sizes) != len(depths):
        raise ConfigError(f"{name}: config.json hidden_sizes ({len(sizes)} stages) and depths ({len(depths)}) "
                          "must have one entry per stage")


_CONV_NUMBERS = {"depth_multiple": (0.01, 10.0), "width_multiple": (0.01, 10.0), "max_channels": (8, 65_536),
                 "num_classes": (1, 100_000), "base_channels": (1, 16_384), "depth": (1, 10), "in_channels": (1, 256)}
"""The scaling keys of the convolutional families (workload/model/convnets.py) and their sane ranges."""


def _check_convnet(name: str, config: Mapping[str, Any]) -> None:
    if config.get("model_type") not in ("yolov8", "unet"):
        return
    for key, (low, high) in _CONV_NUMBERS.items():
        value = config.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not low <= value <= high):
            raise _fail(name, key, f"a number from {low:g} to {high:,}", value)
    if config.get("model_type") == "yolov8" and any(config.get(k) is None for k in
                                                     ("depth_multiple", "width_multiple", "max_channels")):
        raise ConfigError(f"{name}: a yolov8 config names depth_multiple, width_multiple and max_channels (its scale "
                          "row of yolov8.yaml)")


def check_config(name: str, config: Mapping[str, Any]) -> None:
    """Raise a one-line ConfigError naming the first key that no real model of its family could have."""
    for key in _NESTED:
        nested = config.get(key)
        if nested is not None:
            if not isinstance(nested, Mapping):
                raise _fail(name, key, "a mapping (the sub-model's config)", nested)
            _check_one(f"{name} {key}", nested)
    _check_one(name, config)


def _check_one(name: str, config: Mapping[str, Any]) -> None:
    _check_kinds(name, config)
    _check_numbers(name, config)
    _check_attention(name, config)
    _check_experts(name, config)
    _check_resnet(name, config)
    _check_convnet(name, config)


def check_total(name: str, total: int) -> None:
    if not 0 < total <= PARAMS_MAX:
        raise ConfigError(f"{name}: config.json describes {total:,} parameters; no model has more than "
                          f"{PARAMS_MAX:,}")
