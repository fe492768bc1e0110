"""The plan is the core's one currency (issue 38): a job is resolved once, in estimate/plan, and the estimators read
the plan. Two kinds of check: the code is read (no estimator recomputes a plan field or looks a runtime profile up
by name), and the behaviour that the old seams broke is exercised (a --calibration record reaches --trace timing;
an image or HPC estimate carries the plan its figures came from)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from gpuwise import api
from gpuwise.catalog import load_catalog
from gpuwise.estimate.plan import HpcPlan, ImagePlan, InferPlan, TrainPlan, resolve
from gpuwise.workload.jobs.hpc import HpcJob
from gpuwise.workload.jobs.image import ImageJob
from gpuwise.workload.jobs.job import InferJob, TrainJob
from gpuwise.workload.model.resolve import resolve_model

ESTIMATE = Path(__file__).parents[1] / "src" / "gpuwise" / "estimate"
# where a plan field is defined: the plan itself and the pure functions it is computed with
DEFINES_PLAN_FIELDS = {"plan", "dtypes.py", "weights.py", "calibration.py", "sharding.py"}
# calls that compute a plan field from a job, or look a runtime profile up by its name
PLAN_FIELD_CALLS = {"for_checkpoint", "matmul_dtype", "train_dtype", "framework", "engine", "resolve_sharding"}
# the entry points that resolve a job (each once) before handing the plan to the estimators
RESOLVERS = {"estimate.py": 1, "serving/load.py": 1, "image/pipeline.py": 1, "hpc/estimate.py": 1,
             "speed/inference.py": 1}  # speed/inference: the reference llama-bench job a backend is scaled by


def _estimators() -> list[Path]:
    return [p for p in sorted(ESTIMATE.rglob("*.py"))
            if p.relative_to(ESTIMATE).parts[0] not in DEFINES_PLAN_FIELDS]


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _reads_a_job_field(node: ast.Call) -> bool:
    """``activation_bytes(job.weights)``, ``bytes_per_element(job.kv_dtype)``: a format the plan already holds."""
    return any(isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name) and a.value.id == "job"
               for a in node.args)


def _offences(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        name = _called(node)
        by_name = name in ("engine", "framework") and isinstance(node.func, ast.Attribute) and isinstance(
            node.func.value, ast.Name) and node.func.value.id == "runtimes"
        if (name in PLAN_FIELD_CALLS - {"engine", "framework"} or by_name
                or (name in ("activation_bytes", "bytes_per_element") and _reads_a_job_field(node))):
            found.append(f"{path.relative_to(ESTIMATE)}:{node.lineno} {name}(...)")
    return found


def test_no_estimator_recomputes_a_plan_field_or_looks_a_runtime_up_by_name() -> None:
    offences = [o for path in _estimators() for o in _offences(path)]
    # compat.requirements: recommend's search asks what a job needs before it has a plan (the plan's engine is
    # passed wherever there is one, estimate.compatibility_warnings)
    assert offences == ["compat.py:70 engine(...)"], offences


def test_the_checker_finds_what_it_looks_for() -> None:
    """The scan above would catch the seams this issue removed (an engine looked up by name, a KV format recomputed
    from the job, the checkpoint's format settled again)."""
    code = ("def f(job, arch):\n    e = runtimes.engine(job.engine)\n    k = bytes_per_element(job.kv_dtype)\n"
            "    j = job.for_checkpoint(arch.checkpoint)\n    n = bytes_per_element('nf4')\n")
    tree = ast.parse(code)
    names = [_called(n) for n in ast.walk(tree) if isinstance(n, ast.Call)]
    flagged = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and (
        _called(n) in PLAN_FIELD_CALLS or (_called(n) == "bytes_per_element" and _reads_a_job_field(n)))]
    assert "bytes_per_element" in names
    assert [_called(n) for n in flagged] == ["engine", "bytes_per_element", "for_checkpoint"]


def test_jobs_are_resolved_only_at_the_entry_points() -> None:
    counts = {}
    for path in _estimators():
        calls = [n for n in ast.walk(ast.parse(path.read_text()))
                 if isinstance(n, ast.Call) and _called(n) in ("resolve", "model_plan", "image_plan", "hpc_plan")]
        if calls:
            counts[str(path.relative_to(ESTIMATE))] = len(calls)
    assert counts == RESOLVERS


def _record(tmp_path: Path, tflops: float) -> Path:
    path = tmp_path / f"bench-{tflops:g}.json"
    path.write_text(json.dumps({"gpu": "h200-sxm-141gb", "name": "NVIDIA H200", "date": "2026-12-06",
                                "gemm_tflops": {"bf16": tflops}}))
    return path


def test_a_calibration_record_reaches_trace_timing(tmp_path: Path) -> None:
    """--trace times the traced kernels at the rates of the estimate's --calibration: halving the measured matmul
    rate lengthens the matmuls (a compute-bound GEMM of F FLOP takes F / rate) and nothing else, so the GPU time
    grows, by less than twice (the step's memory-bound operators keep their time)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    job = TrainJob(method="full", batch=2, seq=512)
    timed = {}
    for tflops in (600.0, 300.0):
        result = api.estimate("qwen2.5-0.5b", gpu="h200-sxm-141gb", job=job, calibration=_record(tmp_path, tflops))
        assert result.plan.calibration is not None and result.plan.calibration.gemm_flops["bf16"] == tflops * 1e12
        timed[tflops] = api.trace_time(api.trace("qwen2.5-0.5b", result.job), result)
    assert timed[600.0].gpu_s < timed[300.0].gpu_s < 2 * timed[600.0].gpu_s
    assert timed[600.0].dispatches == timed[300.0].dispatches  # the same traced step, timed at other rates


def test_every_kind_of_job_resolves_in_one_place() -> None:
    cards = load_catalog(use_user_dir=False).gpus
    h100 = cards["h100-sxm-80gb"]
    llama = resolve_model("llama-3.1-8b")
    assert isinstance(resolve(llama, TrainJob(), h100), TrainPlan)
    served = resolve(llama, InferJob(), h100)
    # Llama 3.1's checkpoint is bf16 (config.json torch_dtype): 2-byte weights, activations and KV cache
    assert isinstance(served, InferPlan) and served.job.weights == "bf16"
    assert served.kv_bytes == 2 and served.act_bytes == 2
    flux = api.pipeline("flux.1-dev")
    assert flux is not None
    image = resolve(flux, ImageJob(), h100)
    # the pipeline's recorded defaults fill what the job left out, once, on the plan and on its job alike
    assert isinstance(image, ImagePlan) and image.resolution == image.job.resolution == flux.defaults.resolution
    assert image.steps == image.job.steps == flux.defaults.steps
    assert image.quant == "bf16" and image.matmul_dtype == "bf16" and image.offload == "none"
    hpc = resolve(None, HpcJob(app="lammps"), h100)
    assert isinstance(hpc, HpcPlan) and hpc.job.atoms is not None  # the application's reference problem


def test_image_and_hpc_estimates_carry_their_plan() -> None:
    image = api.image_estimate("sdxl", gpu="rtx-4090")
    assert image.plan.job == image.job and image.plan.runtime.id == "diffusers"
    hpc = api.hpc_estimate(gpu="a100-sxm-80gb", app="lammps")
    assert hpc.plan.job == hpc.job and hpc.plan.app.id == "lammps"


def test_the_int4_dequantize_pass_is_an_engine_fact() -> None:
    """AutoAWQ's batched GEMM (transformers) unpacks AWQ weights to fp16 before multiplying; vLLM and SGLang serve the
    same checkpoint with Marlin, which dequantizes inside the GEMM -- on compute capability 8.0 and up (vLLM
    marlin_utils.check_marlin_supported). So the prefill pays the pass on transformers, and on vLLM only on a T4."""
    from gpuwise.estimate.speed.inference import _dequantize

    cards = load_catalog(use_user_dir=False).gpus
    llama = resolve_model("llama-3.1-8b")

    def pass_ops(engine: str, card: str) -> list[str]:
        plan = resolve(llama, InferJob(engine=engine, quant="awq-int4"), cards[card])
        assert isinstance(plan, InferPlan)
        return [op.name for op in _dequantize(plan, plan.job)]

    assert pass_ops("hf", "h100-sxm-80gb") == ["dequantize"]
    assert pass_ops("vllm", "h100-sxm-80gb") == pass_ops("sglang", "a100-sxm-80gb") == []
    assert cards["t4"].compute_capability == "7.5" and pass_ops("vllm", "t4") == ["dequantize"]
