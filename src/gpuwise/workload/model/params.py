"""Exact parameter counts from a Hugging Face ``config.json``, one function per model family.

Each function returns the parameters of the module the config's ``architectures[0]`` names (the
backbone plus its head), split into the parts the memory model needs:

    embedding  token (+ position, token-type, patch) embeddings
    linear     weights of the linear layers inside the blocks (what LoRA adapts and 4-bit formats quantize)
    head       an untied output head (LM head or classifier weight); 0 when tied to the embedding
    other      norms, biases, routers, convolutions, relative-position tables
    total      the sum;  active = total minus the experts a token does not use (MoE)

Symbols: h hidden size, L layers, a attention heads, k key/value heads, d head dim, i MLP width,
V vocabulary, E experts, top experts used per token. Worked check (Llama-3-8B: h 4096, L 32,
a 32, k 8, d 128, i 14336, V 128256, untied): per layer 4096*(4096+2*1024+4096) + 3*4096*14336
+ 2*4096 = 218,112,000; x 32 + 2*128256*4096 + 4096 = 8,030,261,248, the published count.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from gpuwise.errors import ConfigError
from gpuwise.workload.model.convnets import NETWORKS
from gpuwise.workload.model.counts import Config, Linear, ParamCount, need
from gpuwise.workload.model.sam import sam_params


def _architecture(config: Config) -> str:
    archs = config.get("architectures") or [""]
    return str(archs[0])


def _num_labels(config: Config) -> int:
    labels = config.get("id2label")
    return len(labels) if isinstance(labels, dict) and labels else int(config.get("num_labels", 2))


def _linear_total(linears: tuple[Linear, ...]) -> int:
    return sum(x.d_in * x.d_out * x.count * x.layers for x in linears)


# ---------------------------------------------------------------- decoder-only, Llama-like
_LLAMA_LIKE_DEFAULT_TIED = {"gemma": True, "gemma2": True}
_QKV_BIAS_FAMILIES = {"qwen2", "qwen2_moe"}


def llama_like(config: Config) -> ParamCount:
    """llama, mistral, mixtral, qwen2, qwen2_moe, gemma, gemma2, phi3 (fused qkv / gate_up count the same)."""
    family = config["model_type"]
    h = int(need(config, "hidden_size"))
    n_layers = int(need(config, "num_hidden_layers"))
    a = int(need(config, "num_attention_heads"))
    k = int(config.get("num_key_value_heads") or a)
    d = int(config.get("head_dim") or h // a)
    vocab = int(need(config, "vocab_size"))
    tied = bool(config.get("tie_word_embeddings", _LLAMA_LIKE_DEFAULT_TIED.get(family, False)))
    attn_bias = bool(config.get("attention_bias", False))
    qkv_bias = attn_bias or family in _QKV_BIAS_FAMILIES
    mlp_bias = bool(config.get("mlp_bias", False))

    attn = tuple(Linear(n, x, y, "attn", 1, n_layers) for n, x, y in
                 (("q_proj", h, a * d), ("k_proj", h, k * d), ("v_proj", h, k * d), ("o_proj", a * d, h)))
    bias = n_layers * ((a + 2 * k) * d * qkv_bias + h * attn_bias)
    norms_per_layer = 4 if family == "gemma2" else 2
    other = bias + (norms_per_layer * n_layers + 1) * h

    mlp, inactive, mlp_other = _mlp_linears(config, h, n_layers, mlp_bias)
    linears = attn + mlp
    linear = _linear_total(linears)
    embedding = vocab * h
    head = 0 if tied else vocab * h
    total_other = other + mlp_other
    return ParamCount(embedding, linear, head, total_other,
                      embedding + linear + head + total_other - inactive, linears)


def _mlp_linears(config: Config, h: int, n_layers: int, mlp_bias: bool) -> tuple[tuple[Linear, ...], int, int]:
    """MLP linears (dense, Mixtral experts or Qwen2-MoE experts + shared expert), inactive params, other."""
    family = config["model_type"]
    i = int(need(config, "intermediate_size"))
    experts = int(config.get("num_local_experts") or config.get("num_experts") or 0)
    if experts <= 1:
        mlp = tuple(Linear(n, a, b, "mlp", 1, n_layers) for n, a, b in
                    (("gate_proj", h, i), ("up_proj", h, i), ("down_proj", i, h)))
        return mlp, 0, n_layers * (2 * i + h) * mlp_bias
    top = int(need(config, "num_experts_per_tok"))
    if family == "qwen2_moe":
        step = int(config.get("decoder_sparse_step", 1))
        only_mlp = set(config.get("mlp_only_layers") or [])
        sparse = sum(1 for n in range(n_layers) if n not in only_mlp and (n + 1) % step == 0)
        dense = n_layers - sparse
        i_e = int(need(config, "moe_intermediate_size"))
        i_s = int(config.get("shared_expert_intermediate_size") or 0)
        mlp = tuple(Linear(n, a, b, "mlp", experts, sparse) for n, a, b in
                    (("experts.gate_proj", h, i_e), ("experts.up_proj", h, i_e), ("experts.down_proj", i_e, h)))
        mlp += tuple(Linear(n, a, b, "mlp", 1, sparse) for n, a, b in
                     (("shared_expert.gate_proj", h, i_s), ("shared_expert.up_proj", h, i_s),
                      ("shared_expert.down_proj", i_s, h)) if i_s)
        mlp += tuple(Linear(n, a, b, "mlp", 1, dense) for n, a, b in
                     (("gate_proj", h, i), ("up_proj", h, i), ("down_proj", i, h)) if dense)
        router = sparse * (h * experts + (h if i_s else 0))  # gate + shared_expert_gate
        inactive = sparse * (experts - top) * 3 * h * i_e
        return mlp, inactive, router
    mlp = tuple(Linear(n, a, b, "mlp", experts, n_layers) for n, a, b in
                (("experts.w1", h, i), ("experts.w3", h, i), ("experts.w2", i, h)))
    return mlp, n_layers * (experts - top) * 3 * h * i, n_layers * h * experts


# ---------------------------------------------------------------- GPT-2, GPT-NeoX, OPT, Falcon, MPT
def gpt2(config: Config) -> ParamCount:
    h, n_layers = int(need(config, "n_embd", "hidden_size")), int(need(config, "n_layer", "num_hidden_layers"))
    i = int(config.get("n_inner") or 4 * h)
    vocab, pos = int(need(config, "vocab_size")), int(need(config, "n_positions", "max_position_embeddings"))
    linears = tuple(Linear(n, a, b, g, 1, n_layers) for n, a, b, g in
                    (("c_attn", h, 3 * h, "attn"), ("attn.c_proj", h, h, "attn"),
                     ("c_fc", h, i, "mlp"), ("mlp.c_proj", i, h, "mlp")))
    other = n_layers * (3 * h + h + i + h + 4 * h) + 2 * h  # biases, ln_1, ln_2, ln_f
    return _dense(embedding=(vocab + pos) * h, linears=linears, head=0, other=other)


def gpt_neox(config: Config) -> ParamCount:
    h, n_layers = int(need(config, "hidden_size")), int(need(config, "num_hidden_layers"))
    i, vocab = int(need(config, "intermediate_size")), int(need(config, "vocab_size"))
    bias = bool(config.get("attention_bias", True))
    linears = tuple(Linear(n, a, b, g, 1, n_layers) for n, a, b, g in
                    (("query_key_value", h, 3 * h, "attn"), ("dense", h, h, "attn"),
                     ("dense_h_to_4h", h, i, "mlp"), ("dense_4h_to_h", i, h, "mlp")))
    other = n_layers * (4 * h * bias + i + h + 4 * h) + 2 * h
    head = 0 if config.get("tie_word_embeddings", False) else vocab * h
    return _dense(embedding=vocab * h, linears=linears, head=head, other=other)


def opt(config: Config) -> ParamCount:
    h, n_layers = int(need(config, "hidden_size")), int(need(config, "num_hidden_layers"))
    ffn, vocab = int(need(config, "ffn_dim")), int(need(config, "vocab_size"))
    pos = int(need(config, "max_position_embeddings")) + 2  # OPT's learned positions are offset by 2
    w = int(config.get("word_embed_proj_dim") or h)
    bias = bool(config.get("enable_bias", True))
    linears = tuple(Linear(n, a, b, g, 1, n_layers) for n, a, b, g in
                    (("q_proj", h, h, "attn"), ("k_proj", h, h, "attn"), ("v_proj", h, h, "attn"),
                     ("out_proj", h, h, "attn"), ("fc1", h, ffn, "mlp"), ("fc2", ffn, h, "mlp")))
    final_norm = config.get("do_layer_norm_before", True) and not config.get("_remove_final_layer_norm", False)
    other = n_layers * ((4 * h + ffn + h) * bias + 4 * h) + 2 * h * final_norm + (2 * w * h if w != h else 0)
    return _dense(embedding=vocab * w + pos * h, linears=linears, head=0, other=other)


def falcon(config: Config) -> ParamCount:
    h, n_layers = int(need(config, "hidden_size")), int(need(config, "num_hidden_layers", "n_layer"))
    a, vocab = int(need(config, "num_attention_heads", "n_head")), int(need(config, "vocab_size"))
    d = h // a
    new_arch = bool(config.get("new_decoder_architecture", False))
    if new_arch:
        k = int(need(config, "num_kv_heads", "n_head_kv"))
    else:
        k = 1 if config.get("multi_query", True) else int(config.get("num_kv_heads") or a)
    i = int(config.get("ffn_hidden_size") or 4 * h)
    bias = bool(config.get("bias", False))
    linears = tuple(Linear(n, x, y, g, 1, n_layers) for n, x, y, g in
                    (("query_key_value", h, (a + 2 * k) * d, "attn"), ("dense", h, h, "attn"),
                     ("dense_h_to_4h", h, i, "mlp"), ("dense_4h_to_h", i, h, "mlp")))
    norms = 4 * h if new_arch and config.get("num_ln_in_parallel_attn", 2) == 2 else 2 * h
    other = n_layers * (norms + ((a + 2 * k) * d + h + i + h) * bias) + 2 * h
    head = 0 if config.get("tie_word_embeddings", True) else vocab * h
    return _dense(embedding=vocab * h, linears=linears, head=head, other=other)


def mpt(config: Config) -> ParamCount:
    h, n_layers = int(need(config, "d_model")), int(need(config, "n_layers"))
    vocab = int(need(config, "vocab_size"))
    i = int(config.get("expansion_ratio", 4) * h)
    no_bias = bool(config.get("no_bias", False))
    linears = tuple(Linear(n, a, b, g, 1, n_layers) for n, a, b, g in
                    (("Wqkv", h, 3 * h, "attn"), ("out_proj", h, h, "attn"),
                     ("up_proj", h, i, "mlp"), ("down_proj", i, h, "mlp")))
    norm = h if no_bias else 2 * h
    other = n_layers * (2 * norm + (0 if no_bias else 3 * h + h + i + h)) + norm
    pos = 0 if (config.get("attn_config") or {}).get("alibi", False) else int(config.get("max_seq_len", 2048)) * h
    return _dense(embedding=vocab * h + pos, linears=linears, head=0, other=other)


# ---------------------------------------------------------------- encoders and encoder-decoders
def bert(config: Config) -> ParamCount:
    """bert and roberta: embeddings + blocks, then the head ``architectures[0]`` names (pooler by default)."""
    h, n_layers = int(need(config, "hidden_size")), int(need(config, "num_hidden_layers"))
    i, vocab = int(need(config, "intermediate_size")), int(need(config, "vocab_size"))
    pos, types = int(need(config, "max_position_embeddings")), int(config.get("type_vocab_size", 2))
    linears = tuple(Linear(n, a, b, g, 1, n_layers) for n, a, b, g in
                    (("query", h, h, "attn"), ("key", h, h, "attn"), ("value", h, h, "attn"),
                     ("attention.output.dense", h, h, "attn"), ("intermediate.dense", h, i, "mlp"),
                     ("output.dense", i, h, "mlp")))
    other = 2 * h + n_layers * (4 * h + 2 * h + i + h + 2 * h)  # embedding LN; biases and LNs per layer
    arch, labels = _architecture(config), _num_labels(config)
    head = 0
    if arch.endswith("ForMaskedLM") or arch.endswith("ForPreTraining"):
        other += h * h + h + 2 * h + vocab  # transform dense + LN + decoder bias (weight tied)
        if arch.endswith("ForPreTraining"):
            other += h * h + h + 2 * h + 2  # pooler + next-sentence classifier
    elif arch.endswith("ForSequenceClassification"):
        # BERT: pooler + classifier; RoBERTa: classifier.dense + out_proj -- the same count
        other += h * h + h + labels
        head = h * labels
    elif arch.endswith("ForQuestionAnswering") or arch.endswith("ForTokenClassification"):
        n_out = 2 if arch.endswith("ForQuestionAnswering") else labels
        other += n_out
        head = h * n_out
    elif not arch.endswith("ForCausalLM"):
        other += h * h + h  # the bare model's pooler
    return _dense(embedding=(vocab + pos + types) * h, linears=linears, head=head, other=other)


def t5(config: Config) -> ParamCount:
    """t5 and mt5 (encoder-decoder; RMS norms without bias; relative position buckets in layer 0)."""
    dm, d_kv, dff = int(need(config, "d_model")), int(need(config, "d_kv")), int(need(config, "d_ff"))
    heads, vocab = int(need(config, "num_heads")), int(need(config, "vocab_size"))
    enc = int(need(config, "num_layers"))
    dec = int(config.get("num_decoder_layers") or enc)
    inner = heads * d_kv
    gated = str(config.get("feed_forward_proj", "relu")).startswith("gated") or bool(config.get("is_gated_act"))
    ff = (("wi_0", dm, dff), ("wi_1", dm, dff), ("wo", dff, dm)) if gated else (("wi", dm, dff), ("wo", dff, dm))
    attn = (("q", dm, inner), ("k", dm, inner), ("v", dm, inner), ("o", inner, dm))
    linears = tuple(Linear(n, a, b, "attn", 1, enc + 2 * dec) for n, a, b in attn)  # decoder: self + cross
    linears += tuple(Linear(n, a, b, "mlp", 1, enc + dec) for n, a, b in ff)
    buckets = int(config.get("relative_attention_num_buckets", 32))
    other = (2 * enc + 3 * dec + 2) * dm + 2 * buckets * heads
    head = 0 if config.get("tie_word_embeddings", True) else vocab * dm
    return _dense(embedding=vocab * dm, linears=linears, head=head, other=other)


def vit(config: Config) -> ParamCount:
    h, n_layers = int(need(config, "hidden_size")), int(need(config, "num_hidden_layers"))
    i, image = int(need(config, "intermediate_size")), int(need(config, "image_size"))
    patch = int(need(config, "patch_size"))
    channels = int(config.get("num_channels", 3))
    patches = (image // patch) ** 2
    bias = bool(config.get("qkv_bias", True))
    linears = tuple(Linear(n, a, b, g, 1, n_layers) for n, a, b, g in
                    (("query", h, h, "attn"), ("key", h, h, "attn"), ("value", h, h, "attn"),
                     ("attention.output.dense", h, h, "attn"), ("intermediate.dense", h, i, "mlp"),
                     ("output.dense", i, h, "mlp")))
    other = n_layers * (3 * h * bias + h + i + h + 4 * h) + 2 * h + h  # biases, LNs, final LN, patch bias
    arch = _architecture(config)
    head = 0
    if arch.endswith("ForImageClassification"):
        labels = _num_labels(config)
        head, other = h * labels, other + labels
    else:
        other += h * h + h  # ViTModel's pooler
    embedding = h + (patches + 1) * h + channels * patch * patch * h  # cls token, positions, patch conv
    return _dense(embedding=embedding, linears=linears, head=head, other=other)


def resnet(config: Config) -> ParamCount:
    """HF ResNet (bottleneck or basic blocks): convolutions + batch norms (weight and bias) + classifier."""
    channels = int(config.get("num_channels", 3))
    stem = int(need(config, "embedding_size"))
    sizes, depths = list(need(config, "hidden_sizes")), list(need(config, "depths"))
    bottleneck = config.get("layer_type", "bottleneck") == "bottleneck"
    reduction = 4
    conv = channels * stem * 49 + 2 * stem
    c_in = stem
    for stage, (c_out, depth) in enumerate(zip(sizes, depths, strict=True)):
        for block in range(depth):
            first_in = c_in if block == 0 else c_out
            stride_change = block == 0 and (stage > 0 or config.get("downsample_in_first_stage", False))
            if first_in != c_out or stride_change:
                conv += first_in * c_out + 2 * c_out
            if bottleneck:
                m = c_out // reduction
                conv += first_in * m + 2 * m + 9 * m * m + 2 * m + m * c_out + 2 * c_out
            else:
                conv += 9 * first_in * c_out + 2 * c_out + 9 * c_out * c_out + 2 * c_out
        c_in = c_out
    labels = _num_labels(config) if _architecture(config).endswith("ForImageClassification") else 0
    return ParamCount(0, 0, c_in * labels, conv + labels, conv + labels + c_in * labels, ())


def convnet(config: Config) -> ParamCount:
    """YOLOv8 and U-Net: every convolution's weights, biases and batch norms, counted from the built layers
    (workload/model/convnets.py); the total does not depend on the image side."""
    total = NETWORKS[str(config["model_type"])](config, 256).params
    return ParamCount(0, 0, 0, total, total, ())


def sam(config: Config) -> ParamCount:
    """Segment Anything's image encoder (workload/model/sam.py)."""
    return sam_params(config)


def _dense(*, embedding: int, linears: tuple[Linear, ...], head: int, other: int) -> ParamCount:
    linear = _linear_total(linears)
    return ParamCount(embedding, linear, head, other, embedding + linear + head + other, linears)


COUNTERS: Mapping[str, Callable[[Config], ParamCount]] = {
    **{f: llama_like for f in ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "gemma", "gemma2", "phi3")},
    "gpt2": gpt2, "gpt_neox": gpt_neox, "opt": opt, "falcon": falcon, "mpt": mpt,
    "bert": bert, "roberta": bert,
    "t5": t5, "mt5": t5, "vit": vit, "resnet": resnet, "yolov8": convnet, "unet": convnet,
    "sam_vision_model": sam,
}
"""model_type -> counter; these families accept any local config.json."""


def count_params(config: Config) -> ParamCount:
    family = config.get("model_type")
    counter = COUNTERS.get(str(family))
    if counter is None:
        known = ", ".join(sorted(COUNTERS))
        raise ConfigError(f"model_type {family!r} is not supported; supported families: {known}")
    return counter(config)
