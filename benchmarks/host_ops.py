"""What transformers dispatches per decode step, and what that costs this host: the source of the HF engine
profile's host-op inventory (runtimes/engines.py HF.host_ops) and a measure of the per-operator host cost on CPU
tensors (a lower bound for a CUDA host, which adds the launch and the caching allocator).

Run: python benchmarks/host_ops.py     (needs torch and transformers: pip install 'gpuwise[hf]' and a torch build)
"""

from __future__ import annotations

import statistics
import time
import warnings

from gpuwise.workload.trace.host_ops import TINY, decode_ops

FAMILIES = {
    "llama": {"model_type": "llama"},
    "qwen3": {"model_type": "qwen3"},
    "qwen3_moe": {"model_type": "qwen3_moe", "num_experts": 128, "num_experts_per_tok": 8},
    "mixtral": {"model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2},
}


def seconds_per_step(layers: int, new_tokens: int = 32) -> float:
    """Wall seconds of one decode step of a tiny Llama of ``layers`` layers on CPU tensors (host work only)."""
    import torch
    import transformers

    config = transformers.AutoConfig.for_model("llama", **TINY, num_hidden_layers=layers)
    config._attn_implementation = "sdpa"
    model = transformers.AutoModelForCausalLM.from_config(config).to(torch.bfloat16).eval()
    model.generation_config.pad_token_id = 0
    ids = torch.randint(0, TINY["vocab_size"], (1, 8))
    runs = []
    with torch.no_grad():
        for new in (8, 8 + new_tokens):
            best = []
            for _ in range(3):
                start = time.perf_counter()
                model.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False)
                best.append(time.perf_counter() - start)
            runs.append(min(best))
    return (runs[1] - runs[0]) / new_tokens


def main() -> None:
    warnings.simplefilter("ignore")
    counted = {name: decode_ops(config) for name, config in FAMILIES.items()}
    for name, ops in counted.items():
        print(f"{name:10s} {ops.per_layer:6.1f} operators per layer, {ops.per_step:5.1f} per step")
    import torch

    torch.set_num_threads(1)
    two, eight = seconds_per_step(2), seconds_per_step(8)
    per_layer_s = (eight - two) / 6
    llama = counted["llama"].per_layer
    print(f"host: {per_layer_s * 1e6:,.0f} us per layer per decode step on CPU tensors = "
          f"{per_layer_s / llama * 1e6:.1f} us per operator ({statistics.fmean([two, eight]) * 1e3:.1f} ms per step)")


if __name__ == "__main__":
    main()
