"""Aten operators each diffusers module dispatches in one forward, traced on fake tensors (no GPU, no weights): the
source of workload/diffusion/denoisers.py DISPATCHES, the host floor of an eager diffusers step.

Needs torch and diffusers (not gpuwise dependencies: pip install diffusers==0.42.1 in a scratch environment, or
--target a folder and put it on PYTHONPATH). Writes benchmarks/results/trace-diffusers.json: per model, the total
and, per module class, its own operators (children apart) and its instances.

Run: python benchmarks/trace_diffusers.py [--out PATH]
"""

from __future__ import annotations

import argparse
import collections
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

PIPELINES = Path(__file__).parents[1] / "src" / "gpuwise" / "workload" / "diffusion" / "pipelines"
OUT = Path(__file__).parent / "results" / "trace-diffusers.json"


def _count(model: Any, call: Callable[[], Any]) -> dict[str, Any]:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    stack: list[str] = []
    own: collections.Counter[str] = collections.Counter()
    instances: collections.Counter[str] = collections.Counter()

    class Counter(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if not str(func).startswith("prim."):  # metadata queries: dispatched only for fake tensors
                own[stack[-1] if stack else "<top>"] += 1
            return func(*args, **(kwargs or {}))

    for module in model.modules():
        instances[type(module).__name__] += 1
        module.register_forward_pre_hook(lambda m, a: (stack.append(type(m).__name__), None)[1])
        module.register_forward_hook(lambda m, a, o: (stack.pop(), None)[1])
    with torch.no_grad(), Counter():
        call()
    return {"total": sum(own.values()),
            "own": {name: {"operators": n, "instances": instances.get(name, 1)} for name, n in own.most_common()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    out = parser.parse_args().out
    import diffusers
    import torch
    from diffusers import AutoencoderKL, FluxTransformer2DModel, UNet2DConditionModel
    from torch._subclasses.fake_tensor import FakeTensorMode

    sdxl = json.loads((PIPELINES / "sdxl.json").read_text())
    flux = json.loads((PIPELINES / "flux.1-dev.json").read_text())
    found: dict[str, Any] = {"diffusers": diffusers.__version__, "torch": torch.__version__}
    with FakeTensorMode(allow_non_fake_inputs=True):
        torch.set_default_dtype(torch.float16)
        unet = UNet2DConditionModel.from_config(sdxl["denoiser"]["config"]).eval()
        torch.set_default_dtype(torch.float32)
        half = {"dtype": torch.float16}
        added = {"text_embeds": torch.randn(2, 1280, **half), "time_ids": torch.randn(2, 6, **half)}
        found["sdxl_unet_step_batch2_1024"] = _count(unet, lambda: unet(
            torch.randn(2, 4, 128, 128, **half), torch.tensor([500, 500]),
            encoder_hidden_states=torch.randn(2, 77, 2048, **half), added_cond_kwargs=added))
        vae = AutoencoderKL.from_config(sdxl["vae"]["config"]).eval()
        found["sdxl_vae_decode_1024"] = _count(vae, lambda: vae.decode(torch.randn(1, 4, 128, 128)))
        torch.set_default_dtype(torch.bfloat16)
        dit = FluxTransformer2DModel.from_config(flux["denoiser"]["config"]).eval()
        torch.set_default_dtype(torch.float32)
        bf16 = {"dtype": torch.bfloat16}
        found["flux_dev_step_1024"] = _count(dit, lambda: dit(
            hidden_states=torch.randn(1, 4096, 64, **bf16), encoder_hidden_states=torch.randn(1, 512, 4096, **bf16),
            pooled_projections=torch.randn(1, 768, **bf16), timestep=torch.tensor([0.5], **bf16),
            img_ids=torch.zeros(4096, 3), txt_ids=torch.zeros(512, 3), guidance=torch.tensor([3.5])))
    out.write_text(json.dumps(found, indent=1) + "\n")
    print({k: v["total"] for k, v in found.items() if isinstance(v, dict)})


if __name__ == "__main__":
    main()
