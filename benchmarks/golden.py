"""A golden run of the CLI: the same calls before and after a refactor, their answers compared figure by figure.

    python benchmarks/golden.py --write benchmarks/results/golden-59c33f0.jsonl   # at the commit to hold
    python benchmarks/golden.py --compare benchmarks/results/golden-59c33f0.jsonl # after the change

A refactor that moves where a default is settled should change no figure; one that fixes a figure names the call and
why in its commit. ``--compare`` prints each call whose answer differs (exit code, or a JSON value beyond 1e-9
relative, or any line of text for the calls that print files) and exits 1 when any does.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from pathlib import Path
from typing import Any

CALLS = """
estimate llama-3.1-8b --gpu rtx-4090 --method qlora --json
estimate llama-3.1-8b --gpu rtx-4090 --method lora --batch 4 --seq 2048 --ckpt full --json
estimate llama-3.1-8b --gpu h100-sxm-80gb --count 8 --zero 2 --json
estimate llama-3.1-8b --gpu h100-sxm-80gb --count 8 --zero 1 --ckpt full --json
estimate llama-3.1-8b --gpu h100-sxm-80gb --count 8 --zero 3 --sharding deepspeed --json
estimate llama-3.1-8b --gpu h100-sxm-80gb --count 8 --sharding megatron --zero 1 --json
estimate llama-3.1-70b --gpu h100-sxm-80gb --count 768 --nodes 96 --tp 2 --batch 16 --ckpt full --zero 2 --json
estimate llama-3.1-70b --gpu h100-sxm-80gb --count 64 --nodes 8 --tp 8 --pp 2 --zero 1 --ckpt full --json
estimate qwen3-8b --gpu h100-sxm-80gb --count 8 --framework torchtune --json
estimate qwen2.5-7b --gpu rtx-4090 --method qlora --framework axolotl --json
estimate qwen2.5-14b --gpu rtx-a6000 --count 4 --tp 2 --method full --optimizer adamw-8bit \\
  --ckpt full --json
estimate mixtral-8x7b --gpu h100-sxm-80gb --count 8 --ep 8 --method lora --json
estimate qwen3-30b-a3b --gpu h100-sxm-80gb --method lora --framework unsloth --json
estimate gpt2 --gpu t4 --method full --batch 8 --json
estimate bert-base-uncased --gpu t4 --method full --batch 32 --seq 512 --json
estimate resnet-50 --gpu rtx-3090 --method full --batch 64 --json
estimate vit-b-16 --gpu l4 --task infer --batch 32 --json
estimate t5-base --gpu a10 --method full --decoder-seq 128 --json
estimate llama-3.1-8b --gpu rtx-4090 --task infer --json
estimate llama-3.1-8b --gpu h100-sxm-80gb --task infer --batch 64 --input-len 2048 --output-len 512 --json
estimate llama-3.1-8b --gpu rtx-4090 --task infer --engine llamacpp --quant gguf-q4_k_m --json
estimate llama-3.1-8b --gpu rtx-4090 --task infer --engine sglang --batch 16 --json
estimate llama-3.1-70b --gpu h100-sxm-80gb --task infer --tp 4 --count 4 --quant fp8 --json
estimate llama-3.1-70b --gpu h100-sxm-80gb --task infer --tp 4 --count 4 --quant awq-int4 --json
estimate qwen3-32b --gpu rtx-4090 --task infer --engine llamacpp --quant gguf-q4_k_m --json
estimate deepseek-v3 --gpu h200-sxm-141gb --task infer --count 8 --tp 8 --quant fp8 --json
estimate gpt-oss-120b --gpu h100-sxm-80gb --task infer --json
estimate qwen3-30b-a3b --gpu rtx-4090 --task infer --engine llamacpp --quant gguf-q4_k_m --n-cpu-moe 20 --json
estimate llama-3.1-8b --gpu apple-m4-max-128gb --task infer --engine llamacpp --quant gguf-q4_k_m --json
estimate llama-3.1-8b --gpu mi300x --task infer --batch 32 --json
estimate llama-3.1-8b --gpu h100-sxm-80gb --task infer --kv-dtype fp8 --batch 128 --json
estimate llama-3.1-8b --gpu h100-sxm-80gb --task infer --spec-tokens 3 --spec-accept 0.7 --json
estimate deepseek-v3 --gpu h200-sxm-141gb --task infer --count 8 --tp 1 --dp-attention 8 --quant fp8 \\
  --engine sglang --json
estimate qwen3-8b --gpu l40s --task infer --quant nvfp4 --json
estimate llama-3.1-8b --gpu b200-sxm-180gb --task infer --quant nvfp4 --batch 32 --json
estimate sdxl --gpu rtx-4090 --task infer --json
estimate flux.1-dev --gpu rtx-4090 --task infer --resolution 1024 --steps 28 --json
estimate flux.1-dev --gpu h100-sxm-80gb --task infer --batch 4 --json
estimate --app lammps --gpu a100-sxm-80gb --task hpc --atoms 1000000 --json
estimate --app hpl --gpu h100-sxm-80gb --task hpc --count 8 --json
estimate --app gromacs --gpu rtx-4090 --task hpc --json
fit llama-3.1-8b --gpu rtx-4090 --method full --json
fit llama-3.1-70b --gpu rtx-4090 --task infer --json
fit qwen2.5-7b --gpu rtx-3060-12gb --method lora --json
scale llama-3.1-8b --gpu h100-sxm-80gb --json
serve-sim llama-3.1-8b --gpu h100-sxm-80gb --qps 10 --json
serve-sim llama-3.1-8b --gpu rtx-4090 --concurrency 16 --json
serve-sim llama-3.1-70b --gpu h100-sxm-80gb --count 4 --tp 4 --qps 5 --quant fp8 --json
recommend meta-llama/Llama-3.1-8B --method qlora --grad-ckpt --budget-usd 3000 --json
recommend llama-3.1-70b --task infer --qps 20 --rent --json
recommend qwen2.5-14b --method full --tokens 1e9 --deadline-hours 48 --json
recommend llama-3.1-70b --task train --method full --tokens 2e12 --deadline-hours 1440 \\
  --hours-per-day 24 --max-gpus 4096 --usage one-off --json
recommend sdxl --task infer --json
recommend qwen2.5-14b --method full --framework torchtune --tokens 1e9 --deadline-hours 24 --json
recommend qwen2.5-7b --method lora --framework unsloth --budget-usd 3000 --json
recommend llama-3.1-8b --method full --framework axolotl --tokens 5e8 --deadline-hours 48 --json
fit qwen3-8b --gpu rtx-4090 --method full --framework torchtune --json
scale qwen3-8b --gpu h100-sxm-80gb --framework torchtune --json
estimate llama-3.1-8b --gpu h100-sxm-80gb --count 8 --framework axolotl --json
estimate qwen3-8b --gpu h100-sxm-80gb --method full --framework torchtune --json
tco h100-sxm-80gb --count 8 --json
catalog show h100-sxm-80gb --json
catalog compare rtx-4090 rtx-5090 --json
estimate llama-3.1-8b --gpu rtx-4090 --method qlora --global-batch 16 --ckpt full --emit axolotl
estimate qwen3-8b --gpu h100-sxm-80gb --count 8 --framework torchtune --emit torchtune
estimate llama-3.1-70b --gpu h100-sxm-80gb --task infer --tp 4 --count 4 --quant fp8 --emit vllm
estimate qwen3-32b --gpu rtx-4090 --task infer --engine llamacpp --quant gguf-q4_k_m --emit llamacpp
estimate llama-3.1-8b --gpu h100-sxm-80gb --count 8 --zero 2 --framework axolotl --emit axolotl
estimate llama-3.1-8b --gpu h100-sxm-80gb --task infer --engine sglang --emit sglang
estimate --app lammps --gpu rtx-4090 --task hpc --atoms 1000000 --json
estimate qwen2.5-0.5b --gpu rtx-4090 --method lora --batch 2 --seq 256 --trace --json
estimate qwen2.5-0.5b --gpu rtx-4090 --count 2 --method full --batch 2 --seq 256 --trace --json
recommend llama-3.1-70b --task infer --qps 20 --rent --spot --emit skypilot
"""


def calls() -> list[list[str]]:
    joined = CALLS.replace("\\\n", " ")  # a call may continue on the next line after a backslash
    return [shlex.split(line) for line in joined.strip().splitlines() if line.strip()]


def run_call(args: list[str]) -> dict[str, Any]:
    from typer.testing import CliRunner

    from gpuwise.cli.main import app

    result = CliRunner().invoke(app, args, env={"COLUMNS": "200", "NO_COLOR": "1"})
    return {"args": args, "exit_code": result.exit_code, "output": result.output}


def differences(old: Any, new: Any, where: str = "") -> list[str]:
    """The paths at which two JSON documents differ: a number beyond 1e-9 relative, or anything else unequal."""
    if isinstance(old, dict) and isinstance(new, dict):
        found = [f"{where}.{k}: only {'before' if k in old else 'after'}" for k in sorted(set(old) ^ set(new))]
        for key in sorted(set(old) & set(new)):
            found += differences(old[key], new[key], f"{where}.{key}")
        return found
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return [f"{where}: {len(old)} items before, {len(new)} after"]
        return [d for i, (a, b) in enumerate(zip(old, new, strict=False)) for d in differences(a, b, f"{where}[{i}]")]
    numbers = (int, float)
    if isinstance(old, numbers) and isinstance(new, numbers) and not isinstance(old, bool):
        if math.isclose(old, new, rel_tol=1e-9, abs_tol=1e-12):
            return []
        return [f"{where}: {old} -> {new}"]
    return [] if old == new else [f"{where}: {str(old)[:160]!r} -> {str(new)[:160]!r}"]


def compare(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    if before["exit_code"] != after["exit_code"]:
        return [f"exit code {before['exit_code']} -> {after['exit_code']}: {after['output'][-300:]!r}"]
    try:
        return differences(json.loads(before["output"]), json.loads(after["output"]))
    except ValueError:
        old, new = before["output"].splitlines(), after["output"].splitlines()
        return [f"line {i}: {a!r} -> {b!r}" for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b][:20] + (
            [f"{len(old)} lines before, {len(new)} after"] if len(old) != len(new) else [])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path, help="run every call and store the answers here (JSON lines)")
    group.add_argument("--compare", type=Path, help="run every call and compare with the answers stored here")
    opts = parser.parse_args()
    results = [run_call(args) for args in calls()]
    if opts.write:
        opts.write.write_text("".join(json.dumps(r) + "\n" for r in results))
        print(f"{len(results)} calls written to {opts.write}")
        return 0
    stored = {tuple(r["args"]): r for r in map(json.loads, opts.compare.read_text().splitlines())}
    changed = 0
    for result in results:
        before = stored.get(tuple(result["args"]))
        found = ["not in the stored run"] if before is None else compare(before, result)
        if found:
            changed += 1
            print(f"== {shlex.join(result['args'])}\n  " + "\n  ".join(found[:12]))
    print(f"{changed} of {len(results)} calls differ")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
