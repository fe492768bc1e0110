"""`gpuwise calibrate --from LOG` on real vLLM and SGLang start-up logs (../shared/data/engine-logs: one YAML record
per engine start, the excerpt verbatim, SOURCES.md gives each one's origin): every record parses, each figure the
record's author read from the excerpt (``measured``) is recovered from the excerpt alone, the raw excerpt parses the
same, a file of another shape is one line and exit 2, and the table's difference is (gpuwise - log) / log. Skipped
without the folder (a clean clone), but for the line variants quoted from other public logs below."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from gpuwise.cli.main import app
from gpuwise.errors import ConfigError
from gpuwise.workload.engine_log_config import parse_engine_log, read_engine_log

LOGS = Path(__file__).resolve().parents[2] / "shared" / "data" / "engine-logs"
RECORDS = sorted(LOGS.glob("*.yaml")) if LOGS.is_dir() else []
needs_logs = pytest.mark.skipif(not LOGS.is_dir(), reason="../shared/data/engine-logs is not here")
runner = CliRunner()
RTX3090 = LOGS / "vllm-2024-12-rtx3090-llama3.1-8b-20k.yaml"
SGLANG_OLD = LOGS / "sglang-2024-10-mi300x-llama3-8b-bench-latency.yaml"
WRAPPED = LOGS / "vllm-2024-12-mi300x-llama3.1-70b-fp8-tp1-32k-u098.yaml"


def _record(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text("utf-8"))
    assert isinstance(data, dict)
    return data


def _printed(value: float, excerpt: str) -> bool:
    """Whether the excerpt prints ``value`` in one of the ways engines write numbers (1,256,440; 3.81; 0.90)."""
    forms = {f"{value:g}", f"{value:.2f}", f"{value:.4f}"}
    if float(value).is_integer():
        forms |= {f"{int(value)}", f"{int(value):,}"}
    return any(re.search(rf"(?<![\d.]){re.escape(f)}(?![\d])", excerpt) for f in forms)


@needs_logs
@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_every_record_parses_and_recovers_its_measured_figures(path: Path) -> None:
    record = _record(path)
    log = read_engine_log(path)
    assert log.engine == record["engine"]
    assert log.figures, "no figure read"
    for key, value in record["measured"].items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if key in log.figures:
            assert log.figures[key] == pytest.approx(value, rel=1e-6, abs=1e-9), key
        else:  # only what the author took from prose beside the excerpt may be missing
            assert not _printed(value, record["excerpt"]), f"{key}={value} is printed but was not read"


@needs_logs
@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_the_raw_excerpt_alone_parses_to_the_same_figures(path: Path, tmp_path: Path) -> None:
    raw = tmp_path / "engine.log"
    raw.write_text(_record(path)["excerpt"], "utf-8")
    assert read_engine_log(raw).figures == read_engine_log(path).figures


@needs_logs
def test_hand_worked_figures_of_three_formats() -> None:
    # V0, prefixes trimmed by the user: 1,952 blocks x 16 tokens (vLLM's default block size) = 31,232 tokens
    old = read_engine_log(RTX3090)
    assert (old.figures["gpu_blocks"], old.figures["kv_cache_tokens"]) == (1952, 1952 * 16)
    assert old.figures["kv_cache_gib"] == 3.81 and old.figures["weights_gib"] == 14.9888
    # SGLang before 'KV Cache is allocated': weights = 191.33 - 176.33, pool = 176.33 - 22.83 (GiB, printed 'GB')
    sglang = read_engine_log(SGLANG_OLD)
    assert sglang.figures["weights_gib"] == pytest.approx(15.00) and sglang.figures["kv_pool_gib"] == 153.5
    assert sglang.figures["kv_cache_tokens"] == 1256440
    # a profiling line hard-wrapped inside a number ('non_torch_memory=6\n.07GiB') reads whole
    wrapped = read_engine_log(WRAPPED)
    assert wrapped.figures["non_torch_gib"] == 6.07 and wrapped.figures["kv_cache_gib"] == 95.28
    assert wrapped.knobs["memory_fraction"].value == 0.98 and wrapped.knobs["context"].value == 32768


# Line variants quoted from other public logs (GitHub issues and notes found through the code index)
V07_SPLIT = """INFO 12-22 10:55:33 model_runner.py:1097] Loading model weights took 8.5107 GB
INFO 12-22 10:55:34 worker.py:241] Memory profiling takes 0.69 seconds
INFO 12-22 10:55:34 worker.py:241] the current vLLM instance can use total_gpu_memory (79.25GiB) x gpu_memory_utilization (0.15) = 11.89GiB
INFO 12-22 10:55:34 worker.py:241] model weights take 8.51GiB; non_torch_memory takes 0.26GiB; PyTorch activation peak memory takes 0.94GiB; the rest of the memory reserved for KV Cache is 2.18GiB.
INFO 12-22 10:55:35 gpu_executor.py:76] # GPU blocks: 715, # CPU blocks: 1310
INFO 12-22 10:55:35 gpu_executor.py:80] Maximum concurrency for 2048 tokens per request: 5.59x
"""  # noqa: E501
V08_COMMAS = """INFO 08-17 17:35:12 [model_runner.py:1105] Loading model weights took 14.82 GB memory.
INFO 08-17 17:35:14 [worker.py:245] Memory profiling results: total_gpu_memory=121.00GiB, non_torch_memory=1.20GiB, torch_peak_memory=15.20GiB, available_memory=104.60GiB, kv_cache_memory=27.15GiB.
"""  # noqa: E501
SGLANG_NEW = """[2025-12-29 18:33:03 TP1] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=16.10 GB, mem usage=7.09 GB.
[2025-12-29 18:33:03 TP0] Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem=16.00 GB, mem usage=7.08 GB.
[2025-12-29 18:33:04 TP0] KV Cache is allocated. #tokens: 298447, K size: 5.69 GB, V size: 5.69 GB
[2025-12-29 18:33:04 TP0] max_total_num_tokens=298447, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4096, context_len=40960
"""  # noqa: E501
SGLANG_MLA_QUANT = """[2025-11-04 05:27:13 DP0 TP0 EP0] Load weight end. type=Qwen3_5MoeForConditionalGeneration, quant=compressed-tensors, avail mem=91.18 GB, mem usage=23.36 GB.
[2025-11-04 05:27:13 DP0 TP0 EP0] KV Cache is allocated. #tokens: 524288, KV size: 17.16 GB
"""  # noqa: E501


V021_GRAPHS = """(Worker_TP0 pid=514) INFO 07-12 02:35:26 [gpu_model_runner.py:6639] Estimated CUDA graph memory: 1.58 GiB total
(Worker_TP1 pid=515) INFO 07-12 02:35:26 [gpu_model_runner.py:6639] Estimated CUDA graph memory: 1.58 GiB total
(Worker_TP0 pid=514) INFO 07-12 02:35:26 [gpu_worker.py:538] Available KV cache memory: 10.29 GiB
(EngineCore pid=1501) INFO [gpu_worker.py:495] The current --gpu-memory-utilization=0.7200 is equivalent to --gpu-memory-utilization=0.6026 without CUDA graph memory profiling.
"""  # noqa: E501
SGLANG_AVAIL_FIRST = """[2025-03-08 12:29:28 TP3] Capture cuda graph end. Time elapsed: 7.22 s. avail mem=0.53 GB. mem usage=0.94 GB.
[2025-03-08 12:29:28 TP0] Capture cuda graph end. Time elapsed: 7.23 s. avail mem=0.53 GB. mem usage=0.93 GB.
"""  # noqa: E501
SGLANG_ARGS = """[2026-05-13 02:13:58] Setting KV cache dtype to fp8_e4m3 for DeepseekV4ForCausalLM.
[2026-05-13 02:13:58] DP attention is enabled. The chunked prefill size is adjusted to 2048 to avoid MoE kernel issues.
[2026-03-25 12:50:38] INFO engine.py:177: server_args=ServerArgs(model_path='qwen/qwen2.5-0.5b-instruct', tokenizer_path='qwen/qwen2.5-0.5b-instruct', tokenizer_mode='auto', trust_remote_code=False, context_length=None, dtype='auto', quantization=None, kv_cache_dtype='auto', mem_fraction_static=0.871, max_running_requests=None, chunked_prefill_size=8192, tp_size=2, moe_dense_tp_size=None, page_size=1)
"""  # noqa: E501


def test_line_variants_across_versions() -> None:
    v07 = parse_engine_log(V07_SPLIT)  # one summary over three prefixed lines
    assert (v07.figures["weights_gib"], v07.figures["kv_cache_gib"], v07.figures["non_torch_gib"]) == (
        8.5107, 2.18, 0.26)
    # 715 blocks x 16 = 11,440 tokens; / 2,048 per request = 5.586, which the log prints as 5.59x
    assert v07.figures["kv_cache_tokens"] == 11440 and round(11440 / 2048, 2) == v07.figures["max_concurrency"]
    assert v07.knobs["memory_fraction"].value == 0.15
    v08 = parse_engine_log(V08_COMMAS)
    assert (v08.figures["weights_gib"], v08.figures["kv_cache_gib"], v08.figures["peak_torch_memory_gib"]) == (
        14.82, 27.15, 15.2)
    new = parse_engine_log(SGLANG_NEW)  # TP0's figures, whatever rank printed first
    assert new.engine == "sglang" and new.figures["weights_gib"] == 7.08
    assert new.figures["kv_cache_gib"] == pytest.approx(11.38) and new.figures["kv_cache_tokens"] == 298447
    assert (new.knobs["context"].value, new.knobs["max_num_seqs"].value) == (40960, 4096)
    graphs = parse_engine_log(V021_GRAPHS)  # v0.21+ prints the estimate before it captures
    assert graphs.figures["cuda_graph_gib"] == 1.58 and graphs.figures["kv_cache_gib"] == 10.29
    assert graphs.knobs["memory_fraction"].value == 0.72
    assert parse_engine_log(SGLANG_AVAIL_FIRST).figures["cuda_graph_gib"] == 0.93  # TP0's
    args = parse_engine_log(SGLANG_ARGS).knobs  # what it printed wins over its echoed arguments
    assert (args["model"].value, args["tp"].value, args["memory_fraction"].value) == (
        "qwen/qwen2.5-0.5b-instruct", 2, 0.871)
    assert (args["kv_cache_dtype"].value, args["max_num_batched_tokens"].value) == ("fp8_e4m3", 2048)
    assert "context" not in args  # context_length=None: not set
    mla = parse_engine_log(SGLANG_MLA_QUANT)
    assert (mla.figures["weights_gib"], mla.figures["kv_cache_gib"], mla.figures["kv_cache_tokens"]) == (
        23.36, 17.16, 524288)


def test_text_of_another_shape_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="no vLLM or SGLang start-up line") as caught:
        parse_engine_log("hello\nworld\n")
    assert "\n" not in str(caught.value)


def test_a_file_of_another_shape_through_the_cli(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hello\nworld\n")
    result = runner.invoke(app, ["calibrate", "--from", str(other)])
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "start-up log" in result.output
    result = runner.invoke(app, ["calibrate", "--from", str(other), "--json"])
    error = json.loads(result.output.splitlines()[0])
    assert result.exit_code == 2 and "benchmark export" in error["error"] and "\n" not in error["error"]


@needs_logs
def test_an_unknown_model_asks_for_model(tmp_path: Path) -> None:
    # the log names a local folder (~/.cache/huggingface/qwen3.6-35b-a3b-nvfp4), no preset and no hub id
    log = LOGS / "vllm-0.24.0-rtx5090-qwen3.6-35b-a3b-nvfp4-131k-fp8kv.yaml"
    result = runner.invoke(app, ["calibrate", "--from", str(log), "--json"])
    assert result.exit_code == 2 and "--model" in json.loads(result.output.splitlines()[0])["error"]


@needs_logs
def test_json_shape_and_the_tables_difference(tmp_path: Path) -> None:
    result = runner.invoke(app, ["calibrate", "--from", str(RTX3090), "--json"])
    assert result.exit_code == 0, result.output[-300:]
    done = json.loads(result.output)
    assert (done["kind"], done["engine"], done["model"], done["gpu"]) == ("engine-log", "vllm", "llama-3.1-8b",
                                                                          "rtx-3090")
    figures = {f["figure"]: f for f in done["figures"]}
    assert set(figures) >= {"weights_gib", "kv_cache_gib", "kv_cache_tokens", "gpu_blocks", "cuda_graph_gib",
                            "max_concurrency"}
    assert figures["kv_cache_tokens"]["log"] == 31232 and figures["max_concurrency"]["log"] == 1.56
    for f in done["figures"]:
        if f["log"] and f["predicted"] is not None:
            assert f["difference"] == pytest.approx((f["predicted"] - f["log"]) / f["log"])
    assert done["settings"]["context"] == {"value": 20000, "from": "printed in the log (figures)"}
    assert done["settings"]["gpu"]["from"] == "YAML record"
    table = runner.invoke(app, ["calibrate", "--from", str(RTX3090)], env={"COLUMNS": "160"})
    row = next(line for line in table.output.splitlines() if "KV tokens" in line)
    log, predicted, difference = [c.strip() for c in row.split("│")[2:5]]
    assert log == "31,232"
    expected = (float(predicted.replace(",", "")) - 31232) / 31232
    assert float(difference.rstrip("%")) == pytest.approx(100 * expected, abs=0.06)


@needs_logs
def test_save_writes_the_record(tmp_path: Path) -> None:
    target = tmp_path / "record.json"
    result = runner.invoke(app, ["calibrate", "--from", str(SGLANG_OLD), "--save", str(target), "--json"])
    assert result.exit_code == 0, result.output[-300:]
    saved = json.loads(target.read_text())
    assert saved["measured"]["weights_gib"] == pytest.approx(15.0) and saved["engine"] == "sglang"


def test_text_from_the_log_never_reaches_the_terminal_as_markup_or_escapes(tmp_path: Path) -> None:
    hostile = tmp_path / "hostile.log"
    hostile.write_text("vllm serve meta-llama/Llama-3.1-8B-Instruct --gpu-memory-utilization 0.9\n"
                       "INFO non-default args: {'dtype': '[red]x\x1b]8;;http://e.vil\x07y', 'max_model_len': 4096}\n"
                       "INFO # GPU blocks: 100, # CPU blocks: 2\n")
    result = runner.invoke(app, ["calibrate", "--from", str(hostile), "--model", "llama-3.1-8b", "--gpu", "l40s"],
                           env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output[-300:]
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert "[red]x" in result.output  # shown as typed, not taken as markup


@needs_logs
def test_a_local_path_falls_back_to_the_records_model_and_a_reupload_to_its_preset() -> None:
    # the log prints '/mnt/.../llama3-70b-awq'; the record names TechxGenus/Meta-Llama-3-70B-Instruct-AWQ, a re-upload
    # of meta-llama/Meta-Llama-3-70B-Instruct quantized to AWQ int4
    result = runner.invoke(app, ["calibrate", "--from", str(LOGS / "vllm-0.16.0-l40s-x2-llama3-70b-awq-tp2.yaml"),
                                 "--json"])
    assert result.exit_code == 0, result.output[-300:]
    done = json.loads(result.output)
    assert done["settings"]["model"]["from"].startswith("YAML record (model), read as meta-llama/meta-llama-3-70b")
    assert done["settings"]["format"]["value"] == "awq-int4" and done["settings"]["tp"]["value"] == 2


@needs_logs
def test_a_hub_id_without_a_preset_is_fetched_and_offline_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    """A log naming a hub repo gpuwise has no preset for reads its config.json as `estimate` would; offline
    (HF_HUB_OFFLINE), the one-line error says so and still asks for --model."""
    text = (LOGS / "vllm-0.11.0-l40s-granite-4.0-micro-fp8-131k.yaml").read_text("utf-8")
    raw = tmp_path / "engine.log"
    raw.write_text(yaml.safe_load(text)["excerpt"].replace("ibm-granite/granite-4.0-micro", "acme-lab/nonesuch-7b"),
                   "utf-8")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = runner.invoke(app, ["calibrate", "--from", str(raw), "--gpu", "l40s", "--json"])
    error = json.loads(result.output.splitlines()[0])["error"]
    assert result.exit_code == 2 and "acme-lab/nonesuch-7b" in error and "offline" in error and "--model" in error


def test_a_version_the_log_does_not_print_comes_from_the_record_or_its_date() -> None:
    """PyPI's upload dates: vLLM 0.9.2 on 2025-07-08 and 0.10.0 on 2025-07-25, so a log of 2025-07-22 ran 0.9.2 at
    the newest; a record's own reading ('about 0.9.2/0.10.0') names its first version."""
    from gpuwise.workload.engine_log_config import parse_engine_log, release_on

    assert release_on("vllm", "2025-07-22") == "0.9.2" and release_on("vllm", "2025-07-25") == "0.10.0"
    assert release_on("sglang", "2025-10-10") == "0.5.3" and release_on("vllm", "2023-01-01") is None
    excerpt = "INFO 07-22 10:00:00 [kv_cache_utils.py:716] GPU KV cache size: 178,880 tokens"
    dated = parse_engine_log(yaml.safe_dump({"engine": "vllm", "date": "2025-07-22", "excerpt": excerpt}))
    assert dated.version is not None and dated.version.value == "0.9.2" and "PyPI" in dated.version.origin
    named = parse_engine_log(yaml.safe_dump({"engine": "vllm", "date": "2025-07-22", "excerpt": excerpt,
                                             "engine_version": "not printed (so about 0.10.0/0.10.1)"}))
    assert named.version is not None and named.version.value == "0.10.0"


@needs_logs
def test_the_engines_counts_through_calibrate_within_the_issues_bands() -> None:
    """Every public log through the reader and the prediction `calibrate --from` makes: KV tokens within 5 % of the
    engine's count on at least 9 of the 12 logs that print it and gpuwise answers offline, weights within 10 % on all
    of them (the floor this release reached; benchmarks/engine_logs.py prints each)."""
    from gpuwise.api.engine_logs import compare_log
    from gpuwise.errors import GpuwiseError
    from gpuwise.workload.engine_log_config import read_engine_log

    tokens, weights = [], []
    for path in sorted(LOGS.glob("*.yaml")):
        try:
            done = compare_log(read_engine_log(path))
        except GpuwiseError:
            continue
        rows = {r.key: r for r in done.rows}
        for key, into in (("kv_cache_tokens", tokens), ("weights_gib", weights)):
            row = rows.get(key)
            if row is not None and row.log and row.predicted is not None:
                into.append(abs(row.predicted / row.log - 1))
    assert len(tokens) >= 12 and sum(e <= 0.05 for e in tokens) >= 9, sorted(tokens)
    assert weights and all(e <= 0.10 for e in weights), sorted(weights)


def test_early_v1_blocks_a_negative_graph_figure_and_a_gguf_checkpoint() -> None:
    """Lines from public starts outside the shared set (benchmarks/data/engine-logs-extra): vLLM 0.7's V1 engine
    prints its GPU blocks alone (1,381 x 16 = 22,096 tokens); on unified memory the graph capture's free-memory
    delta can be negative, and it is read as printed; a GGUF checkpoint's type comes from the record or the file."""
    early = parse_engine_log("INFO 01-30 03:19:14 kv_cache_utils.py:395] # GPU blocks: 1381\n")
    assert early.figures["gpu_blocks"] == 1381 and "cpu_blocks" not in early.figures
    assert early.figures["kv_cache_tokens"] == 1381 * 16
    v0 = parse_engine_log("INFO 12-16 16:25:51 gpu_executor.py:76] # GPU blocks: 1,952, # CPU blocks: 2,048\n")
    assert (v0.figures["gpu_blocks"], v0.figures["cpu_blocks"]) == (1952, 2048)
    spark = parse_engine_log("(EngineCore_DP0 pid=164) INFO 01-23 15:50:29 [gpu_model_runner.py:3480] Graph "
                             "capturing finished in 18 secs, took -0.03 GiB\nGPU KV cache size: 840,160 tokens\n")
    assert spark.figures["cuda_graph_gib"] == -0.03
    from gpuwise.api import model
    from gpuwise.api.engine_logs import job_options

    record = yaml.safe_dump({"engine": "vllm", "quantization": "gguf Q4_K_M",
                             "model": "/app/model/gguf/Llama-3.3-70B-Instruct-Q8_0.gguf",
                             "excerpt": "INFO 12-16 16:25:51 gpu_executor.py:76] # GPU blocks: 516, # CPU blocks: 819"})
    options, knobs, _ = job_options(parse_engine_log(record), model("llama-3.3-70b"), None)
    assert options["quant"] == "gguf-q4_k_m" and knobs["format"].value == "gguf-q4_k_m"  # the record's word first
