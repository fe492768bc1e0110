"""What `gpuwise serve-sim` simulates: Poisson arrivals at a rate or a closed loop of clients, and the SLO whose
highest rate it finds. Each field is the one definition of its flag (flags.py)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from gpuwise.flags import Flag
from gpuwise.workload.jobs.slos import DESCRIPTIONS, Slos, normalise_slos

LOAD = "Load test"
SESSIONS = "Sessions"


class LoadTest(BaseModel):
    """What `gpuwise serve-sim` simulates: Poisson arrivals at a rate, and the SLO whose highest rate it finds."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    qps: Annotated[float, Field(gt=0, le=1_000_000), Flag(frozenset({"serve-sim"}), LOAD)] = Field(
        default=10.0, description="request rate to simulate (requests per second, Poisson arrivals; with --turns, "
                                 "sessions per second)")
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

    # Sessions (issue 40): multi-turn conversations whose context grows turn by turn and whose prefixes the engine
    # reuses (its profile's kv_reuse); --input-len and --output-len are each turn's new input and its answer.
    turns: Annotated[int | None, Field(ge=1, le=1000), Flag(frozenset({"serve-sim"}), SESSIONS)] = Field(
        default=None, description="turns per session: turn k's prompt is the system prompt, every earlier turn's "
                                  "input and output, and the new input; --qps then counts sessions per second and "
                                  "--concurrency users each running sessions one after another")
    think_time_s: Annotated[float | None, Field(ge=0, le=86_400), Flag(frozenset({"serve-sim"}), SESSIONS)] = Field(
        default=None, description="seconds between a turn's answer and the session's next turn (with --turns; "
                                  "default 0)")
    system_prompt_len: Annotated[int, Field(ge=0, le=10_000_000), Flag(frozenset({"serve-sim"}), SESSIONS)] = Field(
        default=0, description="tokens of a system prompt every session shares (cached once)")
    kv_offload_gib: Annotated[float, Field(ge=0, le=1_000_000), Flag(frozenset({"serve-sim"}), SESSIONS)] = Field(
        default=0.0, description="host memory per replica, GiB, that keeps prefixes evicted from the GPU (vLLM's "
                                 "offloading connector or LMCache, SGLang HiCache); a turn reloads them over the "
                                 "card's host link when that is faster than prefilling them again")

    @model_validator(mode="after")
    def _sessions(self) -> LoadTest:
        if self.turns is None and self.think_time_s is not None:
            raise ValueError("--think-time-s is the pause between a session's turns: give --turns N too")
        if self.turns is None and self.kv_offload_gib:
            raise ValueError("--kv-offload-gib keeps evicted session prefixes in host memory: give --turns N too")
        if self.turns is None and self.system_prompt_len:
            raise ValueError("--system-prompt-len is shared by sessions: give --turns N too (or --prefix-hit for "
                             "a stateless stream)")
        if self.turns is not None and self.length_dist != "fixed":
            raise ValueError("--length-dist exponential draws independent requests; a session's turns have the "
                             "fixed --input-len and --output-len: leave it out with --turns")
        if self.turns is not None and self.prefix_hit:
            raise ValueError("--prefix-hit is for a stateless stream; with --turns the hits follow from the "
                             "sessions and the engine's cache")
        return self
