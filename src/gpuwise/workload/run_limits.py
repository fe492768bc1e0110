"""What a measured run cannot have done on its cards: the floors physics puts under its figures, and the checks a
calibration's rates must pass before anything applies them.

Floors, each a lower bound that holds whatever the software did (matmul FLOPs only; attention and overheads add):
- prefill: a prompt of L tokens through a model of N active parameters is at least 2·N·L FLOP (Kaplan et al. 2020,
  §2.1: C_forward ≈ 2N per token), done at no more than the cards' fastest dense rate at any precision;
- decode: each generated token at batch 1 reads every active weight byte once, at no more than the cards' memory
  bandwidth (llama-bench tg; the file's own ``model_size`` is the bytes).
A run faster than its floor did less work than its settings say: its prompts were cached, its model is a mixture of
experts, or it ran on more or other GPUs. The explanation names which, from what the file holds.

A calibration rate (the matmul rate or memory bandwidth that would make gpuwise's prediction match the run) above
the card's datasheet peak, or below 1% of it, calibrates nothing: the prediction's assumptions, not the card, are off.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuwise import runtimes
from gpuwise.catalog import GPU
from gpuwise.workload.exports import MeasuredRun

BELOW_PEAK = 0.01  # a working card, even throttled, reaches more than 1% of its datasheet rates
_PRECISIONS = ("fp4", "fp8", "int8", "fp16", "bf16", "tf32", "fp32")


@dataclass(frozen=True)
class Breach:
    """A figure beyond what the cards can do: ``value`` against ``limit`` (same unit)."""

    figure: str  # "prefill", "decode", "gemm_tflops", "memory_gb_s"
    run: str
    value: float
    limit: float
    unit: str
    fact: str  # the figure in words, with the file's numbers

    @property
    def factor(self) -> float:
        return self.value / self.limit

    def record(self) -> dict[str, Any]:
        return {"figure": self.figure, "run": self.run, "value": self.value, "limit": self.limit, "unit": self.unit}


@dataclass(frozen=True)
class Setting:
    """What the prediction assumed beside the file: the card and how it was named, the GPUs, the engine."""

    card: GPU
    gpus: int  # GPUs one run's figures are spread over (TP, or the devices a single-stream test lists)
    engine: str
    gpu_named: str  # "the file" or "--gpu"
    dense_from_file: bool  # the model is the file's parameter count taken as dense (no model id, no --model)


def fastest_dense(card: GPU) -> tuple[float, str]:
    """The card's highest dense datasheet rate at any precision, FLOP/s (OP/s for INT8), and that precision."""
    rates = [(card.peak_flops(d, fp16_accumulate=True) or 0.0, d) for d in _PRECISIONS]  # type: ignore[arg-type]
    return max(rates)


def _prefill(run: MeasuredRun, tokens: float, seconds: float, active: float, setting: Setting, fact: str) -> Breach:
    peak, precision = fastest_dense(setting.card)
    need, cards = 2 * active * tokens / seconds, setting.gpus
    bf16 = setting.card.peak_flops("bf16") or peak
    fastest = f", {need / (cards * peak):.1f}x even at {precision.upper()}" if precision != "bf16" else ""
    return Breach("prefill", run.label, need, cards * peak, "FLOP/s",
                  f"{fact}: that is at least {need / 1e12:,.0f} TFLOP/s of matmuls, {need / (cards * bf16):.1f}x the "
                  f"BF16 dense peak of {cards} {setting.card.id} ({cards * bf16 / 1e12:,.0f} TFLOP/s){fastest}")


def _serving_floors(run: MeasuredRun, active: float, setting: Setting) -> list[Breach]:
    out = []
    if run.last_first_token_ms and run.input_tokens_total and run.requests:
        out.append(_prefill(run, run.input_tokens_total, run.last_first_token_ms / 1e3, active, setting,
                            f"its {run.requests} prompts ({run.input_tokens_total:,.0f} tokens) all had a first token "
                            f"within {run.last_first_token_ms:,.0f} ms"))
    if run.statistic == "mean" and run.ttft_ms and run.input_len:
        out.append(_prefill(run, run.input_len, run.ttft_ms / 1e3, active, setting,
                            f"a mean prompt of {run.input_len:,.0f} tokens had its first token in a mean "
                            f"{run.ttft_ms:,.1f} ms"))
    return out


def _bench_floors(run: MeasuredRun, active: float, total: float, setting: Setting) -> list[Breach]:
    if not run.tokens_per_s:
        return []
    if run.prompt_tokens and not run.generated_tokens:
        return [_prefill(run, run.tokens_per_s, 1.0, active, setting, f"pp{run.prompt_tokens} at "
                                                                       f"{run.tokens_per_s:,.0f} tokens/s")]
    if not run.weight_bytes:
        return []
    read = run.weight_bytes * active / total  # bytes per generated token
    limit = setting.gpus * setting.card.memory_bandwidth_gb_s * 1e9
    rate = read * run.tokens_per_s
    return [Breach("decode", run.label, rate, limit, "B/s",
                   f"tg{run.generated_tokens} at {run.tokens_per_s:,.1f} tokens/s reads {read / 1e9:,.2f} GB per "
                   f"token: {rate / 1e9:,.0f} GB/s, {rate / limit:.1f}x the {setting.gpus} {setting.card.id}'s "
                   f"{limit / 1e9:,.0f} GB/s")]


def floors(runs: Sequence[MeasuredRun], *, active_params: float, total_params: float,
           setting: Setting) -> list[Breach]:
    """Every figure of ``runs`` faster than its physical floor on the setting's cards."""
    found: list[Breach] = []
    for run in runs:
        checks = (_bench_floors(run, active_params, total_params, setting) if run.bench.single_stream.value else
                  _serving_floors(run, active_params, setting))
        found += [b for b in checks if b.value > b.limit]
    return found


def _against(value: float, peak: float) -> str:
    return "above" if value > peak else f"{value / peak:.1%} of"


def beyond_datasheet(card: GPU, gemm_tflops: Mapping[Any, float] | None, memory_gb_s: float | None, *,
                     above: float = 1.0) -> list[tuple[str, float, float]]:
    """(dtype or "memory", rate, datasheet figure) for each rate outside [1%, ``above``] of the card's datasheet: a
    matmul rate in TFLOP/s against the dtype's dense peak, a memory rate in GB/s against the bandwidth. Every
    calibration record is held to this, whichever tool made it."""
    found = []
    for dtype, tflops in (gemm_tflops or {}).items():
        peak = (card.peak_flops(dtype) or 0.0) / 1e12
        if peak and not BELOW_PEAK * peak <= tflops <= above * peak:
            found.append((str(dtype), tflops, peak))
    bandwidth = card.memory_bandwidth_gb_s
    if memory_gb_s and not BELOW_PEAK * bandwidth <= memory_gb_s <= above * bandwidth:
        found.append(("memory", memory_gb_s, bandwidth))
    return found


def rate_breaches(calibration: Mapping[str, Any], card: GPU, basis: str) -> list[Breach]:
    """The calibration's matmul rates and memory bandwidth outside [1%, 100%] of the card's datasheet peak."""
    found = []
    for what, rate, sheet in beyond_datasheet(card, calibration.get("gemm_tflops"), calibration.get("memory_gb_s")):
        if what == "memory":
            found.append(Breach("memory_gb_s", basis, rate, sheet, "GB/s",
                                f"the decode memory rate that matches the run, {rate:,.0f} GB/s, is "
                                f"{_against(rate, sheet)} {card.id}'s datasheet {sheet:,.0f} GB/s"))
        else:
            found.append(Breach("gemm_tflops", basis, rate, sheet, "TFLOP/s",
                                f"the prefill matmul rate that matches the run, {rate:,.1f} TFLOP/s, is "
                                f"{_against(rate, sheet)} {card.id}'s {what.upper()} dense peak of {sheet:,.1f}"))
    return found


def _cache_hits(run: MeasuredRun, engine: str) -> str | None:
    """Prefix-cache hits as a suspect, where the engine caches prefixes unless told not to (its profile) and the
    file does not say the cache was off."""
    caching = runtimes.engine(engine).prefix_caching if engine in runtimes.ENGINE_IDS else None
    if run.prefix_cache is False or caching is None:
        return None
    return f"prefix-cache hits ({caching.value})"


def _why_prefill(breach: Breach, run: MeasuredRun, setting: Setting) -> str:
    cards = math.ceil(breach.factor * setting.gpus)
    if run.bench.single_stream.value:  # one prompt at batch 1: no cache, no other requests
        return ("likely a mixture of experts, which computes with only its active parameters: give --model"
                if setting.dense_from_file else f"likely not {setting.gpus} {setting.card.id} (check --gpu)")
    cache = _cache_hits(run, setting.engine)
    more = f"more GPUs than --tp {setting.gpus} ({cards} of these cards would do)"
    if cache and cards > 8:  # no single node of this card computes it
        return (f"so most prompt tokens were not computed: likely {cache}; not the TP or the GPU ({cards} of these "
                "cards would be needed even at their fastest precision)")
    return f"likely {cache + ' or ' if cache else ''}{more}, or another GPU than {setting.card.id}"


def _why_decode(setting: Setting) -> str:
    if setting.dense_from_file:
        return ("likely a mixture of experts, which reads only its active experts per token; the file gives total "
                "parameters only: give --model with the model's config.json")
    return f"likely not {setting.gpus} {setting.card.id} (check --gpu and the file's model_size)"


def _why_rate(breach: Breach, run: MeasuredRun | None, setting: Setting) -> str:
    if breach.value < breach.limit:
        return ("so the measured time holds more than the work gpuwise modelled (queueing, a cold start, reasoning "
                "tokens the tool does not count as output)")
    named = f"--gpu {setting.card.id} (named by {setting.gpu_named})"
    lengths = (f"the lengths (the file's mean {run.input_len:,.0f} prompt and {run.output_len:,.0f} output tokens per "
               "request)" if run and run.input_len and run.output_len else "the lengths")
    if breach.figure == "gemm_tflops":
        suspects = [s for s in (_cache_hits(run, setting.engine) if run else None, f"--tp {setting.gpus}", named,
                                lengths) if s]
    else:
        suspects = ["the weights' format (gpuwise assumed the checkpoint's own; an FP8 or 4-bit one reads fewer "
                    "bytes per token)", f"--tp {setting.gpus}", named, "speculative decoding"]
    return "gpuwise's prediction assumed more work than the run did; check " + ", then ".join(suspects)


def explain(breaches: Sequence[Breach], runs: Sequence[MeasuredRun], setting: Setting) -> str:
    """One line: what is beyond the cards and which assumption is likely wrong, floors first (they need no model of
    the software)."""
    by_label = {r.label: r for r in runs}
    first = max((b for b in breaches if b.figure in ("prefill", "decode")), key=lambda b: b.factor, default=None)
    if first is not None:
        run = by_label[first.run]
        why = _why_prefill(first, run, setting) if first.figure == "prefill" else _why_decode(setting)
        return f"{first.fact}; {why}"
    rate = breaches[0]
    return f"{rate.fact}; {_why_rate(rate, by_label.get(rate.run), setting)}"
