"""serve-sim --concurrency (issue 15): a closed loop of C clients, chunked prefill, each engine's own defaults."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpuwise.catalog import Catalog
from gpuwise.cli.main import app
from gpuwise.estimate.serving.simulate import closed_loop_requests, simulate
from gpuwise.workload.jobs.job import InferJob
from gpuwise.workload.model.resolve import resolve_model
from plans import infer_plan


def _flat(step_s: float, per_token_s: float):  # type: ignore[no-untyped-def]
    return (lambda batch, context: step_s), (lambda tokens: tokens * per_token_s)


def test_one_client_sees_one_prefill_then_pure_decode_steps() -> None:
    """C = 1: each request waits for nobody; TTFT is its prefill (512 tokens x 1 ms) and TPOT the decode step."""
    decode, prefill = _flat(0.010, 0.001)
    requests = closed_loop_requests(50, 512, 65, seed=0)
    result = simulate(requests, decode_step=decode, prefill=prefill, max_batch=256, kv_capacity_tokens=1e9,
                      concurrency=1)
    assert result.ttft_mean_ms == pytest.approx(512.0)
    assert result.tpot_mean_ms == pytest.approx(10.0)
    e2e_s = 0.512 + 64 * 0.010
    assert result.requests_per_s == pytest.approx(1 / e2e_s, rel=1e-6)  # Little's law with one client


def test_a_clients_next_request_misses_the_iteration_already_under_way() -> None:
    """Hand-worked: two clients, prefill 1 s per iteration, decode step 0.1 s. Both prompts prefill in iteration 1
    (t = 1.0); request 0 (2 tokens) ends with iteration 2 at t = 1.1. The engine starts iteration 3 (request 1's
    decode) at once; client 0's next request arrives after that and is prefilled in iteration 4 with the decode of
    request 1: first token at 1.1 + 0.1 + (1.0 + 0.1) = 2.3, a TTFT of 1.2 s, not 1.1."""
    from gpuwise.estimate.serving.simulate import Request

    requests = [Request(float("inf"), 1, out) for out in (2, 5, 5)]
    result = simulate(requests, decode_step=lambda batch, context: 0.1, prefill=lambda tokens: 1.0, max_batch=8,
                      kv_capacity_tokens=1e9, concurrency=2)
    assert result.ttft_mean_ms == pytest.approx((1000 + 1000 + 1200) / 3, rel=1e-4)


def test_little_law_holds_for_many_clients() -> None:
    """Throughput x latency = clients in flight (Little's law), for a closed loop with no think time."""
    decode, prefill = _flat(0.020, 0.0002)
    requests = closed_loop_requests(400, 256, 128, seed=1)
    result = simulate(requests, decode_step=decode, prefill=prefill, max_batch=256, kv_capacity_tokens=1e9,
                      concurrency=16, max_batched_tokens=2048)
    mean_e2e_s = result.e2e_ms[0] / 1e3  # fixed lengths: every request takes about the same
    assert result.requests_per_s * mean_e2e_s == pytest.approx(16, rel=0.1)


def test_a_long_prompt_is_prefilled_in_chunks_of_the_token_budget() -> None:
    """vLLM V1 / SGLang chunked prefill: a 6,000-token prompt under a 2,048-token budget takes three iterations, so
    its first token comes after the third (3 x the per-iteration step here)."""
    requests = closed_loop_requests(1, 6000, 2, seed=0)
    result = simulate(requests, decode_step=lambda b, c: 0.0, prefill=lambda tokens: 1.0, max_batch=8,
                      kv_capacity_tokens=1e9, concurrency=1, max_batched_tokens=2048)
    assert result.ttft_ms[0] == pytest.approx(3000.0)


@pytest.mark.parametrize(("engine", "gpu", "limits"), [
    ("vllm", "h100-sxm-80gb", (1024, 8192)),  # EngineArgs.get_batch_defaults: >= 70 GiB and not an A100
    ("vllm", "a100-sxm-80gb", (256, 2048)),  # the A100 exception (PR #17885)
    ("vllm", "rtx-4090", (256, 2048)),
    ("trtllm", "h100-sxm-80gb", (2048, 8192)),
    ("lmdeploy", "l4", (128, None)),  # lmdeploy/utils.py get_max_batch_size: 128 on cards it does not name
    ("lmdeploy", "h100-sxm-80gb", (1024, None)),
])
def test_engine_defaults_come_from_the_engines_code(engine: str, gpu: str, limits: tuple[int, int],
                                                    shipped: Catalog) -> None:
    plan = infer_plan(resolve_model("llama-3.1-8b"), InferJob(engine=engine), gpu)  # type: ignore[arg-type]
    assert (plan.max_num_seqs, plan.max_batched_tokens) == limits


@pytest.mark.parametrize(("gpu", "chunk"), [("rtx-4060-ti-16gb", 2048), ("rtx-4090", 4096), ("a100-pcie-40gb", 4096),
                                            ("h200-sxm-141gb", 8192), ("b300-sxm-288gb", 16384)])
def test_sglang_chunk_size_follows_gpu_memory(gpu: str, chunk: int) -> None:
    """sglang@a82da8da srt/arg_groups/memory_hook.py handle_gpu_memory_settings: chunked_prefill_size 2048 below
    20 GiB, 4096 below 60 GiB, 8192 below 160 GiB, 16384 above; the memory model sizes activations by the same."""
    plan = infer_plan(resolve_model("llama-3.1-8b"), InferJob(engine="sglang"), gpu)
    assert plan.max_batched_tokens == chunk


def test_serve_sim_answers_at_a_concurrency_in_json() -> None:
    done = CliRunner().invoke(app, ["serve-sim", "llama-3.1-8b", "--gpu", "h100-sxm-80gb", "--concurrency", "8",
                                    "--input-len", "512", "--output-len", "128", "--requests", "100", "--json"])
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    at = report["at_concurrency"]
    assert report["at_rate"] is None and at["concurrency"] == 8
    for key in ("ttft_ms", "tpot_ms"):
        assert set(at[key]) == {"mean", "p50", "p90", "p99", "band"} and at[key]["mean"] > 0
        band = at[key]["band"]  # the serving regime's out-of-sample band holds the mean it ranges
        assert band is None or band["low"] <= at[key]["mean"] <= band["high"]
    assert at["output_tokens_per_s"] > 0 and at["requests_per_s"] > 0


def test_a_moe_layer_pays_its_routing_kernels() -> None:
    """vLLM fused_moe runs, besides the two grouped GEMMs, the router GEMM, fused_topk, moe_align_block_size and
    moe_sum: four more kernels per MoE layer, each at least a kernel's floor; a dense layer has none of them."""
    from gpuwise.estimate.speed.inference import _infer_pass
    from gpuwise.estimate.speed.operators import forward_ops
    from gpuwise.workload.jobs.job import InferJob
    from gpuwise.workload.model.resolve import resolve_model

    job = InferJob(batch=1)
    moe, dense = resolve_model("qwen3-30b-a3b"), resolve_model("qwen3-8b")
    ops = {op.name: op for op in forward_ops(moe, _infer_pass(infer_plan(moe, job), job, query=1, context=512))}
    moe_layers = sum(b.count for b in moe.blocks if b.ffn.experts)
    assert ops["moe_router"].count == moe_layers and ops["moe_topk_align_sum"].count == 3 * moe_layers
    dense_ops = forward_ops(dense, _infer_pass(infer_plan(dense, job), job, query=1, context=512))
    assert not any(op.name.startswith("moe_") for op in dense_ops)


def test_a_cached_prefix_is_not_prefilled_again() -> None:
    """With 75% of a 1,000-token prompt in the prefix cache, 250 tokens are prefilled (1 ms each here): TTFT 250 ms;
    a full hit still computes the last token (its logits give the first output token)."""
    decode, prefill = _flat(0.010, 0.001)
    for hit, ttft_ms in ((0.75, 250.0), (1.0, 1.0)):
        requests = closed_loop_requests(30, 1000, 10, seed=0)
        result = simulate(requests, decode_step=decode, prefill=prefill, max_batch=8, kv_capacity_tokens=1e9,
                          concurrency=1, prefix_hit=hit)
        assert result.ttft_mean_ms == pytest.approx(ttft_ms)


def test_decode_only_stretches_are_jumped_exactly() -> None:
    """One client, a 100-token prompt, 1,001 output tokens and a step of 10 ms + 10 us per token of context: the
    1,000 steps after the first token run at contexts 101..1100, so TPOT is 10 ms + 10 us x 600.5 = 16.005 ms.
    The simulator jumps over those steps at once (they hold no arrival and no finish); the jump must cost exactly
    what stepping one by one does when the step is linear in the context."""
    requests = closed_loop_requests(5, 100, 1001, seed=0)
    result = simulate(requests, decode_step=lambda batch, context: 0.010 + 1e-5 * context,
                      prefill=lambda tokens: 0.0, max_batch=8, kv_capacity_tokens=1e9, concurrency=1)
    assert result.tpot_mean_ms == pytest.approx(16.005, rel=1e-9)


def test_max_num_batched_tokens_replaces_the_engines_token_budget() -> None:
    """vLLM takes 8,192 tokens per iteration on a >= 70 GiB card other than A100 (EngineArgs batch defaults);
    --max-num-batched-tokens 2048 makes its prompts take more iterations, so under Poisson arrivals first tokens come
    later (vLLM's tuning guide: a larger budget gives a better TTFT). A closed loop of identical requests is not
    asked: there a smaller budget splits a burst of arrivals into chunks whose first ones finish sooner."""
    from gpuwise import api
    from gpuwise.workload.jobs.job import InferJob
    from gpuwise.workload.model.resolve import resolve_model
    from plans import infer_plan

    arch = resolve_model("llama-3.1-70b")
    default = InferJob(engine="vllm", quant="fp8", tp=2, count=2, input_len=4096, output_len=256)
    small = default.updated(max_num_batched_tokens=2048)
    assert infer_plan(arch, default, "h200-sxm-141gb").max_batched_tokens == 8192
    assert infer_plan(arch, small, "h200-sxm-141gb").max_batched_tokens == 2048
    ttft = [api.serve_sim("llama-3.1-70b", gpu="h200-sxm-141gb", job=job, qps=1.0).at_rate.ttft_mean_ms
            for job in (default, small)]
    assert ttft[1] > ttft[0]
