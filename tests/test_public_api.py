"""The public namespace is a promise: pinned here so a change to it is a decision, not an accident."""

from __future__ import annotations

import subprocess
import sys

import gpuwise


def test_all_is_sorted_and_pinned() -> None:
    """One public door: the package's names are the api's, functions with the job, plan and result types."""
    assert gpuwise.__all__ == sorted(gpuwise.__all__) == gpuwise.api.__all__
    functions = {"bench", "bench_collective", "burn_in", "calibrate", "check_access", "check_arguments", "compare_gpus",
                 "diagnose", "doctor", "estimate", "exact_params", "exporter_reader", "find_gpu", "fit", "fleet_report",
                 "hpc_apps", "hpc_estimate", "image_estimate", "image_fit", "job", "layer_split", "list_gpus",
                 "list_models", "list_pipelines", "load_catalog", "model", "model_from_config", "monitor", "pipeline",
                 "plan", "recommend", "scale", "serve_sim", "splits_by_layers", "sync_offers", "tco", "trace",
                 "trace_time", "validate", "weights_bytes"}
    types = {"AccessPolicy", "Architecture", "Calibrated", "Catalog", "Diagnosis", "Estimate", "FitReport",
             "FleetReport", "GPU", "HpcEstimate", "HpcJob", "ImageEstimate", "ImageFit", "ImageJob", "InferJob",
             "InferPerf", "InferPlan", "Job", "LayerSplit", "LoadTest", "MemoryEstimate", "Recommendation", "ScaleRow",
             "ServingReport", "TcoReport", "TrainJob", "TrainPerf", "TrainPlan", "Validation"}
    errors = {"AccessDenied", "AmbiguousGPU", "CatalogError", "ConfigError", "GpuwiseError", "InputTooLarge",
              "NotEstimable", "ProbeUnavailable", "TimeLimitExceeded", "UnknownGPU", "UnknownModel"}
    assert set(gpuwise.__all__) == functions | types | errors
    for name in gpuwise.__all__:  # a name never resolves to a subpackage or submodule of the same name
        assert getattr(gpuwise, name) is getattr(gpuwise.api, name), name
        assert not isinstance(getattr(gpuwise.api, name), type(gpuwise)), name


def test_estimate_and_recommend_stay_functions_whatever_was_imported_first() -> None:
    """gpuwise.estimate and gpuwise.recommend are also subpackages; importing those first must not hide the API."""
    code = ("import gpuwise.estimate.plan, gpuwise.recommend.rank, gpuwise;"
            "assert callable(gpuwise.estimate) and callable(gpuwise.recommend);"
            "from gpuwise.estimate.plan import resolve; assert callable(resolve)")
    subprocess.run([sys.executable, "-W", "error", "-c", code], check=True)


def test_a_plan_names_the_defaults_it_chose_and_where_from() -> None:
    """SGLang on a 24 GiB card: chunked_prefill_size 4096 (sglang@a82da8da handle_gpu_memory_settings, 20-35 GiB)
    and no sequence cap; vLLM on an H100: 8,192 tokens and 1,024 sequences (vLLM get_batch_defaults)."""
    plan = gpuwise.plan("llama-3.1-8b", gpu="rtx-4090", task="infer", engine="sglang")
    assert isinstance(plan, gpuwise.InferPlan) and plan.max_batched_tokens == 4096
    limits = next(c for c in plan.choices if c.what == "batch limits")
    assert "4,096 tokens" in limits.value and "sglang" in limits.origin.lower()
    vllm = gpuwise.plan("llama-3.1-8b", gpu="h100-sxm-80gb", task="infer")
    assert isinstance(vllm, gpuwise.InferPlan) and (vllm.max_batched_tokens, vllm.max_num_seqs) == (8192, 1024)
    train = gpuwise.plan("llama-3.1-8b", gpu="h100-sxm-80gb", method="lora", lora_rank=16, lora_targets="attn")
    assert isinstance(train, gpuwise.TrainPlan)
    assert train.trainable_params == 32 * 16 * (8192 + 2 * 5120 + 8192)  # PEFT's A and B on q, k, v, o (by hand)


def test_importing_gpuwise_loads_no_ui_or_heavy_package_and_reads_no_data() -> None:
    """Names are imported on first use: `import gpuwise` builds no pydantic schema and reads no YAML."""
    code = (
        "import sys, gpuwise;"
        "heavy = {'typer', 'rich', 'torch', 'pynvml', 'fastapi', 'transformers', 'pydantic', 'yaml'};"
        "heavy &= set(sys.modules);"
        "assert not heavy, heavy;"
        "import gpuwise.catalog.loading as l;"
        "assert l.shipped_raw.cache_info().currsize == 0"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_find_gpu_from_python() -> None:
    assert gpuwise.find_gpu("RTX 4090").memory_gb == 24
    assert len(gpuwise.list_gpus(vendor="amd")) >= 5
