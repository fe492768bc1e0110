"""What transformers' eager code dispatches per decode step: the ground truth for the host-op inventory of the
transformers engine profile (``runtimes/engines.py`` HF.host_ops).

A decode step's host time in eager PyTorch is set by the operators Python dispatches, not by their size, so the
model's own code is built at tiny widths (hidden 64) with the real structure, on real CPU tensors, and
``generate`` runs under a TorchDispatchMode that counts every aten operator (views included: each costs dispatch
time). Two depths and two lengths separate the per-layer count from the per-step one.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuwise.errors import ProbeUnavailable

TINY = {"hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 256}
"""The widths every traced model is shrunk to: structure (modules, layer kinds, experts) is kept."""


@dataclass(frozen=True)
class DecodeOps:
    """Aten operators one greedy decode step of ``generate`` dispatches."""

    per_layer: float
    per_step: float
    by_operator: Mapping[str, float]  # per layer


def _count(model: Any, torch: Any, new_tokens: int) -> collections.Counter[str]:
    from torch.utils._python_dispatch import TorchDispatchMode

    class Counter(TorchDispatchMode):  # type: ignore[no-untyped-call]
        def __init__(self) -> None:
            super().__init__()  # type: ignore[no-untyped-call]
            self.ops: collections.Counter[str] = collections.Counter()

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            self.ops[str(func.overloadpacket)] += 1
            return func(*args, **(kwargs or {}))

    ids = torch.randint(0, TINY["vocab_size"], (1, 8))
    counter = Counter()
    with torch.no_grad(), counter:
        model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
    return counter.ops


def _steps(config: Mapping[str, Any], layers: int, dtype: str) -> collections.Counter[str]:
    try:
        import torch
        import transformers
    except ImportError:
        raise ProbeUnavailable("counting dispatched operators needs torch and transformers") from None
    torch.manual_seed(0)  # routing and other data-dependent paths dispatch alike on every run
    values = {**config, **TINY, "num_hidden_layers": layers}
    for key in ("layer_types", "mlp_only_layers"):
        values.pop(key, None)
    cfg = transformers.AutoConfig.for_model(**values)
    cfg._attn_implementation = "sdpa"
    model = transformers.AutoModelForCausalLM.from_config(cfg)  # type: ignore[no-untyped-call]
    model = model.to(getattr(torch, dtype)).eval()
    model.generation_config.pad_token_id = 0
    _count(model, torch, 2)  # the first generate of a process takes one-time paths (caches, lazy imports)
    short, long = _count(model, torch, 2), _count(model, torch, 6)
    return collections.Counter({k: (long[k] - short[k]) / 4 for k in long})  # per decode step


def _isolated_steps(config: Mapping[str, Any], layers: int, dtype: str) -> dict[str, float]:
    """``_steps`` in a fresh interpreter: what transformers dispatches depends on what a process ran before (lazy hub
    kernels, one-time paths), so each count starts clean, with warnings silenced as in a user's run."""
    code = ("import json, sys, warnings; warnings.simplefilter('ignore'); "
            "from gpuwise.workload.trace.host_ops import _steps; "
            "a = json.loads(sys.argv[1]); print(json.dumps(_steps(a['config'], a['layers'], a['dtype'])))")
    argument = json.dumps({"config": dict(config), "layers": layers, "dtype": dtype})
    done = subprocess.run([sys.executable, "-c", code, argument], capture_output=True, text=True,
                          timeout=COUNT_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise ProbeUnavailable(f"counting dispatched operators failed: {done.stderr.strip()[-200:]}")
    counted: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1][:1_000_000])
    return counted


COUNT_TIMEOUT_S = 300  # one count builds a tiny model and runs generate three times: seconds


def decode_ops(config: Mapping[str, Any], *, dtype: str = "bfloat16") -> DecodeOps:
    """Operators per layer and per step of one decode step of the model ``config`` describes (a config.json)."""
    two, four = _isolated_steps(config, 2, dtype), _isolated_steps(config, 4, dtype)
    per_layer = {k: (four.get(k, 0.0) - two.get(k, 0.0)) / 2 for k in {*two, *four}
                 if four.get(k, 0.0) != two.get(k, 0.0)}
    total = sum(per_layer.values())
    return DecodeOps(per_layer=total, per_step=sum(two.values()) - 2 * total, by_operator=per_layer)
