"""Model types gpuwise has no closed form for: the architecture read from transformers' meta-device build equals
that build's own parameter count, its projections have the config's head shapes, and an MoE's active count is the
total less the unrouted experts worked out from the config by hand."""

from __future__ import annotations

from typing import Any

import pytest

from gpuwise.errors import ConfigError
from gpuwise.workload.model.architecture import SUPPORTED, from_config
from gpuwise.workload.model.module_tree import DERIVED
from plans import infer_plan

transformers = pytest.importorskip("transformers")
pytest.importorskip("torch")

UNSUPPORTED = ["granite", "starcoder2", "smollm3", "seed_oss", "olmoe", "ernie4_5_moe", "jamba"]


def _config(model_type: str) -> dict[str, Any]:
    """transformers' default config of the type (its defaults are one published size of that family)."""
    config = transformers.AutoConfig.for_model(model_type).to_dict()
    return {**config, "model_type": model_type}


@pytest.mark.parametrize("model_type", UNSUPPORTED)
def test_derived_counts_equal_the_meta_build(model_type: str) -> None:
    from gpuwise.workload.exact import meta_param_count

    assert model_type not in SUPPORTED
    config = _config(model_type)
    arch = from_config(config, name=model_type)
    assert arch.resolved_as == DERIVED
    assert arch.total_params == meta_param_count(config)
    # the linears carry nearly every parameter: norms, biases and routers are the small rest
    assert 0 <= arch.params.other < 0.01 * arch.total_params
    k_proj = [x for x in arch.params.linears if x.name == "k_proj"]
    assert k_proj and all(x.d_out == arch.kv_heads * arch.head_dim for x in k_proj)


def test_moe_active_parameters_by_hand() -> None:
    """OLMoE: 64 experts, 8 per token, each a gated MLP of 3 x hidden x intermediate weights in every layer."""
    config = _config("olmoe")
    arch = from_config(config, name="olmoe")
    h, i, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    experts, top_k = config["num_experts"], config["num_experts_per_tok"]
    assert (arch.experts, arch.experts_per_token) == (experts, top_k)
    assert arch.active_params == arch.total_params - (experts - top_k) * 3 * h * i * layers


def test_starcoder2_default_is_the_3b_model() -> None:
    """bigcode/starcoder2-3b (hidden 3072, 30 layers, 24 heads, 2 KV heads): 'a 3B parameter model' (model card)."""
    arch = from_config(_config("starcoder2"), name="starcoder2")
    assert round(arch.total_params / 1e9) == 3 and (arch.heads, arch.kv_heads, arch.layers) == (24, 2, 30)


def test_unknown_to_transformers_names_the_nearest_family() -> None:
    with pytest.raises(ConfigError, match=r"model_type 'qwen3x' has no closed form .*nearest supported family: qwen3"):
        from_config({"model_type": "qwen3x", "hidden_size": 64}, name="x.json")


def test_a_deep_config_is_refused_before_the_build() -> None:
    with pytest.raises(ConfigError, match="at most 1,000 per stack on the meta"):
        from_config({**_config("granite"), "num_hidden_layers": 5000}, name="deep.json")


def test_layers_without_softmax_attention_keep_no_kv_cache() -> None:
    """Mamba mixes with a state-space layer (in_proj, x_proj, dt_proj, out_proj): nothing to cache per token."""
    from gpuwise.estimate.memory.kv_cache import kv_bytes_per_token
    from gpuwise.workload.jobs.job import InferJob

    mamba = from_config(_config("mamba"), name="mamba")
    assert mamba.decoder_layers == mamba.layers  # it still decodes
    assert kv_bytes_per_token(infer_plan(mamba, InferJob())) == 0
    jamba = from_config(_config("jamba"), name="jamba")  # one attention layer in 8 (attn_layer_period 8)
    assert sum(b.count for b in jamba.caching_blocks) == jamba.layers // 8


def test_every_stack_is_bounded_before_the_build() -> None:
    """An encoder-decoder's encoder_layers / decoder_layers are stacks too (a 50,000-layer BART once hung)."""
    with pytest.raises(ConfigError, match="50,000 layers"):
        from_config({**_config("bart"), "architectures": ["BartForConditionalGeneration"], "encoder_layers": 50_000},
                    name="deep.json")


@pytest.mark.parametrize(("model_type", "architecture"), [("dinov2", "Dinov2Model"), ("clip", "CLIPModel")])
def test_encoders_cache_nothing(model_type: str, architecture: str) -> None:
    arch = from_config({**_config(model_type), "architectures": [architecture]}, name=model_type)
    assert arch.kind == "encoder" and arch.decoder_layers == 0 and not arch.caching_blocks


def test_mla_and_hybrid_caches_come_from_the_attention_modules() -> None:
    """DeepSeek-V2 caches its latent + RoPE key (kv_lora_rank + qk_rope_head_dim per layer); RecurrentGemma caches
    only its attention layers (block_types recurrent, recurrent, attention); RWKV caches nothing."""
    from gpuwise.estimate.memory.kv_cache import kv_bytes_per_token
    from gpuwise.workload.jobs.job import InferJob

    config = {**_config("deepseek_v2"), "architectures": ["DeepseekV2ForCausalLM"]}
    v2 = from_config(config, name="v2")
    per_layer = config["kv_lora_rank"] + config["qk_rope_head_dim"]
    assert kv_bytes_per_token(infer_plan(v2, InferJob())) == config["num_hidden_layers"] * per_layer * 2
    rg_config = {**_config("recurrent_gemma"), "architectures": ["RecurrentGemmaForCausalLM"]}
    rg = from_config(rg_config, name="rg")
    attention_layers = rg_config["num_hidden_layers"] // 3
    assert sum(b.count for b in rg.caching_blocks) == attention_layers and rg.decoder_layers == rg.layers
    rwkv = from_config({**_config("rwkv"), "architectures": ["RwkvForCausalLM"]}, name="rwkv")
    assert kv_bytes_per_token(infer_plan(rwkv, InferJob())) == 0 and rwkv.decoder_layers == rwkv.layers


def test_a_model_without_attention_or_generation_is_refused_with_its_count() -> None:
    with pytest.raises(ConfigError, match=r"convnext model of [\d,]+ parameters with no attention layers"):
        from_config({**_config("convnext"), "architectures": ["ConvNextModel"]}, name="convnext.json")


def test_infinity_as_transformers_writes_it_is_read_nan_is_not(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Mamba-2's config.json carries time_step_limit [0.0, Infinity] (MambaConfig default, written by json)."""
    from gpuwise.workload.model.resolve import resolve_model

    path = tmp_path / "config.json"
    text = '{"model_type": "mamba2", "architectures": ["Mamba2ForCausalLM"], "time_step_limit": [0.0, Infinity]}'
    path.write_text(text)
    assert resolve_model(str(path)).total_params > 0
    path.write_text(text.replace("Infinity", "NaN"))
    with pytest.raises(ConfigError, match="NaN is not a number"):
        resolve_model(str(path))
