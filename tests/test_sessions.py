"""Sessions and prefix caching (issue 40, point 1), against cases worked by hand.

The serving cases run the simulator on a step model simple enough to work by hand: a prefill of n prompt tokens
takes n x 0.1 ms (10,000 tokens/s, linear: batching prompts gains nothing), a decode step 5 ms. The engine facts are
the engines' own: vLLM hashes whole 16-token blocks and recomputes a fully cached prompt's last token
(vllm-project/vllm@003df296 vllm/v1/core/kv_cache_manager.py KVCacheManager.get_computed_blocks; CacheConfig
.DEFAULT_BLOCK_SIZE = 16), SGLang's radix tree matches token by token (page_size 1).
"""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from gpuwise import runtimes
from gpuwise.api import model
from gpuwise.catalog.catalog import load_catalog
from gpuwise.cli.main import app
from gpuwise.estimate.plan import InferPlan, resolve
from gpuwise.estimate.serving.capacity import replica
from gpuwise.estimate.serving.load import highest_rate
from gpuwise.estimate.serving.prefix_cache import PrefixCache, reusable_tokens
from gpuwise.estimate.serving.session_load import session_serving
from gpuwise.estimate.serving.sessions import SessionWorkload, expected_hit_rate, session_stream
from gpuwise.estimate.serving.simulate import LoadResult, Sessions, simulate
from gpuwise.estimate.speed.inference import decode_step_s
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.jobs.slos import Slos

runner = CliRunner()
PREFILL_S_PER_TOKEN = 1e-4
DECODE_STEP_S = 5e-3


def _run(work: SessionWorkload, rate: float, *, granularity: int, pool_tokens: float, sessions: int = 100,
         host_tokens: float = 0.0, pair_s: float = 0.0, planned_keys: float = 0.0) -> LoadResult:
    """``sessions`` Poisson sessions at ``rate``/s through the simulator on the hand-workable step model."""
    stream = session_stream(work, sessions, qps=rate, seed=1)
    cache = PrefixCache(granularity=granularity, shared_tokens=work.system_prompt_len if granularity else 0,
                        host_tokens=host_tokens, reload_s=lambda n: math.inf, recompute_s=lambda n, after: 0.0)
    return simulate(stream.requests, decode_step=lambda batch, context: DECODE_STEP_S,
                    prefill=lambda tokens: tokens * PREFILL_S_PER_TOKEN, max_batch=256, kv_capacity_tokens=pool_tokens,
                    sessions=Sessions(stream.session_of, cache, pair_s, planned_keys), follow=stream.follow)


def test_a_shared_prefix_that_halves_prefill_raises_the_rate_within_a_ttft_slo() -> None:
    # one-turn sessions, one answer token: a 2,000-token prompt of which 1,000 are the shared system prompt
    work = SessionWorkload(turns=1, think_time_s=0.0, system_prompt_len=1000, input_len=1000, output_len=1)
    alone_hit = _run(work, 0.05, granularity=1, pool_tokens=1e6)
    alone_miss = _run(work, 0.05, granularity=0, pool_tokens=1e6)
    # by hand: a lone prompt's TTFT is its prefill, 2,000 x 0.1 ms = 200 ms; with the prefix cached 1,000 x 0.1 ms
    assert alone_miss.ttft_ms[0] == pytest.approx(200.0)
    assert alone_hit.ttft_ms[0] == pytest.approx(100.0)
    assert alone_hit.prefix_cache is not None and alone_hit.prefix_cache.hit_tokens == 99 * 1000  # all but the first
    # the highest rate with P99 TTFT <= 1 s: without reuse the prefill alone does 1 / 0.2 s = 5 prompts/s at most,
    # so no rate above 5/s is stable; with the halved prefill a rate above 5/s is (the bound is 10/s)
    with_hits, _ = highest_rate(lambda r: _run(work, r, granularity=1, pool_tokens=1e6), slos=Slos(ttft_ms=1000),
                                low=1.0, high=20.0, iterations=7)
    without, _ = highest_rate(lambda r: _run(work, r, granularity=0, pool_tokens=1e6), slos=Slos(ttft_ms=1000),
                              low=1.0, high=20.0, iterations=7)
    assert without < 5.0 < with_hits < 10.0


def test_sessions_whose_kv_exceeds_the_pool_lose_their_prefixes_and_rate() -> None:
    # four turns of 500 new tokens and 50 answered, 2 s apart: turn k's prompt is 500 + 550 k, of which the 550 k
    # of the last turn's context are cached: 550 x (0 + 1 + 2 + 3) = 3,300 of 4 x 500 + 3,300 = 5,300 prompt tokens
    work = SessionWorkload(turns=4, think_time_s=2.0, system_prompt_len=0, input_len=500, output_len=50)
    held = _run(work, 2.0, granularity=1, pool_tokens=1e6)
    assert held.prefix_cache is not None and held.prefix_cache.evicted_tokens == 0
    assert held.prefix_cache.hit_rate == pytest.approx(3300 / 5300)
    # a pool of 6,000 tokens holds the running turns (the longest, 2,150 + 50) but not ~15 live sessions' contexts
    small = _run(work, 2.0, granularity=1, pool_tokens=6000)
    assert small.prefix_cache is not None and small.prefix_cache.evicted_tokens > 0
    assert small.prefix_cache.hit_rate < held.prefix_cache.hit_rate
    big_rate, _ = highest_rate(lambda r: _run(work, r, granularity=1, pool_tokens=1e6), slos=Slos(ttft_ms=300),
                               low=0.5, high=8.0, iterations=6)
    small_rate, _ = highest_rate(lambda r: _run(work, r, granularity=1, pool_tokens=6000), slos=Slos(ttft_ms=300),
                                 low=0.5, high=8.0, iterations=6)
    assert small_rate < big_rate


def test_each_turn_prefills_only_its_new_input_when_the_history_is_cached() -> None:
    # sessions far apart (one per 10,000 s): no queueing, so a turn's TTFT is its prefill. With the history cached,
    # every turn prefills its 500 new tokens, 50 ms; without reuse turn k prefills all 500 + 550 k of its prompt
    work = SessionWorkload(turns=4, think_time_s=2.0, system_prompt_len=0, input_len=500, output_len=50)
    cached = _run(work, 1e-4, granularity=1, pool_tokens=1e6)
    fresh = _run(work, 1e-4, granularity=0, pool_tokens=1e6)
    assert cached.ttft_by_turn_ms == pytest.approx((50.0, 50.0, 50.0, 50.0), abs=0.5)
    assert fresh.ttft_by_turn_ms == pytest.approx((50.0, 105.0, 160.0, 215.0), abs=0.5)


def test_a_late_turn_pays_for_the_keys_its_queries_read() -> None:
    # the replica's prefill charges each query half a planned prompt of keys (here 300); a turn's 500 new tokens
    # really attend to its cached history and half themselves. At 1 us per (query, key) pair, turn k (history
    # 550 k tokens) costs 500 x (550 k + 250 - 300) us = 275 k - 25 ms more than the 50 ms prefill: 25 ms, then
    # 300, 575 and 850 ms
    work = SessionWorkload(turns=4, think_time_s=2.0, system_prompt_len=0, input_len=500, output_len=50)
    assert Sessions((), PrefixCache(granularity=1, shared_tokens=0, host_tokens=0.0, reload_s=lambda n: math.inf,
                                    recompute_s=lambda n, after: 0.0), 1e-6, 300.0).attention_s(2150, 1650) == (
        pytest.approx(500 * (1650 + 250 - 300) * 1e-6))
    late = _run(work, 1e-4, granularity=1, pool_tokens=1e6, pair_s=1e-6, planned_keys=300.0)
    assert late.ttft_by_turn_ms == pytest.approx((25.0, 300.0, 575.0, 850.0), abs=0.5)


def test_the_closed_form_hit_rate_by_hand() -> None:
    # S 1,000, I 100, O 50, three turns: prompts 1,100, 1,250, 1,400 (3,750); cached 1,000 (the system prompt),
    # 1,150 and 1,300 (the previous contexts): 3,450 / 3,750 = 0.92 when the pool holds every live session
    work = SessionWorkload(turns=3, think_time_s=1.0, system_prompt_len=1000, input_len=100, output_len=50)
    assert work.prefix_share == pytest.approx(3450 / 3750)
    assert expected_hit_rate(work, concurrent_sessions=10, pool_tokens=1e6, granularity=1) == pytest.approx(0.92)
    # a working set twice the room: each session comes back after the nine others were touched, so LRU has
    # evicted its history; every turn still hits the system prompt: 3 x 1,000 of 3,750
    room = 1000 + 10 * (work.mean_context - 1000) / 2
    assert expected_hit_rate(work, concurrent_sessions=10, pool_tokens=room, granularity=1) == pytest.approx(
        3000 / 3750)
    assert expected_hit_rate(work, concurrent_sessions=10, pool_tokens=1e6, granularity=0) == 0.0


def test_block_granularity_caches_whole_blocks_radix_every_token() -> None:
    vllm, sglang = runtimes.engine("vllm").kv_reuse, runtimes.engine("sglang").kv_reuse
    assert vllm is not None and sglang is not None
    assert runtimes.engine("hf").kv_reuse is None  # transformers' generate keeps nothing between requests
    trtllm, llamacpp = runtimes.engine("trtllm").kv_reuse, runtimes.engine("llamacpp").kv_reuse
    assert trtllm is not None and trtllm.value.granularity_tokens == 32  # KvCacheConfig.tokens_per_block = 32
    assert llamacpp is not None and llamacpp.value.eviction == "slot" and llamacpp.value.offload is None
    for reuse, cached in ((vllm, 32), (sglang, 40)):  # a 40-token shared prefix: two 16-token blocks, or all 40
        cache = PrefixCache(granularity=reuse.value.granularity_tokens, shared_tokens=40, host_tokens=0,
                            reload_s=lambda n: 0.0, recompute_s=lambda n, after: 0.0)
        assert cache.take(0, 100) == (0, 0.0)  # the first prompt of all computes the system prompt
        assert cache.take(1, 100) == (cached, 0.0)
    # a prompt wholly cached still prefills its last token: vLLM then recomputes that token's whole block
    assert reusable_tokens(48, 48, 16) == 32
    assert reusable_tokens(48, 48, 1) == 47


def test_offload_reloads_over_the_host_link_only_when_cheaper() -> None:
    catalog = load_catalog(use_user_dir=False)
    gpu = catalog.gpus["h100-sxm-80gb"]
    job = InferJob(input_len=1000, output_len=100, engine="vllm")
    plan = resolve(model("llama-3.1-8b"), job, gpu, None)
    assert isinstance(plan, InferPlan)
    work = SessionWorkload(turns=2, think_time_s=0.0, system_prompt_len=0, input_len=1000, output_len=100)
    serving = session_serving(plan, replica(plan, catalog), gpu, catalog, work, kv_offload_gib=10)
    # Llama 3.1 8B (config.json): 32 layers x 8 KV heads x 128 dims x K and V x 2 bytes = 131,072 bytes a token
    link = catalog.interconnects[gpu.native_link].achieved_bytes_per_s
    assert serving.reload_s(1000) == pytest.approx(1000 * 131072 / link)
    assert serving.host_tokens == pytest.approx(10 * 2**30 / 131072)
    cache = serving.cache()
    cache.release(0, 1100)  # a turn of 1,000 + 100 tokens finished; then the pool needs all of it
    cache.fit(0)
    assert cache.stats.evicted_tokens == 1100
    cached, seconds = cache.take(0, 2100)  # its next turn: the 1,100 come back (whole blocks: 1,088)
    assert (cached, seconds) == (1088, pytest.approx(1088 * 131072 / link))
    assert seconds < serving.recompute_s(1088, 2100 - 1088)
    slow = PrefixCache(granularity=16, shared_tokens=0, host_tokens=1e6, reload_s=lambda n: 1.0,
                       recompute_s=lambda n, after: 0.5)  # prefilling them again is faster: no reload
    slow.release(0, 1100)
    slow.fit(0)
    assert slow.take(0, 2100) == (0, 0.0)


def _cli(*args: str) -> tuple[int, str]:
    done = runner.invoke(app, list(args))
    return done.exit_code, done.output


def test_serve_sim_sessions_lose_their_prefixes_when_the_pool_is_small() -> None:
    args = ("serve-sim", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--engine", "vllm", "--input-len", "2000",
            "--output-len", "200", "--turns", "4", "--think-time-s", "10", "--qps", "1", "--json")
    full, small = (json.loads(_cli(*args, *extra)[1]) for extra in ((), ("--mem-fraction", "0.3")))
    # by hand, a pool that holds the ~40 live sessions: turn k's prompt is 2,000 + 2,200 k, of which the last
    # context's 2,200 k tokens are cached in whole 16-token blocks: 2,192 + 4,400 + 6,592 = 13,184 of 21,200
    cache = full["at_rate"]["prefix_cache"]
    assert cache["hit_rate"] == pytest.approx(13184 / 21200, abs=1e-4)
    assert full["expected_hit_rate"] == pytest.approx(13184 / 21200, abs=1e-4)
    # 30 % of the card leaves ~58k tokens against ~40 sessions x ~5,000: each context is evicted before its next turn
    assert small["kv_capacity_tokens"] < 40 * 5000 < full["kv_capacity_tokens"]
    assert small["at_rate"]["prefix_cache"]["hit_rate"] < 0.1 and small["at_rate"]["prefix_cache"]["evicted_tokens"]
    assert small["at_rate"]["ttft_ms"]["p99"] > full["at_rate"]["ttft_ms"]["p99"]
    assert small["expected_hit_rate"] == 0.0


def test_decode_reads_the_kv_of_the_whole_context() -> None:
    """Long sessions are priced by what they read: 64k more tokens of context add batch x 65,536 x 131,072 bytes of
    KV to every decode step, at no more than the card's peak bandwidth."""
    catalog = load_catalog(use_user_dir=False)
    gpu = catalog.gpus["h100-sxm-80gb"]
    plan = resolve(model("llama-3.1-8b"), InferJob(input_len=1000, output_len=100, engine="vllm"), gpu, None)
    assert isinstance(plan, InferPlan)
    for batch in (1, 8):
        extra_s = (decode_step_s(plan, catalog, batch=batch, context=131072)
                   - decode_step_s(plan, catalog, batch=batch, context=65536))
        floor_s = batch * 65536 * 131072 / gpu.memory_bandwidth_bytes_per_s
        assert floor_s <= extra_s <= 1.5 * floor_s


def test_the_recommenders_option_passes_its_own_reproduce_command_with_sessions() -> None:
    code, out = _cli("recommend", "llama-3.1-8b", "--task", "infer", "--input-len", "128", "--output-len", "32",
                     "--qps", "2", "--p99-ms", "1500", "--slo", "ttft", "--turns", "3", "--think-time-s", "1",
                     "--system-prompt-len", "1000", "--top", "1", "--max-gpus", "1", "--json")
    assert code == 0, out
    option = json.loads(out)["options"][0]
    command = option["commands"][0]
    for flag in ("--turns 3", "--think-time-s 1", "--system-prompt-len 1000", "--qps 2"):
        assert flag in command
    code, out = _cli(*command.split()[1:], "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["rate_unit"] == "sessions_per_s" and doc["turns"] == 3
    assert not doc["at_rate"]["saturated"]
    assert doc["at_rate"]["ttft_ms"]["p99"] <= 1500
    assert doc["max_qps"] >= 2
    assert option["qps_capacity"] == pytest.approx(doc["max_qps"], rel=1e-3)
    assert doc["at_rate"]["prefix_cache"]["hit_rate"] > 0.5


@pytest.mark.parametrize(("args", "says"), [
    (("--turns", "0"), "--turns"),
    (("--think-time-s", "2"), "--turns"),
    (("--turns", "2", "--system-prompt-len", "200000"), "context"),
    (("--turns", "2", "--engine", "hf", "--kv-offload-gib", "8"), "host memory"),
    (("--turns", "2", "--length-dist", "exponential"), "--turns"),
    (("--turns", "2", "--prefix-hit", "0.5"), "stateless"),
])
def test_bad_session_input_is_one_line_and_exit_2(args: tuple[str, ...], says: str) -> None:
    code, out = _cli("serve-sim", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", *args)
    assert code == 2
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], out


def test_the_agent_fleet_example_names_its_binding_slo_and_reproduces() -> None:
    """examples/agent-fleet.yaml: 8-turn sessions sharing a 6,000-token prompt, P99 TTFT <= 2 s and TPOT <= 40 ms.
    The #1 option's rate counts sessions, names the SLO that binds, and its serve-sim command meets both at 0.5
    sessions/s."""
    done = runner.invoke(app, ["recommend", "--scenario", "examples/agent-fleet.yaml", "--json"])
    assert done.exit_code == 0, done.output[-400:]
    best = json.loads(done.output)["options"][0]
    fit = best.get("fit", best)
    assert fit["binding_slo"] in ("ttft", "tpot") and fit["qps_capacity"] >= 0.5
    command = fit["commands"][0]
    assert "--turns 8" in command and "--ttft-p99-ms 2000" in command and "--tpot-p99-ms 40" in command
    again = json.loads(runner.invoke(app, [*command.split()[1:], "--json"]).output)
    assert again["rate_unit"] == "sessions_per_s"
    at = again["at_rate"]
    assert at["ttft_ms"]["p99"] <= 2000 and at["tpot_ms"]["p99"] <= 40
