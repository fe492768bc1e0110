"""Energy per output token at a load: the cards' board power at their utilisation, the hosts' share, the PUE.

    P_load = TDP x (s x f_prefill + (1 - s) x f_decode)       the board while it runs inference kernels
    P(u)   = P_idle + (P_load - P_idle) x u,  P_idle = TDP x f_idle
    J/token = (P(u) x GPUs + P_host) x PUE / output tokens per second
    electricity USD/Mtok = J/token x 1e6 / 3.6e6 J/kWh x USD/kWh;  its share = that / the answer's USD/Mtok

Legend: u the busy share of time at the load (serving: the engine's iterations over the simulated time; a batch
estimate: 1, busy while it generates); s the prefill share of the busy time; f_* the global power fractions of
TDP (constants.py: Splitwise's measured per-phase draws); P_host the hosts' draw (tco.host_w, the share TCO charges);
PUE and USD/kWh from :class:`tco.Usage`, the one definition ``tco`` and ``recommend`` also read.

Beside ownership: ``tco.wall_kw`` charges an owned card's hours of use at 70 % of TDP (constants.GPU_LOAD_POWER), an
average over whatever runs; it lies between the decode (0.58) and prefill (1.0) draws of this model, and both charge
the same host share and PUE. The fractions were measured on H100 and A100 (Splitwise) and are applied to every card
as global parameters, scaled by its own TDP; a card whose record carried a measured draw would replace them.

Worked example (tests/test_energy.py): one H100 SXM (700 W) busy 62 % of the time, a fifth of it prefilling:
P_load = 700 x (0.2 x 1.0 + 0.8 x 0.58) = 464.8 W; P_idle = 91 W; P = 91 + 373.8 x 0.62 = 322.8 W; with its
210 W host share and PUE 1.3 at 1,000 tokens/s: (322.8 + 210) x 1.3 / 1,000 = 0.693 J per output token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuwise.catalog import GPU
from gpuwise.estimate import constants as C
from gpuwise.estimate.cost import tco
from gpuwise.estimate.speed.inference import InferPerf
from gpuwise.workload.jobs.job import InferJob, Job

if TYPE_CHECKING:
    from gpuwise.estimate.speed.training import TrainPerf


@dataclass(frozen=True)
class Energy:
    """Joules per output token at one load, with every term that made it."""

    joules_per_output_token: float
    gpu_w: float  # one card's board power at this load
    gpus: int
    host_w: float  # the hosts' share for all ``gpus``
    pue: float
    busy_fraction: float
    prefill_share: float  # of the busy time
    output_tokens_per_s: float  # of all the cards together
    usd_per_kwh: float
    electricity_usd_per_mtok: float
    electricity_share: float | None  # of the answer's USD per million output tokens; None where it has no price

    @property
    def wall_w(self) -> float:
        """What the cards and their hosts draw from the facility, cooling included (x PUE)."""
        return (self.gpu_w * self.gpus + self.host_w) * self.pue


def board_power_w(tdp_w: float, busy_fraction: float, prefill_share: float) -> float:
    """One card's board power at ``busy_fraction`` of the time running kernels, ``prefill_share`` of that time
    prefilling: P_idle + (P_load - P_idle) x u (module docstring)."""
    u = min(max(busy_fraction, 0.0), 1.0)
    s = min(max(prefill_share, 0.0), 1.0)
    loaded = tdp_w * (s * C.PREFILL_POWER.value + (1 - s) * C.DECODE_POWER.value)
    idle = tdp_w * C.GPU_IDLE_POWER.value
    return idle + (loaded - idle) * u


def electricity_usd_per_mtok(joules_per_token: float, usd_per_kwh: float) -> float:
    """A million output tokens' energy in kWh (1 kWh = 3.6e6 J) at ``usd_per_kwh``."""
    return joules_per_token * 1e6 / C.JOULES_PER_KWH.value * usd_per_kwh


def energy_at(gpu: GPU, gpus: int, *, busy_fraction: float, prefill_share: float, output_tokens_per_s: float,
              usage: tco.Usage, usd_per_mtok: float | None = None) -> Energy | None:
    """The energy per output token of ``gpus`` cards of ``gpu`` making ``output_tokens_per_s`` together; None when
    they make no tokens (nothing to divide by)."""
    if gpus <= 0:
        return None
    return cards_energy([(gpu, busy_fraction, prefill_share)] * gpus, host_w=tco.host_w(gpu, gpus),
                        output_tokens_per_s=output_tokens_per_s, usage=usage, usd_per_mtok=usd_per_mtok)


def cards_energy(cards: Sequence[tuple[GPU, float, float]], *, host_w: float, output_tokens_per_s: float,
                 usage: tco.Usage, usd_per_mtok: float | None = None) -> Energy | None:
    """Cards each at its own (busy fraction, prefill share) -- a layer split's cards take turns -- and their hosts'
    ``host_w``; the Energy's per-card figures are the cards' means (busy ones weighted by their busy time)."""
    if output_tokens_per_s <= 0 or not cards:
        return None
    clamped = [(g, min(max(u, 0.0), 1.0), min(max(s, 0.0), 1.0)) for g, u, s in cards]
    board = sum(board_power_w(g.tdp_w, u, s) for g, u, s in clamped)
    busy = sum(u for _, u, _ in clamped)
    joules = (board + host_w) * usage.pue / output_tokens_per_s
    electricity = electricity_usd_per_mtok(joules, usage.usd_per_kwh)
    return Energy(joules, board / len(cards), len(cards), host_w, usage.pue, busy / len(cards),
                  sum(u * s for _, u, s in clamped) / busy if busy else 0.0, output_tokens_per_s, usage.usd_per_kwh,
                  electricity, electricity / usd_per_mtok if usd_per_mtok else None)


def batch_energy(gpu: GPU, gpus: int, *, ttft_ms: float, e2e_ms: float, output_tokens_per_s: float,
                 usage: tco.Usage, usd_per_mtok: float | None = None) -> Energy | None:
    """A fixed batch (`estimate --task infer`): busy the whole time it generates, prefilling for its TTFT of its
    end-to-end time."""
    share = ttft_ms / e2e_ms if e2e_ms > 0 else 0.0
    return energy_at(gpu, gpus, busy_fraction=1.0, prefill_share=share, output_tokens_per_s=output_tokens_per_s,
                     usage=usage, usd_per_mtok=usd_per_mtok)


def token_prefill_share(input_tokens: float, output_tokens: float) -> float:
    """The prefill share of a served load's busy time where the phases' times are not known (a recommendation's
    closed form): the prompt tokens' share of the tokens processed (constants.MIXED_STEP_PREFILL_SHARE)."""
    total = input_tokens + output_tokens
    return min(C.MIXED_STEP_PREFILL_SHARE.value * input_tokens / total, 1.0) if total > 0 else 0.0



def estimate_energy(gpu: GPU, job: Job, perf: TrainPerf | InferPerf | None, usage: tco.Usage,
                    usd_per_mtok: float | None = None) -> Energy | None:
    """`estimate --task infer`: every replica serves its batch at once, busy while it generates; None for training,
    for a model that makes no tokens, or without speed."""
    if not isinstance(perf, InferPerf) or not isinstance(job, InferJob) or not perf.output_tokens_per_s:
        return None
    if perf.ttft_ms is None or not perf.e2e_latency_ms:
        return None
    return batch_energy(gpu, job.count, ttft_ms=perf.ttft_ms, e2e_ms=perf.e2e_latency_ms,
                        output_tokens_per_s=perf.output_tokens_per_s * perf.replicas, usage=usage,
                        usd_per_mtok=usd_per_mtok)

