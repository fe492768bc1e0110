"""Serving mechanisms of the engines' schedulers, each worked by hand from the engine's own rule.

    token budget      vLLM V1 Scheduler.schedule: the running requests first (one token per decode), then prompt
                      chunks, all from max_num_batched_tokens (runtimes/engines.py VLLM_SCHEDULE)
    prefill alone     SGLang: a prefill batch runs by itself when there is one (enable_mixed_chunk False): the
                      decodes wait, and the chunk budget is not shared with them (SGLANG_SCHEDULE)
    scheduling ahead  vLLM async scheduling, SGLang's overlap loop, TensorRT-LLM's overlap scheduler: step N + 1 is
                      formed while step N runs, so a request arriving during step N runs in step N + 2
    closed loop       clients that drifted apart meet one another's prompts rarely; started together with equal
                      lengths, they meet every round
"""

from __future__ import annotations

import math

import pytest

from gpuwise.estimate.serving.simulate import Policy, Request, closed_loop_requests, simulate, steady_phases
from gpuwise.runtimes.engines import ENGINES

PREFILL_S = 0.1  # one iteration's prefill, whatever its tokens (flat: the counts of iterations show)
DECODE_S = 0.01


def _long_prompt_ttft_s(policy: Policy, *, decoding: int, prompt: int = 32_768, budget: int = 8192) -> float:
    """TTFT of one ``prompt``-token request arriving at 0.05 s, during the first iteration (0 to 0.1 s) that
    prefills ``decoding`` one-token prompts whose 1,000-token answers then keep decoding."""
    requests = [Request(0.0, 1, 1000) for _ in range(decoding)] + [Request(0.05, prompt, 2)]
    result = simulate(requests, decode_step=lambda batch, context: DECODE_S, prefill=lambda tokens: PREFILL_S,
                      max_batch=64, kv_capacity_tokens=1e9, max_batched_tokens=budget, policy=policy)
    short_ttft_s = PREFILL_S if decoding else 0.0
    return (result.ttft_mean_ms * len(requests) - decoding * short_ttft_s * 1e3) / 1e3  # the long request's


def test_a_32k_prompt_under_an_8192_token_budget_takes_4_iterations() -> None:
    """Nothing else running: 32,768 / 8,192 = 4 chunks. The engine is idle when the request arrives, so the first
    iteration is its own: it starts at 0.05 s and its first token comes after 4 iterations of 0.1 s."""
    requests = [Request(0.05, 32_768, 2)]
    result = simulate(requests, decode_step=lambda batch, context: DECODE_S, prefill=lambda tokens: PREFILL_S,
                      max_batch=8, kv_capacity_tokens=1e9, max_batched_tokens=8192)
    assert result.ttft_mean_ms == pytest.approx(4 * PREFILL_S * 1e3)


def test_vllm_decodes_take_their_tokens_from_the_budget_first() -> None:
    """vLLM: 8 sequences decode, so each step leaves 8,192 - 8 = 8,184 tokens of prompt: ceil(32,768 / 8,184) = 5
    steps of prefill + decode (0.11 s), from the second iteration (0.1 s): first token at 0.1 + 5 x 0.11 = 0.65 s,
    a TTFT of 0.60 s."""
    assert math.ceil(32_768 / (8192 - 8)) == 5
    ttft_s = _long_prompt_ttft_s(Policy(mixes_prefill=True), decoding=8)
    assert ttft_s == pytest.approx(0.1 + 5 * (PREFILL_S + DECODE_S) - 0.05)


def test_sglang_prefills_alone_on_the_whole_chunk_and_the_decodes_wait() -> None:
    """SGLang: the prefill batch runs alone (PrefillAdder gets 0 mixed-with-decode tokens): 4 chunks of 8,192 in 4
    prefill-only iterations of 0.1 s from 0.1 s: first token at 0.5 s (TTFT 0.45 s). The 8 decoding sequences
    stall meanwhile: their 999 decode steps of 10 ms take 4 x 0.1 s more, and they share the last ones with the
    long request, which decodes its one other token beside them."""
    ttft_s = _long_prompt_ttft_s(Policy(mixes_prefill=False), decoding=8)
    assert ttft_s == pytest.approx(0.1 + 4 * PREFILL_S - 0.05)
    requests = [Request(0.0, 1, 1000) for _ in range(8)] + [Request(0.05, 32_768, 2)]
    mixed, alone = (simulate(requests, decode_step=lambda batch, context: DECODE_S,
                             prefill=lambda tokens: PREFILL_S, max_batch=64, kv_capacity_tokens=1e9,
                             max_batched_tokens=8192, policy=Policy(mixes_prefill=m)) for m in (True, False))
    short_tpot_alone_ms = (999 * DECODE_S + 4 * PREFILL_S) / 999 * 1e3
    short_tpot_mixed_ms = (999 * DECODE_S + 5 * PREFILL_S) / 999 * 1e3  # 5 steps carry a chunk beside the decode
    assert alone.tpot_ms[0] == pytest.approx(short_tpot_alone_ms)
    assert mixed.tpot_ms[0] == pytest.approx(short_tpot_mixed_ms)


def test_a_scheduler_one_step_ahead_runs_an_arrival_one_step_later() -> None:
    """Scheduling ahead: the request arriving during iteration 1 (0 to 0.1 s) misses iteration 2, formed while 1
    ran -- a decode-only step, 0.1 to 0.11 s -- and starts in iteration 3: with vLLM's budget its first token comes
    after 5 steps of 0.11 s, at 0.66 s, a TTFT of 0.61 s: one decode step more than without."""
    ttft_s = _long_prompt_ttft_s(Policy(mixes_prefill=True, ahead=1), decoding=8)
    assert ttft_s == pytest.approx(0.1 + DECODE_S + 5 * (PREFILL_S + DECODE_S) - 0.05)


def test_an_idle_engine_schedules_an_arrival_at_once_even_when_it_schedules_ahead() -> None:
    """Nothing in flight, nothing formed ahead: the 32k request starts when it arrives (4 x 0.1 s)."""
    result = simulate([Request(0.05, 32_768, 2)], decode_step=lambda batch, context: DECODE_S,
                      prefill=lambda tokens: PREFILL_S, max_batch=8, kv_capacity_tokens=1e9,
                      max_batched_tokens=8192, policy=Policy(ahead=1))
    assert result.ttft_mean_ms == pytest.approx(4 * PREFILL_S * 1e3)


def test_closed_loop_clients_spread_over_their_cycle_meet_one_prompt_at_a_time() -> None:
    """Four clients, 100-token prompts at 1 ms a token, 10 ms decode steps, 1,001 output tokens (a 10 s cycle).
    Started together, with equal lengths, they stay in step: each round all four finish in one iteration and send
    again to an idle engine, and their four prompts share one iteration: TTFT 0.4 s. Spread over their
    cycle, a prompt meets another one in the same iteration with a chance of about 3 x 0.11 / 10: TTFT is the
    missed iteration plus its own prefill and decode step, 0.01 + 0.1 + 0.01 = 0.12 s."""
    requests = closed_loop_requests(80, 100, 1001, seed=0)

    def run(phases: list[float] | None) -> float:
        result = simulate(requests, decode_step=lambda batch, context: DECODE_S,
                          prefill=lambda tokens: tokens * 0.001, max_batch=64, kv_capacity_tokens=1e9,
                          concurrency=4, phases_s=phases)
        return result.ttft_mean_ms / 1e3

    assert run(None) == pytest.approx(0.40, rel=1e-6)
    assert run(steady_phases(4, 10.1, seed=3)) == pytest.approx(0.12, rel=0.05)


def test_steady_phases_are_one_cycle_wide_sorted_and_seeded() -> None:
    phases = steady_phases(25, 8.0, seed=7)
    assert len(phases) == 25 and phases[0] == 0.0 and phases == sorted(phases) and phases[-1] < 8.0
    assert phases == steady_phases(25, 8.0, seed=7) and phases != steady_phases(25, 8.0, seed=8)


@pytest.mark.parametrize(("engine", "mixes", "ahead", "cited"), [
    ("vllm", True, 1, "vllm/v1/core/sched/scheduler.py"),
    ("sglang", False, 1, "is_mixed_chunk"),
    ("trtllm", True, 1, "Overlap Scheduler"),
])
def test_each_engines_scheduler_is_its_profiles(engine: str, mixes: bool, ahead: int, cited: str) -> None:
    profile = ENGINES[engine]
    assert profile.mixes_prefill.value is mixes and profile.schedules_ahead.value == ahead
    assert cited in profile.mixes_prefill.source + profile.schedules_ahead.source
    assert "@" in profile.schedules_ahead.source  # read at a commit


def test_clients_that_take_their_time_drift_apart_and_obey_the_response_time_law() -> None:
    """Four clients, 100-token prompts at 1 ms a token, 10 ms decode steps, 101 output tokens. With no turnaround
    they finish together and send together: four prompts in one iteration, TTFT 0.4 s. With a mean turnaround Z of
    5 s (exponential) their requests come apart and mostly meet an idle engine: a lone prompt takes 0.1 s. The
    interactive response time law holds either way: throughput X = N / (R + Z) for N clients with response time R
    (Denning and Buzen, 'The Operational Analysis of Queueing Network Models', 1978)."""
    requests = closed_loop_requests(400, 100, 101, seed=0)

    def run(turnaround_s: float):  # type: ignore[no-untyped-def]
        return simulate(requests, decode_step=lambda batch, context: DECODE_S,
                        prefill=lambda tokens: tokens * 0.001, max_batch=64, kv_capacity_tokens=1e9,
                        concurrency=4, policy=Policy(turnaround_s=turnaround_s), seed=5)

    together, apart = run(0.0), run(5.0)
    assert together.ttft_mean_ms == pytest.approx(400.0, rel=1e-6)
    assert apart.ttft_mean_ms < 0.5 * together.ttft_mean_ms
    mean_e2e_s = (apart.ttft_mean_ms + 100 * apart.tpot_mean_ms) / 1e3  # each request: TTFT + 100 x its TPOT
    assert apart.requests_per_s == pytest.approx(4 / (mean_e2e_s + 5.0), rel=0.1)
