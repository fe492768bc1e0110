"""Parameter count by building the model on PyTorch's meta device (no weights, no download).

A second derivation next to the closed-form counters of :mod:`gpuwise.workload.model.params`: transformers
builds the class the config names (``architectures[0]``) from the config alone, and parameters are
counted once each (tied weights share one tensor). Needs the ``hf`` extra and torch; never runs remote code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuwise.errors import ConfigError, ProbeUnavailable

_ATTENTION_WORDS = ("attn", "attention", "mixer")  # a linear whose path names one of these is attention
_RENAMED = {"T5WithLMHeadModel": "T5ForConditionalGeneration"}  # the pre-2020 name some configs keep
# model types transformers builds under another name: Kimi-K2's remote-code type is DeepSeek-V3 (transformers'
# Kimi_K25Config rewrites a kimi_k2 text_config to deepseek_v3 the same way)
_TYPE_ALIASES = {"kimi_k2": "deepseek_v3"}


def _case_insensitive(module: Any, name: str) -> Any:
    """Remote-code class names differ in case or underscores from the native ones (MPTForCausalLM vs
    MptForCausalLM, KimiK25ForConditionalGeneration vs Kimi_K25ForConditionalGeneration)."""
    lowered = name.lower().replace("_", "")
    for attribute in dir(module):
        if attribute.lower().replace("_", "") == lowered:
            return getattr(module, attribute)
    return None


def meta_model(config: Mapping[str, Any], *, architecture: str | None = None) -> Any:
    """``architecture`` (default: the config's first, else the base model of its type) built on the meta device."""
    try:
        import torch
        import transformers
    except ImportError:
        raise ProbeUnavailable(
            "--exact needs torch and transformers: pip install 'gpuwise[hf]' and a torch build"
        ) from None
    clean = {k: v for k, v in config.items() if not k.startswith("_") and k != "auto_map"}
    model_type = _TYPE_ALIASES.get(str(clean.get("model_type")), str(clean.get("model_type")))
    try:
        hf_config = transformers.AutoConfig.for_model(model_type, **{k: v for k, v in clean.items()
                                                                     if k != "model_type"})
    except (ValueError, KeyError) as exc:
        raise ConfigError(f"transformers cannot build a config of model_type {model_type!r}: {exc}") from None
    name = architecture or (clean.get("architectures") or [""])[0]
    name = _RENAMED.get(name, name)
    model_class = getattr(transformers, name, None) or _case_insensitive(transformers, name) if name else None
    with torch.device("meta"):
        if model_class is None and not name:
            return _auto_model(transformers, hf_config, model_type)
        if model_class is None:
            raise ConfigError(f"transformers {transformers.__version__} has no class {name!r}")
        return model_class(hf_config)


def _auto_model(transformers: Any, hf_config: Any, model_type: str) -> Any:
    """A config without ``architectures``: its causal-LM class, else its base model (encoders, vision)."""
    for auto in (transformers.AutoModelForCausalLM, transformers.AutoModel):
        try:
            return auto.from_config(hf_config)
        except ValueError:
            continue
    raise ConfigError(f"config.json has no 'architectures' entry and transformers has no model class for "
                      f"model_type {model_type!r}; add the class name, e.g. \"architectures\": [\"...ForCausalLM\"]")


def unique_param_count(model: Any) -> int:
    """Parameters counted once each (tied weights share one tensor)."""
    seen: set[int] = set()
    total = 0
    for parameter in model.parameters():
        if id(parameter) not in seen:
            seen.add(id(parameter))
            total += parameter.numel()
    return total


def meta_param_count(config: Mapping[str, Any], *, architecture: str | None = None) -> int:
    """Parameters of ``architecture`` (default: the config's first) instantiated on the meta device."""
    return unique_param_count(meta_model(config, architecture=architecture))


def transformers_knows(model_type: str) -> bool | None:
    """Whether transformers has a config class for ``model_type``; None when transformers is not installed."""
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES  # type: ignore[attr-defined]
    except ImportError:
        return None
    return model_type in CONFIG_MAPPING_NAMES


def layer_stack(model: Any) -> tuple[str, Any]:
    import torch

    stacks = [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.ModuleList) and len(m)]
    if not stacks:
        raise ConfigError("the model has no stack of repeated layers to read")
    return max(stacks, key=lambda item: len(item[1]))


def layer_linears(layer: Any) -> dict[tuple[str, int, int, str], int]:
    """(name, d_in, d_out, group) -> how many per layer: per-expert modules (``experts.3.up_proj``) merge into one
    entry counted E times; a bank (one [E, in, out] tensor) is one entry counted E times."""
    import torch

    found: dict[tuple[str, int, int, str], int] = {}
    for path, module in layer.named_modules():
        if isinstance(module, torch.nn.Linear):
            group = "attn" if any(w in path.lower() for w in _ATTENTION_WORDS) else "mlp"
            name = path.split(".")[-1] if group == "attn" else ".".join(
                "*" if part.isdigit() else part for part in path.split("."))
            key = (name, module.in_features, module.out_features, group)
            found[key] = found.get(key, 0) + 1
    for path, parameter in layer.named_parameters():
        if parameter.dim() == 3 and "expert" in path:
            key = ("experts." + path.split(".")[-1], int(parameter.shape[1]), int(parameter.shape[2]), "mlp")
            found[key] = found.get(key, 0) + int(parameter.shape[0])
    return found


def embedding_and_head(model: Any) -> tuple[int, int, int, int]:
    """(embedding parameters, vocabulary, width, untied head parameters)."""
    import torch

    embeddings = [m for m in model.modules() if isinstance(m, torch.nn.Embedding)]
    token = max(embeddings, key=lambda m: m.num_embeddings, default=None)
    embedding = sum(m.weight.numel() for m in embeddings)
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    tied = token is not None and output is not None and output.weight is token.weight
    head = output.weight.numel() if output is not None and not tied else 0
    return embedding, token.num_embeddings if token else 0, token.embedding_dim if token else 0, head
