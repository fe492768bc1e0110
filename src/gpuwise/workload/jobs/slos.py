"""Latency SLOs of a service: P99 TTFT, TPOT and end-to-end, any of them at once, and which one binds.

Each is a per-request figure whose 99th percentile is taken over the requests, as the serving benchmarks compute
them (vllm-project/vllm@def9ce85 vllm/benchmarks/serve.py calculate_metrics: ``ttfts``, ``tpots``, ``e2els`` and
``np.percentile`` of each; ai-dynamo/aiperf@d2d69500 src/aiperf/metrics/types/inter_token_latency_metric.py
InterTokenLatencyMetric, a per-record metric):

    TTFT  arrival -> first token
    TPOT  (e2e - TTFT) / (output tokens - 1): the request's mean time per output token after the first; a request
          of one output token has none, and counts as meeting any TPOT target (vLLM's goodput takes it as 0)
    e2e   arrival -> last token

A rate meets the SLOs when every P99 given is within its target (vLLM's ``--goodput ttft:MS tpot:MS e2el:MS``
counts a request good only when all hold). The SLO that binds is the one with the least headroom: the largest
P99 / target at the rate found, or, where no rate meets them, the one that misses most at a trickle of requests.

``--p99-ms X [--slo e2e|ttft]`` is the older spelling of ``--e2e-p99-ms X`` / ``--ttft-p99-ms X``: both are read
into the three fields here (:func:`normalise_slos`), the one definition the flags, scenario files, the web app and
the MCP tool share.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SLO_NAMES = ("ttft", "tpot", "e2e")
LABELS = {"ttft": "TTFT", "tpot": "TPOT", "e2e": "end-to-end"}
FIELDS = {name: f"{name}_p99_ms" for name in SLO_NAMES}
DESCRIPTIONS = {
    "ttft": "P99 time-to-first-token SLO in ms (with --tpot-p99-ms and --e2e-p99-ms: all must hold)",
    "tpot": "P99 TPOT SLO in ms: each request's (end-to-end - TTFT) / (output tokens - 1), its P99 over requests "
            "as vllm bench serve and AIPerf compute it",
    "e2e": "P99 end-to-end latency SLO in ms (the same as --p99-ms)",
}


@dataclass(frozen=True)
class Slos:
    """The P99 targets a service must meet, in ms; None where not given."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    @property
    def targets_ms(self) -> dict[str, float]:
        """The given targets by name, in SLO_NAMES order."""
        values = {"ttft": self.ttft_ms, "tpot": self.tpot_ms, "e2e": self.e2e_ms}
        return {name: value for name, value in values.items() if value is not None}

    def __bool__(self) -> bool:
        return bool(self.targets_ms)

    def met(self, p99_ms: Mapping[str, float]) -> bool:
        """Every given target holds for these P99s (ms; a NaN TPOT, no request past its first token, holds)."""
        return all(_value(p99_ms, name) <= target for name, target in self.targets_ms.items())

    def binding(self, p99_ms: Mapping[str, float]) -> str | None:
        """The SLO with the least headroom: the largest P99 / target (the first in SLO_NAMES on a tie)."""
        ratios = {name: _value(p99_ms, name) / target for name, target in self.targets_ms.items()}
        return max(ratios, key=lambda name: ratios[name]) if ratios else None

    @property
    def headline(self) -> str:
        """The P99 an answer shows for every option alike, so that they compare: end-to-end where given, else TTFT,
        else TPOT (end-to-end with none)."""
        return next((name for name in ("e2e", "ttft", "tpot") if name in self.targets_ms), "e2e")

    def text(self) -> str:
        """'P99 TTFT <= 2,000 ms and TPOT <= 50 ms'."""
        parts = [f"{LABELS[name]} <= {target:,.4g} ms" for name, target in self.targets_ms.items()]
        return "P99 " + " and ".join(parts) if parts else ""

    def miss(self, p99_ms: Mapping[str, float], name: str | None = None) -> tuple[str, float]:
        """('P99 TPOT 6.75 ms > SLO 5 ms', 1.35): the SLO missed (``name``, else the one missed most) and by how
        much (P99 / target; 2 where unstable)."""
        name = name or self.binding(p99_ms) or next(iter(self.targets_ms))
        target, value = self.targets_ms[name], _value(p99_ms, name)
        shown = ms_text(value) if math.isfinite(value) else "unbounded (the queue grows)"
        return f"P99 {LABELS[name]} {shown} > SLO {ms_text(target)}", value / target if math.isfinite(value) else 2.0

    def within(self, binding: str | None) -> str:
        """'within P99 TTFT <= 500 ms and TPOT <= 20 ms (TPOT binds)'; 'at the planning utilisation' with none."""
        if not self:
            return "at the planning utilisation"
        binds = f" ({LABELS[binding]} binds)" if binding and len(self.targets_ms) > 1 else ""
        return f"within {self.text()}{binds}"

    @property
    def whole_answer_ms(self) -> float | None:
        """The bound on a model that answers at once (an encoder, a CNN): its first token is its last, so TTFT and
        end-to-end bound the same latency; the tighter of the two."""
        given = [v for v in (self.ttft_ms, self.e2e_ms) if v is not None]
        return min(given) if given else None


def ms_text(value: float) -> str:
    """'2,000 ms', '49.6 ms', '6.75 ms': three figures below 100 ms (a TPOT), whole ms above."""
    return f"{value:,.0f} ms" if value >= 100 else f"{value:.3g} ms"


def _value(p99_ms: Mapping[str, float], name: str) -> float:
    value = p99_ms.get(name, math.nan)
    return 0.0 if name == "tpot" and math.isnan(value) else value


def _valid_ms(value: object) -> bool:
    """A target the fields accept (0 < ms <= 1e9), so that a bad --p99-ms is refused under its own name."""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return not isinstance(value, bool) and math.isfinite(number) and 0 < number <= 1e9


def normalise_slos(data: Any) -> Any:
    """A model's raw fields with ``p99_ms`` (and ``slo``) moved into ``e2e_p99_ms`` or ``ttft_p99_ms``; a
    ValueError (one line) where the two spellings are mixed."""
    if not isinstance(data, dict):
        return data
    new = [FIELDS[name] for name in SLO_NAMES if data.get(FIELDS[name]) is not None]
    old, slo = data.get("p99_ms"), data.get("slo")
    if new and old is not None:
        raise ValueError(f"--p99-ms is the older spelling of one SLO; with --{new[0].replace('_', '-')} give every "
                         "SLO the new way: --ttft-p99-ms, --tpot-p99-ms and --e2e-p99-ms (--p99-ms X [--slo ttft] is "
                         "--e2e-p99-ms X [--ttft-p99-ms X])")
    if new and slo == "ttft":  # (a default "e2e" comes back from a dumped model: harmless)
        raise ValueError("--slo says what --p99-ms bounds; with --ttft-p99-ms, --tpot-p99-ms or --e2e-p99-ms leave "
                         "it out")
    if old is None or slo not in (None, "e2e", "ttft") or not _valid_ms(old):
        return data  # nothing to move, or the field validators name what is wrong, as --p99-ms and --slo
    key = slo or "e2e"
    out = {k: v for k, v in data.items() if k not in ("p99_ms", "slo")}
    out[FIELDS[key]] = old
    return out
