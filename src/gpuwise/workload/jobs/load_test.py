"""What `gpuwise serve-sim` simulates: Poisson arrivals at a rate or a closed loop of clients, and the SLO whose
highest rate it finds. Each field is the one definition of its flag (flags.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuwise.flags import Flag
from gpuwise.workload.jobs.slos import DESCRIPTIONS, Slos, normalise_slos

LOAD = "Load test"


class LoadTest(BaseModel):
    """What `gpuwise serve-sim` simulates: Poisson arrivals at a rate, and the SLO whose highest rate it finds."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    qps: Annotated[float, Field(gt=0, le=1_000_000), Flag(frozenset({"serve-sim"}), LOAD)] = Field(
        default=10.0, description="request rate to simulate (requests per second, Poisson arrivals)")
    concurrency: Annotated[int | None, Field(ge=1, le=8192), Flag(frozenset({"serve-sim"}), LOAD)] = Field(
        default=None, description="clients in a closed loop, each sending its next request when the last finished "
                                  "(as vllm bench serve --max-concurrency): TTFT and TPOT at that concurrency")
    p99_ms: Annotated[float | None, Field(gt=0, le=1e9), Flag(frozenset({"serve-sim"}), LOAD, name="--p99-ms")] = (
        Field(default=None, description="P99 end-to-end latency SLO (with --slo ttft: time to first token): also "
                                      "find the highest rate that meets it; the same as --e2e-p99-ms"))
    slo: Annotated[Literal["e2e", "ttft"], Flag(frozenset({"serve-sim"}), LOAD)] = Field(
        default="e2e", description="what the SLO bounds: end-to-end latency or time to first token")
    # -- SLOs (workload/jobs/slos.py): --p99-ms [--slo] is read into these three; any of them at once --
    ttft_p99_ms: Annotated[float | None, Field(gt=0, le=1e9), Flag(frozenset({"serve-sim"}), LOAD)] = Field(
        default=None, description=DESCRIPTIONS["ttft"])
    tpot_p99_ms: Annotated[float | None, Field(gt=0, le=1e9), Flag(frozenset({"serve-sim"}), LOAD)] = Field(
        default=None, description=DESCRIPTIONS["tpot"])
    e2e_p99_ms: Annotated[float | None, Field(gt=0, le=1e9), Flag(frozenset({"serve-sim"}), LOAD)] = Field(
        default=None, description=DESCRIPTIONS["e2e"])

    @model_validator(mode="before")
    @classmethod
    def _one_spelling_of_slos(cls, data: object) -> object:
        return normalise_slos(data)

    @property
    def slos(self) -> Slos:
        return Slos(self.ttft_p99_ms, self.tpot_p99_ms, self.e2e_p99_ms)
    # -- end of the SLOs --
    requests: Annotated[int, Field(ge=20, le=100_000), Flag(frozenset({"serve-sim"}), LOAD)] = Field(
        default=400, description="requests to simulate (at least 20 for percentiles)")
    seed: Annotated[int, Field(ge=0, le=2**32 - 1), Flag(frozenset({"serve-sim"}), LOAD)] = Field(
        default=0, description="random seed (same seed, same answer)")
    prefix_hit: Annotated[float, Field(ge=0, le=1), Flag(frozenset({"serve-sim"}), LOAD)] = Field(
        default=0.0, description="share of each prompt already in the prefix cache (vLLM automatic prefix caching, "
                                 "SGLang RadixAttention): only the rest is prefilled, at least its last token")
    disagg: Annotated[str | None, Field(pattern=r"^[1-9][0-9]{0,2}P[1-9][0-9]{0,2}D$"),
                      Flag(frozenset({"serve-sim"}), LOAD)] = Field(
        default=None, description="disaggregated prefill and decode, XPYD: X replicas only prefill, Y only decode, "
                                  "the KV cache moving between them (NVIDIA Dynamo, SGLang --disaggregation-mode, "
                                  "vLLM P/D connectors, TensorRT-LLM disaggregated serving); --count holds X + Y "
                                  "replicas; with --concurrency")
    length_dist: Annotated[Literal["fixed", "exponential"], Flag(frozenset({"serve-sim"}), LOAD)] = Field(
        default="fixed", description="input/output lengths: fixed, or exponential around the job's")
