"""The memory model against hand-worked formulas, published rules and invariants."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuwise.catalog import Catalog
from gpuwise.estimate.estimate import estimate
from gpuwise.estimate.fit import fit, gradient_accumulation, largest_batch
from gpuwise.estimate.memory.activations import layer_activation_bytes
from gpuwise.estimate.memory.kv_cache import kv_bytes_per_token
from gpuwise.estimate.memory.model_states import model_states
from gpuwise.estimate.plan import adapter_params
from gpuwise.workload.jobs.job import InferJob, TrainJob
from gpuwise.workload.model.architecture import from_config
from gpuwise.workload.model.resolve import resolve_model
from plans import infer_plan, train_plan

LLAMA3_8B = 8_030_261_248


def test_mixed_precision_adamw_is_18_bytes_per_parameter() -> None:
    # HF 'Model training anatomy': 6 B weights (fp32 + 16-bit copy) + 4 B gradients + 8 B AdamW
    states = model_states(train_plan(resolve_model("llama-3-8b"), TrainJob(precision="bf16")))
    assert states.persistent == pytest.approx(18 * LLAMA3_8B)
    pure = model_states(train_plan(resolve_model("llama-3-8b"), TrainJob(precision="pure-bf16")))
    assert pure.persistent == pytest.approx((2 + 2 + 4) * LLAMA3_8B)


def test_several_data_parallel_gpus_shard_with_zero_3_unless_told() -> None:
    # several data-parallel GPUs shard with ZeRO-3 unless the job says otherwise (the FSDP2 default of torchtune's
    # and torchtitan's distributed recipes); one GPU, or tensor parallelism alone, has nothing to shard over
    arch = resolve_model("llama-3-8b")
    z3 = model_states(train_plan(arch, TrainJob(count=8, zero=3, precision="bf16")))
    assert model_states(train_plan(arch, TrainJob(count=8, precision="bf16"))) == z3
    assert train_plan(arch, TrainJob(count=1)).sharding.stage == 0
    assert train_plan(arch, TrainJob(count=8, tp=8)).sharding.stage == 0


def test_lora_adapter_count_by_hand() -> None:
    # Llama-3-8B, r=16 on q,k,v,o: 32 layers x 16 x ((4096+4096) + 2 x (4096+1024) + (4096+4096))
    arch = resolve_model("llama-3-8b")
    assert adapter_params(arch, TrainJob(method="lora", lora_rank=16, lora_targets="attn")) == \
        32 * 16 * (8192 + 2 * 5120 + 8192) == 13_631_488


def test_qlora_base_weights_use_nf4_double_quant_bits() -> None:
    arch = resolve_model("llama-3.1-8b")
    job = TrainJob(method="qlora", precision="pure-bf16", lora_rank=8)
    linear = arch.params.linear
    adapters = adapter_params(arch, job)
    expected = linear * 4.127 / 8 + (arch.total_params - linear) * 2 + adapters * 2
    assert model_states(train_plan(arch, job)).weights == pytest.approx(expected)


def test_activation_formula_reproduces_korthikanti_table_2() -> None:
    # A GPT layer (MHA, 4h GELU MLP, dropout, no FlashAttention) stores sbh(34 + 5as/h) bytes with
    # 16-bit activations (Korthikanti et al. 2022, Table 2, no parallelism); /t with TP + sequence parallelism
    gpt = from_config({"model_type": "gpt2", "n_embd": 1024, "n_layer": 24, "n_head": 16, "n_positions": 1024,
                       "vocab_size": 50257, "attn_pdrop": 0.1, "resid_pdrop": 0.1}, name="gpt-like")
    s, b, h, a = 1024, 4, 1024, 16
    got = layer_activation_bytes(gpt, gpt.blocks[0], batch=b, seq=s, element=2, flash=False, tp=1)
    assert got == pytest.approx(s * b * h * (34 + 5 * a * s / h))
    split = layer_activation_bytes(gpt, gpt.blocks[0], batch=b, seq=s, element=2, flash=False, tp=8)
    assert split == pytest.approx(got / 8)


def test_flash_attention_removes_the_quadratic_term() -> None:
    arch = resolve_model("llama-3-8b")
    short = layer_activation_bytes(arch, arch.blocks[0], batch=1, seq=1024, element=2, flash=True, tp=1)
    long = layer_activation_bytes(arch, arch.blocks[0], batch=1, seq=2048, element=2, flash=True, tp=1)
    assert long == pytest.approx(2 * short)  # linear in s
    eager = layer_activation_bytes(arch, arch.blocks[0], batch=1, seq=2048, element=2, flash=False, tp=1)
    assert eager - long == pytest.approx(2 * 32 * 2048 * 2048 - 4 * 32 * 2048)


def test_kv_cache_of_llama_2_7b_for_10k_tokens_is_about_5_gb() -> None:
    # 2 (K, V) x 32 layers x 32 heads x 128 dims x 2 bytes = 524,288 B/token (huggingface/blog PR #2045: ~5 GB)
    per_token = kv_bytes_per_token(infer_plan(resolve_model("llama-2-7b"), InferJob()))
    assert per_token == 524_288
    assert per_token * 10_000 / 1e9 == pytest.approx(5.24, abs=0.01)
    # GQA: Llama-3-8B has 8 KV heads, so 4x less
    assert kv_bytes_per_token(infer_plan(resolve_model("llama-3-8b"), InferJob())) == 131_072
    assert kv_bytes_per_token(infer_plan(resolve_model("llama-3-8b"), InferJob(kv_dtype="fp8"))) == 65_536
    assert kv_bytes_per_token(infer_plan(resolve_model("llama-3-70b"), InferJob(tp=8, count=8))) == 2 * 80 * 1 * 128 * 2


def test_int4_weights_of_a_70b_model(shipped: Catalog) -> None:
    job = InferJob(quant="awq-int4", engine="hf")
    result = estimate(resolve_model("llama-3-70b"), job, shipped.gpus["a100-sxm-80gb"])
    weights = result.memory.breakdown_bytes["weights"] / 1e9
    # ~68.5e9 linear weights at 4.156 bits + 2.1e9 embedding/head parameters at 16 bits
    assert 35 < weights < 41


def test_a_70b_full_fine_tune_does_not_fit_on_a_24_gb_card(shipped: Catalog) -> None:
    result = estimate(resolve_model("llama-3-70b"), TrainJob(), shipped.gpus["rtx-4090"])
    assert not result.memory.fits and result.memory.per_gpu_bytes > 1e12


def test_qlora_of_a_7b_model_fits_a_16_gb_card(shipped: Catalog) -> None:
    job = TrainJob(method="qlora", batch=1, seq=2048, ckpt="full", optimizer="paged-adamw-8bit")
    result = estimate(resolve_model("qwen2-7b"), job, shipped.gpus["rtx-4070-ti-super"])
    assert result.memory.fits, result.memory.breakdown_bytes


def test_largest_batch_is_maximal(shipped: Catalog) -> None:
    arch, gpu = resolve_model("llama-3.2-1b"), shipped.gpus["rtx-4090"]
    job = TrainJob(method="lora", seq=1024)
    best = largest_batch(arch, job, gpu)
    assert best >= 1
    assert estimate(arch, job.model_copy(update={"batch": best}), gpu).memory.fits
    assert not estimate(arch, job.model_copy(update={"batch": best + 1}), gpu).memory.fits


def test_gradient_accumulation() -> None:
    assert gradient_accumulation(TrainJob(count=4), micro_batch=2, global_batch=64) == 8
    assert gradient_accumulation(TrainJob(), micro_batch=3, global_batch=64) == 22


def test_fit_ranks_changes_that_make_it_fit_first(shipped: Catalog) -> None:
    report = fit(resolve_model("llama-3.1-8b"), TrainJob(seq=4096), shipped.gpus["rtx-4090"])
    assert not report.estimate.memory.fits
    flags = [c.flags for c in report.changes]
    assert "--method qlora" in flags and "--ckpt full" in flags
    fits = [c.fits for c in report.changes]
    assert fits == sorted(fits, reverse=True)  # every change that fits comes before those that do not
    assert all(c.saving_bytes > 0 for c in report.changes)


def test_serving_engine_reserve_and_concurrency(shipped: Catalog) -> None:
    gpu = shipped.gpus["h100-sxm-80gb"]
    result = estimate(resolve_model("llama-3.1-8b"), InferJob(engine="vllm", input_len=2048, output_len=512), gpu)
    memory = result.memory
    assert memory.engine_reserved_bytes == pytest.approx(0.9 * gpu.memory_bytes)  # gpu_memory_utilization
    per_seq = 131_072 * 2560
    # vLLM's pool (the newest version): 0.9 x the memory CUDA shows (the datasheet's less the driver's 1.3 %) -
    # weights - the profiling run's peak - non-torch memory - the CUDA graphs' estimate (taken first since v0.21)
    parts, details = memory.breakdown_bytes, memory.details
    shown = gpu.memory_bytes * (1 - 0.013)
    non_kv = parts["weights"] + parts["activations"] + 0.27 * 2**30 + details["cuda_graph_bytes"]
    assert details["kv_pool_bytes"] == pytest.approx(0.9 * shown - non_kv)
    assert memory.max_concurrency == int(details["kv_pool_bytes"] // per_seq)


# ---- properties -------------------------------------------------------------------------------------
ARCH = resolve_model("llama-3.2-1b")
GPU_FIXTURE = None


def _per_gpu(job: TrainJob) -> float:
    from gpuwise.catalog import load_catalog

    return estimate(ARCH, job, load_catalog(use_user_dir=False).gpus["a100-sxm-80gb"]).memory.per_gpu_bytes


@settings(max_examples=40, deadline=None)
@given(batch=st.integers(1, 64), seq=st.integers(16, 8192), method=st.sampled_from(["full", "lora", "qlora"]),
       ckpt=st.sampled_from(["none", "selective", "full"]), flash=st.booleans())
def test_memory_never_decreases_when_batch_or_seq_grow(batch: int, seq: int, method: str, ckpt: str,
                                                       flash: bool) -> None:
    job = TrainJob(batch=batch, seq=seq, method=method, ckpt=ckpt, flash_attn=flash)  # type: ignore[arg-type]
    assert _per_gpu(job.model_copy(update={"batch": batch + 1})) >= _per_gpu(job)
    assert _per_gpu(job.model_copy(update={"seq": seq + 1})) >= _per_gpu(job)


@settings(max_examples=30, deadline=None)
@given(rank=st.integers(1, 256), targets=st.sampled_from(["attn", "all-linear"]),
       count=st.sampled_from([1, 2, 4, 8]), zero=st.integers(0, 1))
def test_rank_growth_and_zero_stages(rank: int, targets: str, count: int, zero: int) -> None:
    # within one runtime (DeepSpeed runs every stage) ZeRO-1 and ZeRO-2 never hold more on more than one GPU. ZeRO-3
    # is left out: it allocates its gradient partition and reduce bucket for good (stage3.py __init__) and gathers
    # modules, so on a few ranks it can hold more than ZeRO-2 at the loss (tests/test_sharding.py holds its states)
    job = TrainJob(method="lora", lora_rank=rank, lora_targets=targets, count=count, zero=zero,  # type: ignore[arg-type]
                   sharding="deepspeed")
    assert _per_gpu(job.model_copy(update={"lora_rank": rank + 1})) >= _per_gpu(job)
    if count > 1:
        assert _per_gpu(job.model_copy(update={"zero": zero + 1})) <= _per_gpu(job)
        full = TrainJob(count=count, zero=zero, sharding="deepspeed")
        assert _per_gpu(full.model_copy(update={"zero": zero + 1})) <= _per_gpu(full)


@pytest.mark.parametrize(("small", "large"), [("llama-3.2-1b", "llama-3.2-3b"), ("qwen2.5-7b", "qwen2.5-14b"),
                                              ("gemma-2-2b", "gemma-2-9b"), ("opt-1.3b", "opt-6.7b")])
def test_more_parameters_never_need_less_memory(shipped: Catalog, small: str, large: str) -> None:
    gpu = shipped.gpus["h100-sxm-80gb"]
    for job in (TrainJob(), TrainJob(method="qlora"), InferJob()):
        assert estimate(resolve_model(large), job, gpu).memory.per_gpu_bytes > \
            estimate(resolve_model(small), job, gpu).memory.per_gpu_bytes


def test_gemma2_slides_only_on_its_local_layers(shipped: Catalog) -> None:
    # Gemma 2 9B: 42 layers alternating local (4096-token window) and global attention; 8 KV heads x 256 dims.
    # At 8192 tokens in fp16: 2 (K, V) x 8 x 256 x 2 bytes x (21 x 4096 + 21 x 8192) tokens = 2.114 GB per sequence.
    # Mistral 7B slides on all 32 layers: 2 x 8 x 128 x 2 x 32 x 4096 = 0.537 GB.
    for model, expected in (("gemma-2-9b", 2 * 8 * 256 * 2 * (21 * 4096 + 21 * 8192)),
                            ("mistral-7b", 2 * 8 * 128 * 2 * 32 * 4096)):
        job = InferJob(batch=1, input_len=8192 - 256, output_len=256)
        result = estimate(resolve_model(model), job, shipped.gpu("h100-sxm-80gb"))
        assert result.memory.breakdown_bytes["kv_cache"] == pytest.approx(expected, rel=1e-9), model


def test_zero3_with_parameter_offload_keeps_two_whole_layers_on_the_gpu() -> None:
    # Llama 3.1 8B has 8,030,261,248 parameters (model card) in 32 layers; bf16 weights. With ZeRO-3 and the
    # parameters in host memory the GPU holds the gathered current and prefetched layer: 2 x 2 B x 8.03e9 / 32,
    # whatever the data-parallel degree (it once divided the already-sharded figure again).
    arch = resolve_model("llama-3.1-8b")
    for count, pp in ((8, 1), (64, 1), (8, 2), (8, 4)):  # a pipeline stage holds fewer layers, each still whole
        job = TrainJob(count=count, nodes=count // 8, zero=3, offload="optimizer+params", pp=pp)
        states = model_states(train_plan(arch, job))
        assert states.weights + states.gathered == pytest.approx(2 * 2 * 8_030_261_248 / 32), (count, pp)
        assert states.optimizer == 0 and states.master == 0


def test_training_memory_against_our_h200_measurements() -> None:
    # Measured on a real H200 (2026-11-29, torch 2.11.0+cu130, transformers 5.24.0; benchmarks/measure_training.py):
    # HF models from the presets' config.json, fp32 weights under bf16 autocast, fused AdamW, SDPA attention.
    # "device_used_gb" is what nvidia-smi shows for the process (CUDA context and allocator cache included).
    import json
    from pathlib import Path

    from gpuwise import api

    rows = [json.loads(line) for line in (Path(__file__).parents[1] / "benchmarks" / "results" / "h200-2026-11-29"
                                          / "training.jsonl").read_text().splitlines()]
    errors = []
    for r in rows:
        est = api.estimate(r["preset"], gpu="h200-sxm-141gb", method="full", precision="bf16", optimizer="adamw",
                           batch=r["batch"], seq=r["seq"], ckpt=r["ckpt"], flash_attn=True)
        errors.append(est.memory.per_gpu_bytes / 1e9 / r["device_used_gb"] - 1)
    # +3.2 %, +3.5 %, -7.0 % and +1.9 %. The checkpointed case was +21 % while the closed form counted gradients,
    # 16-bit logits and every layer's weight casts at the loss, which a 2026 step does not hold there; it is under
    # now because the caching allocator held 11.7 % above its allocated peak there (max_reserved - max_allocated),
    # above the 5 % we assume
    assert all(-0.08 <= e <= 0.05 for e in errors), errors
    allocated = [api.estimate(r["preset"], gpu="h200-sxm-141gb", method="full", precision="bf16", optimizer="adamw",
                              batch=r["batch"], seq=r["seq"], ckpt=r["ckpt"], flash_attn=True).memory for r in rows]
    from gpuwise.report.trace import allocated_bytes

    # against torch.cuda.max_memory_allocated(): -0.3 % to +1.2 %
    assert all(abs(allocated_bytes(m) / 1e9 / r["max_allocated_gb"] - 1) <= 0.03 for m, r in zip(allocated, rows,
                                                                                                  strict=True))
