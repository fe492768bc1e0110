"""A model's architecture from its GGUF file alone: the header's metadata translated back into the config.json keys
of the matching Hugging Face family, then read as any config.json is (architecture.py), with the parameter count
taken from the tensors themselves and the weights as the file stores them.

The translation inverts llama.cpp's converter (ggml-org/llama.cpp@a458664f ``convert_hf_to_gguf.py``,
``TextModel.set_gguf_parameters`` and the families' overrides), which writes, for architecture ``{a}``:

    {a}.block_count                   <- num_hidden_layers
    {a}.context_length                <- max_position_embeddings
    {a}.embedding_length              <- hidden_size
    {a}.feed_forward_length           <- intermediate_size
    {a}.attention.head_count          <- num_attention_heads
    {a}.attention.head_count_kv       <- num_key_value_heads (a per-layer array in some families)
    {a}.attention.key_length          <- head_dim (DeepSeek-2's MLA: key_length_mla, value_length_mla)
    {a}.attention.layer_norm_rms_epsilon <- rms_norm_eps
    {a}.attention.sliding_window      <- sliding_window
    {a}.attention.kv_lora_rank, .q_lora_rank, .rope.dimension_count <- MLA's ranks and qk_rope_head_dim
    {a}.expert_count, .expert_used_count, .expert_shared_count       <- experts, top-k, shared experts
    {a}.expert_feed_forward_length, .expert_shared_feed_forward_length <- moe_intermediate_size, shared width
    {a}.leading_dense_block_count     <- first_k_dense_replace
    tokenizer.ggml.tokens             <- the vocabulary, padded to vocab_size (its length is vocab_size)
and leaves out ``output.weight`` when the embeddings are tied.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from gpuwise.errors import ConfigError
from gpuwise.workload.model.architecture import Architecture, from_config
from gpuwise.workload.model.checkpoint import WeightFormat
from gpuwise.workload.weights_gguf import GgufHeader, Strings, TensorInfo, by_type

Config = dict[str, Any]
PARAMS_TOLERANCE = 0.02  # tensors' elements vs the translated config's count: beyond this the translation is wrong
# llama.cpp's LLAMA_FTYPE (include/llama.h) -> gpuwise's --quant, for the file types gpuwise models by name
FILE_TYPES = {0: "fp32", 1: "fp16", 7: "gguf-q8_0", 15: "gguf-q4_k_m", 32: "bf16"}


class _Meta:
    """The metadata of one architecture: ``get("attention.head_count")`` reads ``{arch}.attention.head_count``."""

    def __init__(self, header: GgufHeader, arch: str) -> None:
        self.values, self.arch, self.label = header.values, arch, header.label

    def get(self, key: str) -> Any:
        return self.values.get(f"{self.arch}.{key}")

    def need(self, key: str) -> int:
        value = self.number(key)
        if value is None:
            raise ConfigError(f"{self.label}: the GGUF metadata lacks {self.arch}.{key} (a positive number); not a "
                              "complete llama.cpp model file")
        return value

    def number(self, key: str) -> int | None:
        value = self.get(key)
        if isinstance(value, list):  # one value per layer: gpuwise's families hold one per model
            distinct = {v for v in value if v}
            if len(distinct) > 1:
                raise ConfigError(f"{self.label}: {self.arch}.{key} differs by layer ({sorted(distinct)[:6]}); "
                                  "gpuwise models one value per model for this architecture")
            value = distinct.pop() if distinct else None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 2**53:
            return None
        return int(value)


def _dense(m: _Meta, tensors: Mapping[str, TensorInfo]) -> Config:
    """The keys every decoder family shares (TextModel.set_gguf_parameters)."""
    hidden, heads = m.need("embedding_length"), m.need("attention.head_count")
    config: Config = {
        "hidden_size": hidden, "num_hidden_layers": m.need("block_count"),
        "num_attention_heads": heads, "num_key_value_heads": m.number("attention.head_count_kv") or heads,
        "head_dim": m.number("attention.key_length") or hidden // heads,
        "intermediate_size": m.number("feed_forward_length"), "max_position_embeddings": m.number("context_length"),
        "vocab_size": _vocab(m, tensors, hidden), "tie_word_embeddings": "output.weight" not in tensors,
        "sliding_window": m.number("attention.sliding_window"),
    }
    if m.get("attention.layer_norm_rms_epsilon") is not None:
        config["rms_norm_eps"] = float(m.get("attention.layer_norm_rms_epsilon"))
    return config


def _vocab(m: _Meta, tensors: Mapping[str, TensorInfo], hidden: int) -> int:
    tokens = m.values.get("tokenizer.ggml.tokens")
    if isinstance(tokens, Strings) and tokens.items:
        return tokens.items
    listed = m.number("vocab_size")
    if listed:
        return listed
    embedding = tensors.get("token_embd.weight")
    if embedding is None:
        raise ConfigError(f"{m.label}: no tokenizer.ggml.tokens, {m.arch}.vocab_size or token_embd.weight: the "
                          "vocabulary's size is unknown")
    return embedding.elements // hidden


def _experts(m: _Meta, config: Config, *, count: str, width: str | None = "moe_intermediate_size") -> Config:
    config[count] = m.need("expert_count")
    config["num_experts_per_tok"] = m.need("expert_used_count")
    if width:
        config[width] = m.need("expert_feed_forward_length")
    return config


def _llama(m: _Meta, t: Mapping[str, TensorInfo]) -> Config:
    """llama.cpp writes Llama, Mistral and Mixtral as ``llama``; experts make it Mixtral (LlamaModel)."""
    config = _dense(m, t)
    if not m.number("expert_count"):
        return {**config, "model_type": "llama"}
    config["intermediate_size"] = m.number("expert_feed_forward_length") or config["intermediate_size"]
    return {**_experts(m, config, count="num_local_experts", width=None), "model_type": "mixtral"}


def _qwen2_moe(m: _Meta, t: Mapping[str, TensorInfo]) -> Config:
    config = _experts(m, _dense(m, t), count="num_experts")
    config["shared_expert_intermediate_size"] = m.number("expert_shared_feed_forward_length") or 0
    return {**config, "model_type": "qwen2_moe"}


def _gemma(model_type: str) -> Callable[[_Meta, Mapping[str, TensorInfo]], Config]:
    def build(m: _Meta, t: Mapping[str, TensorInfo]) -> Config:
        return {**_dense(m, t), "model_type": model_type, "tie_word_embeddings": True}
    return build


def _gpt_oss(m: _Meta, t: Mapping[str, TensorInfo]) -> Config:
    config = _experts(m, _dense(m, t), count="num_local_experts", width="intermediate_size")
    return {**config, "model_type": "gpt_oss", "sliding_window": m.number("attention.sliding_window") or 128}


def _deepseek2(m: _Meta, t: Mapping[str, TensorInfo]) -> Config:
    """DeepSeek-V2/V3 (DeepseekV2Model): MLA ranks; key_length_mla/value_length_mla where the file has them (the
    converter writes key_length as kv_lora_rank + rope there), else key_length/value_length."""
    config = _experts(m, _dense(m, t), count="n_routed_experts")
    rope = m.need("rope.dimension_count")
    key = m.number("attention.key_length_mla") or m.need("attention.key_length")
    config.update(model_type="deepseek_v3", kv_lora_rank=m.need("attention.kv_lora_rank"),
                  q_lora_rank=m.number("attention.q_lora_rank"), qk_rope_head_dim=rope, qk_nope_head_dim=key - rope,
                  v_head_dim=m.number("attention.value_length_mla") or m.number("attention.value_length"),
                  n_shared_experts=m.number("expert_shared_count") or 0,
                  first_k_dense_replace=m.number("leading_dense_block_count") or 0)
    return config


def _plain(model_type: str, moe: bool = False) -> Callable[[_Meta, Mapping[str, TensorInfo]], Config]:
    def build(m: _Meta, t: Mapping[str, TensorInfo]) -> Config:
        config = _experts(m, _dense(m, t), count="num_experts") if moe else _dense(m, t)
        return {**config, "model_type": model_type}
    return build


FAMILIES: dict[str, Callable[[_Meta, Mapping[str, TensorInfo]], Config]] = {
    # llama.cpp's general.architecture (gguf-py constants MODEL_ARCH_NAMES) -> the config.json it came from
    "llama": _llama, "mistral": _plain("mistral"), "qwen2": _plain("qwen2"), "qwen2moe": _qwen2_moe,
    "qwen3": _plain("qwen3"), "qwen3moe": _plain("qwen3_moe", moe=True), "phi3": _plain("phi3"),
    "gemma": _gemma("gemma"), "gemma2": _gemma("gemma2"), "gemma3": _gemma("gemma3_text"), "gpt-oss": _gpt_oss,
    "deepseek2": _deepseek2,
}


def gguf_config(header: GgufHeader, tensors: Sequence[TensorInfo]) -> Config:
    """The config.json keys of the Hugging Face family a GGUF file's metadata describes."""
    arch = header.values.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise ConfigError(f"{header.label}: the GGUF metadata has no general.architecture; not a llama.cpp model "
                          "file")
    build = FAMILIES.get(arch)
    if build is None:
        raise ConfigError(f"{header.label}: GGUF architecture {arch[:40]!r} is not one gpuwise reads; supported: "
                          f"{', '.join(FAMILIES)}")
    config = build(_Meta(header, arch), {info.name: info for info in tensors})
    return {key: value for key, value in config.items() if value is not None}


def _weight_format(tensors: Sequence[TensorInfo], file_type: Any, elements: int) -> WeightFormat:
    """The job's --quant for this file (llama.cpp's file type when gpuwise models it by name, else the GGUF format
    nearest its bits per weight) and the exact bytes the job holds."""
    totals = by_type(tensors)
    stored = sum(totals.values())
    bits = 8 * stored / elements
    quant = FILE_TYPES.get(file_type) if isinstance(file_type, int) else None
    if quant is None:
        quant = "gguf-q4_k_m" if bits < 6.5 else "gguf-q8_0" if bits < 12 else "fp16"
    mix = ", ".join(f"{name} {share / stored:.0%}" for name, share in sorted(totals.items(), key=lambda kv: -kv[1])[:4])
    return WeightFormat(quant, "all", f"the GGUF file's tensors ({mix}; {bits:.2f} bits per weight)", bits=bits,
                        exact_bytes=float(stored))


def architecture_from_gguf(parts: Sequence[GgufHeader], *, name: str, source: str) -> Architecture:
    """The architecture of a GGUF model (its split parts in order: the first holds the metadata), counted from the
    translated config and checked against the tensors' own element count, which it then carries."""
    tensors = [info for part in parts for info in part.tensors]
    if not any(info.nbytes for info in tensors):
        raise ConfigError(f"{parts[0].label}: the GGUF file lists no tensors with data; give a model file")
    config = gguf_config(parts[0], tensors)
    arch = from_config(config, name=name, source=source)
    counted = sum(info.elements for info in tensors)
    formula = arch.params.total
    if abs(counted - formula) > PARAMS_TOLERANCE * formula:
        raise ConfigError(f"{parts[0].label}: its tensors hold {counted:,} parameters but its metadata describes a "
                          f"{config['model_type']} model of {formula:,}; gpuwise's reading of this "
                          f"{parts[0].values.get('general.architecture')} file is incomplete")
    params = replace(arch.params, other=arch.params.other + counted - formula,
                     active=arch.params.active + counted - formula)
    checkpoint = _weight_format(tensors, parts[0].values.get("general.file_type"), counted)
    note = (f"GGUF {parts[0].values.get('general.architecture')} -> {config['model_type']} (llama.cpp's "
            f"converter's keys), {len(tensors):,} tensors in {len(parts)} file(s), {counted:,} parameters counted "
            f"from them ({formula:,} from the metadata), {checkpoint.exact_bytes:,.0f} bytes")
    return replace(arch, params=params, checkpoint=checkpoint, resolved_as=note)
