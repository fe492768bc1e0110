"""A model's shape, normalised from a Hugging Face ``config.json`` of any supported family.

The memory and speed estimators read only this dataclass, never the raw config: one place knows
that GPT-2 calls the hidden size ``n_embd``, T5 ``d_model`` and MPT ``d_model`` with ``n_heads``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from gpuwise.errors import ConfigError
from gpuwise.safe_io import excerpt
from gpuwise.workload.exact import transformers_knows
from gpuwise.workload.model.blocks import Attention, Block, FeedForward, split_windows, uniform
from gpuwise.workload.model.checkpoint import WeightFormat, from_quantization_config
from gpuwise.workload.model.config_check import check_config, check_total
from gpuwise.workload.model.counts import ParamCount, need
from gpuwise.workload.model.families import LAYOUTS, text_config
from gpuwise.workload.model.layer_params import count_layout
from gpuwise.workload.model.module_tree import derive
from gpuwise.workload.model.params import COUNTERS, count_params
from gpuwise.workload.model.sam import SAM_FAMILY, sam_blocks, sam_shape

Kind = Literal["decoder", "encoder", "encoder-decoder", "vision", "cnn", "unet"]

SUPPORTED = tuple(sorted({*COUNTERS, *LAYOUTS}))  # every model_type gpuwise counts from its config alone
_GATED_FAMILIES = {"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "gemma", "gemma2", "phi3"}
_ENCODERS = {"bert", "roberta"}
CONV_FAMILIES = ("resnet", "yolov8", "unet")  # convolutional networks: kind "cnn" (estimate/speed/convolutions.py)


@dataclass(frozen=True)
class Architecture:
    """What the estimators need to know about a model; counts are exact, shapes as in the config."""

    name: str
    family: str
    kind: Kind
    params: ParamCount
    hidden: int
    layers: int  # transformer blocks a token passes (encoder + decoder for T5)
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int  # MLP width per expert
    gated_mlp: bool
    vocab: int
    max_positions: int | None
    lm_head: bool = False  # predicts a vocabulary distribution per position (the logits tensor)
    experts: int = 0
    experts_per_token: int = 0
    decoder_layers: int = 0  # layers that keep a KV cache when generating
    sliding_window: int | None = None
    window_layers: int | None = None  # decoder layers that use the sliding window (None: all of them)
    shared_expert_intermediate: int = 0  # Qwen2-MoE: a dense gated MLP every token runs beside its routed experts
    attention_dropout: float = 0.0
    hidden_dropout: float = 0.0
    source: str = ""
    config: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    blocks: tuple[Block, ...] = ()  # the layers as runs of identical blocks (workload/model/blocks.py)
    checkpoint: WeightFormat | None = None  # the weights' format when not 16-bit (workload/model/checkpoint.py)
    resolved_as: str = ""  # how a name typed by the user became this model (a variant suffix removed ...)

    @property
    def total_params(self) -> int:
        return self.params.total

    @property
    def active_params(self) -> int:
        return self.params.active

    @property
    def rms_norm(self) -> bool:
        """Its norms are RMSNorm (transformers' LlamaRMSNorm and copies; T5LayerNorm is one too), not LayerNorm:
        the config names rms_norm_eps, as every RMSNorm family's does."""
        text = self.config.get("text_config")
        keys = set(self.config) | (set(text) if isinstance(text, Mapping) else set())
        return "rms_norm_eps" in keys or self.family in ("t5", "mt5")

    @property
    def qk_norm(self) -> str:
        """A norm on queries and keys ("head", "width") in its softmax-attention blocks, else "none"."""
        return next((b.attention.qk_norm for b in self.blocks if b.attention.kind != "linear"), "none")

    @property
    def caching_blocks(self) -> tuple[Block, ...]:
        """The blocks whose layers keep a cache when the model generates (a decoder's, never an encoder's)."""
        return tuple(b for b in self.blocks if b.caches)


def _shape(config: Mapping[str, Any]) -> dict[str, Any]:
    family = str(config["model_type"])
    if family in ("gpt2",):
        h, a = int(need(config, "n_embd")), int(need(config, "n_head"))
        return dict(hidden=h, layers=int(need(config, "n_layer")), heads=a, kv_heads=a, head_dim=h // a,
                    intermediate=int(config.get("n_inner") or 4 * h), max_positions=config.get("n_positions"))
    if family == "mpt":
        h, a = int(need(config, "d_model")), int(need(config, "n_heads"))
        return dict(hidden=h, layers=int(need(config, "n_layers")), heads=a, kv_heads=a, head_dim=h // a,
                    intermediate=int(config.get("expansion_ratio", 4) * h), max_positions=config.get("max_seq_len"))
    if family in ("t5", "mt5"):
        enc = int(need(config, "num_layers"))
        dec = int(config.get("num_decoder_layers") or enc)
        a = int(need(config, "num_heads"))
        return dict(hidden=int(need(config, "d_model")), layers=enc + dec, heads=a, kv_heads=a,
                    head_dim=int(need(config, "d_kv")), intermediate=int(need(config, "d_ff")),
                    max_positions=config.get("n_positions"), decoder_layers=dec)
    h, a = int(need(config, "hidden_size")), int(need(config, "num_attention_heads", "n_head"))
    layers = int(need(config, "num_hidden_layers", "n_layer"))
    if family == "falcon":
        if config.get("new_decoder_architecture"):
            kv = int(need(config, "num_kv_heads", "n_head_kv"))
        else:
            kv = 1 if config.get("multi_query", True) else a
        return dict(hidden=h, layers=layers, heads=a, kv_heads=kv, head_dim=h // a,
                    intermediate=int(config.get("ffn_hidden_size") or 4 * h),
                    max_positions=config.get("max_position_embeddings"))
    if family == SAM_FAMILY:
        return sam_shape(config)
    if family == "vit":
        patches = (int(need(config, "image_size")) // int(need(config, "patch_size"))) ** 2
        return dict(hidden=h, layers=layers, heads=a, kv_heads=a, head_dim=h // a,
                    intermediate=int(need(config, "intermediate_size")), max_positions=patches + 1)
    intermediate = config.get("moe_intermediate_size") if family == "qwen2_moe" else None
    return dict(hidden=h, layers=layers, heads=a, kv_heads=int(config.get("num_key_value_heads") or a),
                head_dim=int(config.get("head_dim") or h // a),
                intermediate=int(intermediate or need(config, "intermediate_size", "ffn_dim")),
                max_positions=config.get("max_position_embeddings"))


def _kind(family: str) -> Kind:
    if family in _ENCODERS:
        return "encoder"
    if family in ("t5", "mt5"):
        return "encoder-decoder"
    if family in ("vit", SAM_FAMILY):
        return "vision"
    return "decoder"


def _has_lm_head(config: Mapping[str, Any], kind: Kind) -> bool:
    arch = str((config.get("architectures") or [""])[0])
    if kind == "encoder":
        return arch.endswith(("ForMaskedLM", "ForPreTraining", "ForCausalLM"))
    return kind in ("decoder", "encoder-decoder") and not arch.endswith(
        ("ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering"))


def _check_positive(name: str, shape: Mapping[str, Any]) -> None:
    for key in ("hidden", "layers", "heads", "kv_heads", "head_dim", "intermediate"):
        if int(shape[key]) <= 0:
            raise ConfigError(f"{name}: {key} must be positive, got {shape[key]}")


def _window_layers(family: str, decoder_layers: int) -> int | None:
    """Gemma 2 alternates local (sliding) and global attention, starting with a local layer (transformers
    modeling_gemma2: is_sliding = not layer_idx % 2); other families slide on every layer."""
    return (decoder_layers + 1) // 2 if family == "gemma2" else None


def from_config(config: Mapping[str, Any], *, name: str, source: str = "") -> Architecture:
    """Normalise a config.json mapping; raises ConfigError naming a missing or invalid key."""
    family = config.get("model_type")
    if not isinstance(family, str) or not family:
        raise ConfigError(f"{name}: config.json has no 'model_type'; supported: {', '.join(SUPPORTED)}")
    check_config(name, config)
    if family not in SUPPORTED:
        return _from_module_tree(config, family, name=name, source=source)
    if family in LAYOUTS:
        return _from_layout(config, name=name, source=source)
    try:
        params = count_params(config)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError) as exc:  # a shape no model has
        raise ConfigError(f"{name}: config.json does not describe a {family} model: {excerpt(str(exc), 80)}") from None
    check_total(name, params.total)
    if family in CONV_FAMILIES:
        return Architecture(name=name, family=family, kind="cnn", params=params, hidden=0, layers=0, heads=0,
                            kv_heads=0, head_dim=0, intermediate=0, gated_mlp=False, vocab=0,
                            max_positions=None, source=source, config=dict(config))
    try:
        shape = _shape(config)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError) as exc:
        raise ConfigError(f"{name}: config.json does not describe a {family} model: {excerpt(str(exc), 80)}") from None
    _check_positive(name, shape)
    kind = _kind(family)
    experts = int(config.get("num_local_experts") or config.get("num_experts") or 0)
    decoder_layers = int(shape.pop("decoder_layers", shape["layers"] if kind == "decoder" else 0))
    window = config.get("sliding_window") if config.get("use_sliding_window", True) else None
    arch = Architecture(
        name=name, family=family, kind=kind, params=params, lm_head=_has_lm_head(config, kind),
        gated_mlp=family in _GATED_FAMILIES or str(config.get("feed_forward_proj", "")).startswith("gated"),
        vocab=int(config.get("vocab_size") or 0), experts=experts if experts > 1 else 0,
        experts_per_token=int(config.get("num_experts_per_tok") or 0) if experts > 1 else 0,
        decoder_layers=decoder_layers, sliding_window=int(window) if window else None,
        window_layers=_window_layers(family, decoder_layers) if window else None, source=source,
        shared_expert_intermediate=int(config.get("shared_expert_intermediate_size") or 0) if experts > 1 else 0,
        attention_dropout=_first_float(config, "attention_probs_dropout_prob", "attention_dropout", "attn_pdrop",
                                       "dropout_rate"),
        hidden_dropout=_first_float(config, "hidden_dropout_prob", "hidden_dropout", "resid_pdrop", "dropout",
                                    "dropout_rate"),
        config=dict(config), **shape,
    )
    blocks = sam_blocks(config) if family == SAM_FAMILY else _uniform_blocks(arch)
    return replace(arch, blocks=blocks, checkpoint=from_quantization_config(config))


def _from_layout(config: Mapping[str, Any], *, name: str, source: str) -> Architecture:
    """A family read block by block (workload/model/families.py); the scalar fields summarise its main blocks: the
    softmax-attention block with most layers, and the MoE feed-forward part when there is one."""
    family = str(config["model_type"])
    try:
        layout = LAYOUTS[family](config)
        params = count_layout(layout)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, KeyError) as exc:
        raise ConfigError(f"{name}: config.json does not describe a {family} model: {excerpt(str(exc), 80)}") from None
    check_total(name, params.total)
    blocks, text = layout.blocks, text_config(config)
    if not blocks:
        raise ConfigError(f"{name}: config.json describes a {family} model with no layers")
    main = max(blocks, key=lambda b: (b.attention.kind != "linear", b.count)).attention
    ffn = next((b.ffn for b in blocks if b.ffn.experts), blocks[0].ffn)
    windowed = [b for b in blocks if b.attention.window]
    layers = sum(b.count for b in blocks)
    return Architecture(
        name=name, family=family, kind="decoder", params=params, hidden=layout.hidden, layers=layers,
        heads=main.heads, kv_heads=main.kv_heads, head_dim=main.head_dim, intermediate=ffn.width, gated_mlp=ffn.gated,
        vocab=layout.vocab, max_positions=text.get("max_position_embeddings"), lm_head=_has_lm_head(config, "decoder"),
        experts=ffn.experts, experts_per_token=ffn.top_k, decoder_layers=layers,
        sliding_window=windowed[0].attention.window if windowed else None,
        window_layers=sum(b.count for b in windowed) if windowed else None, shared_expert_intermediate=ffn.shared_width,
        attention_dropout=_first_float(text, "attention_dropout"), source=source, config=dict(config), blocks=blocks,
        checkpoint=from_quantization_config(config))


DERIVE_LAYERS_MAX = 1_000  # a meta-device build costs milliseconds per layer; no published model has more


def nearest_family(family: str) -> str | None:
    """The supported family whose name is closest (qwen3x -> qwen3), or None when none is close."""
    import difflib

    close = difflib.get_close_matches(family.lower(), SUPPORTED, n=1, cutoff=0.6)
    return close[0] if close else None


def _layer_counts(config: Mapping[str, Any], depth: int = 0) -> list[int]:
    """Every whole number under a key that counts layers or blocks (``num_hidden_layers``, ``encoder_layers``,
    ``depths`` lists ...), in the config and its sub-configs."""
    found: list[int] = []
    for key, value in config.items():
        if isinstance(value, Mapping) and depth < 3:
            found += _layer_counts(value, depth + 1)
        elif any(word in str(key) for word in ("layer", "depth", "blocks")):
            items = value if isinstance(value, list) else [value]
            found += [int(v) for v in items if isinstance(v, int) and not isinstance(v, bool) and v > 0]
    return found


def _from_module_tree(config: Mapping[str, Any], family: str, *, name: str, source: str) -> Architecture:
    """A model type with no closed form: transformers builds it on the meta device and the architecture is read
    from its modules (workload/model/module_tree.py); without the hf extra, or for a type transformers does not know,
    one line naming the nearest supported family."""
    nearest = nearest_family(family)
    refusal = (f"{name}: model_type {excerpt(family, 40)} has no closed form in gpuwise "
               + (f"(nearest supported family: {nearest})" if nearest else "(no supported family is close)"))
    known = transformers_knows(family)
    if known is None:
        raise ConfigError(refusal + "; pip install 'gpuwise[hf]' and torch to derive it from transformers' "
                                    "module tree")
    if not known:
        raise ConfigError(refusal + "; transformers does not know it either")
    deepest = max(_layer_counts(config), default=0)
    if deepest > DERIVE_LAYERS_MAX:
        raise ConfigError(f"{name}: {deepest:,} layers; gpuwise builds at most {DERIVE_LAYERS_MAX:,} per stack on the "
                          "meta device")
    try:
        arch = Architecture(**derive(config, name=name, source=source))
    except ConfigError:
        raise
    except Exception as exc:  # transformers rejects a config in many ways (ValueError, AttributeError, ...)
        raise ConfigError(f"{refusal}; transformers could not build it: {excerpt(str(exc), 100)}") from None
    check_total(name, arch.total_params)
    return replace(arch, checkpoint=from_quantization_config(config))


def _uniform_blocks(arch: Architecture) -> tuple[Block, ...]:
    """The blocks of a family whose layers are all alike (the window on some of them aside): its decoder layers
    cache, an encoder's (BERT, ViT, T5's encoder) do not."""
    attention = Attention("gqa", arch.heads, arch.kv_heads, arch.head_dim, arch.head_dim)
    ffn = FeedForward(arch.intermediate, arch.gated_mlp, arch.experts, arch.experts_per_token,
                      arch.shared_expert_intermediate)
    encoder = arch.layers - arch.decoder_layers
    blocks = (Block(encoder, attention, ffn, caches=False),) if encoder else ()
    if not arch.decoder_layers:
        return blocks
    if arch.sliding_window:
        windowed = Attention("gqa", arch.heads, arch.kv_heads, arch.head_dim, arch.head_dim, window=arch.sliding_window)
        count = arch.window_layers if arch.window_layers is not None else arch.decoder_layers
        return blocks + split_windows(arch.decoder_layers, count, windowed, ffn)
    return blocks + uniform(arch.decoder_layers, attention, ffn)


def _first_float(config: Mapping[str, Any], *keys: str) -> float:
    for key in keys:
        value = config.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    return 0.0


def from_param_count(*, name: str, family: str, kind: Kind, total: int, source: str) -> Architecture:
    """A model gpuwise cannot count from its config (a diffusion UNet): only its published total is known."""
    params = ParamCount(embedding=0, linear=0, head=0, other=total, active=total, linears=())
    return Architecture(name=name, family=family, kind=kind, params=params, hidden=0, layers=0, heads=0, kv_heads=0,
                        head_dim=0, intermediate=0, gated_mlp=False, vocab=0, max_positions=None, source=source)
