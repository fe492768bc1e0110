"""Measure training memory and speed of a real Hugging Face model on this GPU and set gpuwise's estimate beside it.

Needs a CUDA GPU, torch and transformers. The model is built from the shipped preset's config.json with random
weights (no download), in fp32, trained under bf16 autocast with fused AdamW and SDPA attention: what the
Hugging Face Trainer does with ``bf16=True`` (its default optimizer is adamw_torch_fused). Each case runs
``--steps`` optimizer steps; the peak is read after them and the step time is the median of all but the first.

    python benchmarks/measure_training.py --out results.jsonl
    python benchmarks/measure_training.py --case llama-3.2-1b:4:2048:none
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

DEFAULT_CASES = (
    "qwen2.5-0.5b:8:2048:none",
    "llama-3.2-1b:4:2048:none",
    "llama-3.2-1b:8:2048:full",
    "llama-3.2-1b:16:1024:none",
)


def measure(preset: str, batch: int, seq: int, ckpt: str, steps: int) -> dict[str, Any]:
    import torch
    import transformers

    from gpuwise.workload.model.presets import presets

    config = transformers.AutoConfig.for_model(**presets()[preset].config)
    config._attn_implementation = "sdpa"
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    free_before, total = torch.cuda.mem_get_info()
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    if ckpt == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    tokens = torch.randint(0, config.vocab_size, (batch, seq), device="cuda")
    times = []
    for _ in range(steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    free_after, _ = torch.cuda.mem_get_info()
    result = {
        "preset": preset, "batch": batch, "seq": seq, "ckpt": ckpt, "steps": steps,
        "params": sum(p.numel() for p in model.parameters()),
        "max_allocated_gb": torch.cuda.max_memory_allocated() / 1e9,
        "max_reserved_gb": torch.cuda.max_memory_reserved() / 1e9,
        "device_used_gb": (total - free_after) / 1e9,  # what nvidia-smi shows for this process, context included
        "device_used_before_gb": (total - free_before) / 1e9,
        "step_s_median": statistics.median(times[1:]) if len(times) > 1 else times[0],
        "tokens_per_s": batch * seq / (statistics.median(times[1:]) if len(times) > 1 else times[0]),
    }
    del model, optimizer, loss
    torch.cuda.empty_cache()
    return result


def predict(preset: str, batch: int, seq: int, ckpt: str, gpu: str) -> dict[str, Any]:
    from gpuwise import api

    est = api.estimate(preset, gpu=gpu, method="full", precision="bf16", optimizer="adamw", batch=batch, seq=seq,
                       ckpt=ckpt, flash_attn=True)
    perf = est.perf
    return {"predicted_gb": est.memory.per_gpu_bytes / 1e9,
            "predicted_breakdown_gb": {k: round(v / 1e9, 3) for k, v in est.memory.breakdown_bytes.items()},
            "predicted_tokens_per_s": getattr(perf, "tokens_per_s", None)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", action="append", help="PRESET:BATCH:SEQ:CKPT (none|full); repeatable")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--gpu", default=None, help="catalog id for the estimate (default: matched from the name)")
    parser.add_argument("--out", default=None, help="append JSON lines here")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU", file=sys.stderr)
        return 3
    from gpuwise import api
    from gpuwise.probe.checks import match_catalog

    props = torch.cuda.get_device_properties(0)
    card, _ = match_catalog(torch.cuda.get_device_name(0), props.total_memory / 2**20, api.load_catalog())
    gpu = args.gpu or (card.id if card else None)
    if gpu is None:
        print(f"{torch.cuda.get_device_name(0)} is not in the catalog; pass --gpu", file=sys.stderr)
        return 2
    for case in args.case or DEFAULT_CASES:
        preset, batch, seq, ckpt = case.split(":")
        row: dict[str, Any] = {"gpu": gpu, "device": torch.cuda.get_device_name(0), "torch": torch.__version__}
        try:
            row |= measure(preset, int(batch), int(seq), ckpt, args.steps)
        except torch.cuda.OutOfMemoryError as exc:
            row |= {"preset": preset, "batch": int(batch), "seq": int(seq), "ckpt": ckpt, "oom": str(exc)[:200]}
        row |= predict(preset, int(batch), int(seq), ckpt, gpu)
        line = json.dumps(row)
        print(line, flush=True)
        if args.out:
            with open(args.out, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
