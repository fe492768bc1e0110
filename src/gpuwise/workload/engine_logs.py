"""vLLM's and SGLang's start-up logs read into one shape: the memory figures the engine printed, per GPU, and the
configuration it printed (workload/engine_log_config.py reads the knobs).

Each pattern below is a line the engine's logger prints, with the file that prints it at a release tag (the tags
are the versions whose logs in ../shared/data/engine-logs show the line with its ``[file.py:line]``):

vLLM V1 (``Initializing a V1 LLM engine``):
- ``Model loading took X GiB [memory] and S seconds``: vllm-project/vllm@v0.11.0 vllm/v1/worker/gpu_model_runner.py
  ``load_model`` (``memory`` added by v0.16.0);
- ``Available KV cache memory: X GiB``: @v0.11.0 vllm/v1/worker/gpu_worker.py ``determine_available_memory``;
- ``GPU KV cache size: N tokens`` and ``Maximum concurrency for L tokens per request: Cx``: @v0.11.0
  vllm/v1/core/kv_cache_utils.py ``_report_kv_cache_config`` (the engine core's, the minimum over the workers);
- ``Graph capturing finished in S secs, took X GiB``: @v0.11.0 vllm/v1/worker/gpu_model_runner.py ``capture_model``;
- ``non-default args: {...}``: @v0.11.0 vllm/entrypoints/utils.py ``log_non_default_args``.
vLLM V0 (``Initializing an LLM engine``, vllm/engine/llm_engine.py):
- ``Loading model weights took X GB`` (GiB: it divides by 2**30): @v0.6.4 vllm/worker/model_runner.py ``load_model``;
- ``# GPU blocks: N, # CPU blocks: M``: @v0.6.4 vllm/executor/gpu_executor.py and distributed_gpu_executor.py
  ``determine_num_available_blocks`` (``# cuda blocks`` from v0.6.5, vllm/executor/executor_base.py); tokens are
  blocks x block_size (16 unless printed);
- ``Memory profiling results: total_gpu_memory=... kv_cache_size=... gpu_memory_utilization=...``: @v0.6.4
  vllm/worker/worker.py ``determine_num_available_blocks`` (v0.6.5/0.6.6 add ``duration=``, commas, and users'
  notes hard-wrap it; v0.8 ``torch_peak_memory=``, ``kv_cache_memory=``);
- ``Memory profiling takes S seconds ... total_gpu_memory (X GiB) x gpu_memory_utilization (U) = Y GiB; model
  weights take A GiB; non_torch_memory takes B GiB; PyTorch activation peak memory takes C GiB; the rest of the
  memory reserved for KV Cache is D GiB.``: @v0.7.2 vllm/worker/worker.py.
SGLang (sgl-project/sglang python/sglang/srt/model_executor/model_runner.py ``load_model`` and ``init_memory_pool``,
python/sglang/srt/managers/scheduler.py, python/sglang/srt/model_executor/cuda_graph_runner.py, at v0.3.0 for the
old lines and v0.4.6 for ``KV Cache is allocated`` and ``mem usage``): ``Load weight begin. avail mem=X GB``,
``Load weight end. type=T, dtype=D, avail mem=X GB[, mem usage=Y GB]``, ``KV Cache is allocated. #tokens: N, K size:
X GB, V size: Y GB`` (MLA: ``KV size: X GB``), ``Memory pool end. avail mem=X GB``, ``max_total_num_tokens=N, ...``,
``Capture cuda graph end. Time elapsed: S s[. mem usage=X GB]``, ``server_args=ServerArgs(...)``. Its ``GB`` is GiB
(``get_available_gpu_memory`` divides by 1 << 30).

Lines carry varying prefixes (``(EngineCore_DP0 pid=175) INFO 11-14 14:23:39 [core.py:77]``, ``[22:30:32 TP0]``,
``(VllmWorkerProcess pid=1786)``) or none (trimmed by users): patterns search anywhere in a line. Per-rank lines:
the figure of the lowest rank (a line without a worker marker is the driver's, rank 0).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpuwise.errors import ConfigError

MAX_LINES = 200_000
MAX_LINE = 200_000  # characters of one line kept (a config line is some 5,000)
NUMBER = r"(\d[\d,]*(?:\.\d+)?)"

_RANK = re.compile(r"\bTP(\d+)\b|\brank=(\d+)|Worker_TP(\d+)")
_NOT_DRIVER = re.compile(r"VllmWorkerProcess|VllmWorker rank=[1-9]|RayWorkerWrapper")


def _num(text: str) -> float:
    return float(text.replace(",", ""))


@dataclass(frozen=True)
class Pattern:
    """A line the engine prints and the figures it gives: (figure, group, scale) per capture group."""

    engine: str
    name: str
    regex: re.Pattern[str]
    figures: tuple[tuple[str, int], ...]


def _p(engine: str, name: str, regex: str, *figures: tuple[str, int]) -> Pattern:
    return Pattern(engine, name, re.compile(regex), figures)


PATTERNS: tuple[Pattern, ...] = (
    _p("vllm", "model loading", rf"Model loading took {NUMBER} ?GiB", ("weights_gib", 1)),
    _p("vllm", "loading weights (V0)", rf"Loading model weights took {NUMBER} ?GB", ("weights_gib", 1)),
    _p("vllm", "available KV", rf"Available KV cache memory: {NUMBER} ?GiB", ("kv_cache_gib", 1)),
    _p("vllm", "KV tokens", rf"GPU KV cache size: {NUMBER} tokens", ("kv_cache_tokens", 1)),
    _p("vllm", "max concurrency", rf"Maximum concurrency for {NUMBER} tokens per request: {NUMBER}x",
       ("max_concurrency_at_len", 1), ("max_concurrency", 2)),
    _p("vllm", "graph capture", rf"Graph capturing finished in {NUMBER} secs?, took (-?\d[\d,]*(?:\.\d+)?) ?GiB",
       ("cuda_graph_gib", 2)),  # negative on unified memory: the free-memory delta the host's allocations moved
    _p("vllm", "blocks (V0)", r"(?:GPU|gpu|cuda|CUDA|rocm|ROCm) blocks: (\d+(?:,\d{3})*)"
       r"(?:, # CPU blocks: (\d+(?:,\d{3})*))?",
       ("gpu_blocks", 1), ("cpu_blocks", 2)),  # early V1 (kv_cache_utils.py) prints the GPU blocks alone
    _p("vllm", "blocks (V0, Ray)", rf"can allocate {NUMBER} GPU blocks, {NUMBER} CPU blocks", ("gpu_blocks", 1),
       ("cpu_blocks", 2)),
    _p("vllm", "KV too small", rf"max seq len \({NUMBER}\) is larger than the maximum number of tokens that can be "
       rf"stored in KV cache \({NUMBER}\)", ("max_model_len", 1), ("kv_cache_tokens", 2)),
    _p("vllm", "KV too small (V1)", rf"larger than the available KV cache memory \({NUMBER} ?GiB\)",
       ("kv_cache_gib", 1)),
    _p("vllm", "CUDA graph estimate", rf"Estimated CUDA graph memory: {NUMBER} ?GiB", ("cuda_graph_estimated_gib", 1)),
    _p("vllm", "CUDA graph pool", rf"CUDA graph pool memory: {NUMBER} ?GiB \(actual\)", ("cuda_graph_pool_gib", 1)),
    _p("vllm", "engine config", r"Initializing an? (?:V\d )?LLM engine"),
    _p("vllm", "non-default args", r"non-default args: \{"),
    _p("vllm", "API server", r"vLLM API server version |[█▄▀] +version \d"),
    _p("sglang", "load begin", rf"Load weight begin\. avail mem={NUMBER} ?GB", ("avail_mem_before_load_gb", 1)),
    _p("sglang", "load end", rf"Load weight end\. .{{0,400}}?avail mem={NUMBER} ?GB", ("avail_mem_after_load_gb", 1)),
    _p("sglang", "load usage", rf"Load weight end\. .{{0,400}}?mem usage={NUMBER} ?GB", ("weights_gib", 1)),
    _p("sglang", "KV allocated", rf"KV Cache is allocated\. #tokens: {NUMBER}, K size: {NUMBER} ?GB, V size: "
       rf"{NUMBER} ?GB", ("kv_cache_tokens", 1), ("k_size_gib", 2), ("v_size_gib", 3)),
    _p("sglang", "KV allocated (MLA)", rf"KV Cache is allocated\. #tokens: {NUMBER}, KV size: {NUMBER} ?GB",
       ("kv_cache_tokens", 1), ("kv_cache_gib", 2)),
    _p("sglang", "pool end", rf"Memory pool end\. avail mem={NUMBER} ?GB", ("avail_mem_after_pool_gb", 1)),
    _p("sglang", "token budget", rf"max_total_num_tokens={NUMBER}", ("max_total_num_tokens", 1)),
    _p("sglang", "graph capture", rf"Capture (?:[\w ]{{1,40}} )?(?i:cuda graph) end\..{{0,400}}?mem usage={NUMBER} ?GB",
       ("cuda_graph_gib", 1)),
    _p("sglang", "graph capture (no memory)", r"Capture (?:[\w ]{1,40} )?(?i:cuda graph) end\."),
    _p("sglang", "server args", r"server_args=ServerArgs\("),
)

# vLLM V0's profiling summary (its figures are read by _summary): key=value pairs (GiB), the log's keys -> the figures'
_SUMMARY = _p("vllm", "memory profiling summary", r"Memory profiling (?:results|takes)|model weights take")
_PROFILE_KEYS = {"total_gpu_memory": "total_gpu_memory_gib", "initial_memory_usage": "initial_memory_usage_gib",
                 "peak_torch_memory": "peak_torch_memory_gib", "torch_peak_memory": "peak_torch_memory_gib",
                 "memory_usage_post_profile": "memory_usage_post_profile_gib", "non_torch_memory": "non_torch_gib",
                 "kv_cache_size": "kv_cache_gib", "kv_cache_memory": "kv_cache_gib",
                 "gpu_memory_utilization": "gpu_memory_utilization"}
_PROFILE_PAIR = re.compile(r"([a-z_]+)=(\d[\d.]*)")
# v0.7's sentence form, printed over several lines (each with its own prefix) or one
_TAKES = (("total_gpu_memory_gib", rf"total_gpu_memory \({NUMBER} ?GiB\)"),
          ("gpu_memory_utilization", rf"gpu_memory_utilization \({NUMBER}\)"),
          ("weights_gib", rf"model weights take {NUMBER} ?GiB"),
          ("non_torch_gib", rf"non_torch_memory takes {NUMBER} ?GiB"),
          ("activation_peak_gib", rf"activation peak memory takes {NUMBER} ?GiB"),
          ("kv_cache_gib", r"reserved for KV Cache is (-?\d[\d.]*?)\.? ?GiB"))
_SUMMARIES = ("Memory profiling results:", "Memory profiling takes")
_COMPLETE = re.compile(r"gpu_memory_utilization=\d\.\d\d|kv_cache_memory=[\d.]+ ?GiB|reserved for KV Cache is")
_LINE_START = re.compile(r"^\s*(?:\(|\[|INFO|WARNING|ERROR|DEBUG|\S+ pid=|\d\d-\d\d )")


@dataclass(frozen=True)
class Hit:
    value: float
    rank: int
    line: int


@dataclass
class Reading:
    """What the lines gave: each figure's hits (rank, line), the engine's own markers, the lines kept."""

    hits: dict[str, list[Hit]] = field(default_factory=dict)
    engines: dict[str, int] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    def add(self, name: str, value: float, rank: int, line: int) -> None:
        self.hits.setdefault(name, []).append(Hit(value, rank, line))

    def figures(self, minimum: frozenset[str]) -> dict[str, float]:
        """The lowest rank's figure (its first line), or the least over the ranks for ``minimum``."""
        out = {}
        for name, hits in self.hits.items():
            chosen = min(hits, key=lambda h: h.value) if name in minimum else min(hits, key=lambda h: (h.rank,
                                                                                                       h.line))
            out[name] = chosen.value
        return out


def rank_of(line: str) -> int:
    """The worker rank a line's prefix names: TP<n>, rank=<n>, Worker_TP<n>; a V0 worker process (not the driver)
    is rank 1; no marker is the driver, 0."""
    found = _RANK.search(line[:200])
    if found:
        return int(next(g for g in found.groups() if g is not None))
    return 1 if _NOT_DRIVER.search(line[:200]) else 0


def logical_lines(text: str) -> list[str]:
    """The text's lines with a hard-wrapped profiling summary joined back into one: the lines after it that do not
    start as a log line does are its continuation (users' notes wrap it, even inside a number)."""
    raw = text.splitlines()[:MAX_LINES]
    out: list[str] = []
    joining = False
    for line in raw:
        line = line[:MAX_LINE]
        if joining and line.strip() and not _LINE_START.match(line) and not any(s in line for s in _SUMMARIES):
            out[-1] = out[-1] + line.strip() if out[-1].endswith((" ", ",")) else out[-1].rstrip() + line.strip()
            joining = not _COMPLETE.search(out[-1])
            continue
        joining = any(s in line for s in _SUMMARIES)
        out.append(line)
        joining = joining and not _COMPLETE.search(line)
    return out


def _summary(line: str, rank: int, number: int, reading: Reading) -> bool:
    """The profiling summary's figures in ``line``: V0's key=value pairs, or v0.7's sentences (on any line)."""
    found_any = False
    if "Memory profiling results:" in line:
        for key, value in _PROFILE_PAIR.findall(line.split("Memory profiling results:", 1)[1]):
            if key in _PROFILE_KEYS:
                reading.add(_PROFILE_KEYS[key], float(value.rstrip(".")), rank, number)
                found_any = True
    for name, regex in _TAKES:
        found = re.search(regex, line)
        if found:
            reading.add(name, _num(found.group(1)), rank, number)
            found_any = True
    return found_any or "Memory profiling takes" in line


def read_lines(text: str) -> Reading:
    """Every pattern's figures in ``text``, by rank and line."""
    reading = Reading()
    for number, line in enumerate(logical_lines(text)):
        rank = rank_of(line)
        matched = False
        for pattern in PATTERNS:
            found = pattern.regex.search(line)
            if not found:
                continue
            matched = True
            reading.engines[pattern.engine] = reading.engines.get(pattern.engine, 0) + 1
            for name, group in pattern.figures:
                if found.group(group) is not None:  # an optional part the line left out
                    reading.add(name, _num(found.group(group)), rank, number)
        if _summary(line, rank, number, reading):
            matched = True
            reading.engines[_SUMMARY.engine] = reading.engines.get(_SUMMARY.engine, 0) + 1
        if matched or _CONFIG_HINT.search(line):
            reading.lines.append(line)
    return reading


_CONFIG_HINT = re.compile(r"vllm serve|sglang\.launch_server|sglang\.bench|launch_server|Namespace\(|"
                          r"Using max model len|max_num_batched_tokens=|Using KV cache dtype|"
                          r"The current --gpu-memory-utilization|Setting KV cache dtype|"
                          r"chunked prefill size is adjusted")

# figures the engine takes the least of over its workers (vLLM V0's blocks, V1's token count is already one line)
MINIMUM = frozenset({"gpu_blocks", "cpu_blocks"})


@dataclass(frozen=True)
class LogRules:
    """What one engine's log leaves to arithmetic: the KV block size its block counts are in, when not printed
    (None: the engine counts tokens, not blocks)."""

    engine: str
    block_size: int | None


LOG_RULES = (
    LogRules(engine="vllm", block_size=16),  # vllm-project/vllm@v0.6.4 vllm/config.py CacheConfig: block_size 16
    LogRules(engine="sglang", block_size=None),  # its token pool (page size 1 by default) is counted in tokens
)


def rules_of(engine: str) -> LogRules:
    return next(r for r in LOG_RULES if r.engine == engine)


def derived(figures: dict[str, float], rules: LogRules, block_size: int | None) -> dict[str, float]:
    """Figures the log gives by arithmetic: vLLM V0's tokens (blocks x block size); vLLM v0.21's graph pool or its
    estimate where no capture line says what the graphs took; SGLang's weights, pool and KV from its avail-mem
    differences and K + V sizes."""
    out = dict(figures)
    size = block_size or rules.block_size
    if "gpu_blocks" in out and size:
        out["block_size"] = float(size)
        out.setdefault("kv_cache_tokens", out["gpu_blocks"] * size)
    if "kv_cache_tokens" in out and block_size and rules.block_size:
        out.setdefault("gpu_blocks", float(int(out["kv_cache_tokens"] // block_size)))
    if "cuda_graph_gib" not in out:  # v0.21+: the pool's actual size, else the estimate
        graphs = out.get("cuda_graph_pool_gib", out.get("cuda_graph_estimated_gib"))
        if graphs is not None:
            out["cuda_graph_gib"] = graphs
    before, loaded = out.get("avail_mem_before_load_gb"), out.get("avail_mem_after_load_gb")
    pool = out.get("avail_mem_after_pool_gb")
    if before is not None and loaded is not None:
        out.setdefault("weights_gib", round(before - loaded, 4))
    if loaded is not None and pool is not None:
        out["kv_pool_gib"] = round(loaded - pool, 4)
    if "k_size_gib" in out and "v_size_gib" in out:
        out["kv_cache_gib"] = round(out.pop("k_size_gib") + out.pop("v_size_gib"), 4)
    if "max_total_num_tokens" in out:
        out.setdefault("kv_cache_tokens", out["max_total_num_tokens"])
    return out


def engine_of(reading: Reading, where: str) -> str:
    """vllm or sglang, by which engine's lines the text has; a text with none is not an engine log."""
    if not reading.engines:
        raise ConfigError(f"{where}: no vLLM or SGLang start-up line in it (such as 'GPU KV cache size: N tokens', "
                          "'# GPU blocks: N', 'KV Cache is allocated', 'max_total_num_tokens=N'); give the engine's "
                          "log or a benchmark export")
    return max(reading.engines, key=lambda e: reading.engines[e])


FIGURE_NAMES: Mapping[str, str] = {
    "weights_gib": "weights GiB", "kv_cache_gib": "KV cache GiB", "kv_cache_tokens": "KV tokens",
    "gpu_blocks": "blocks", "cuda_graph_gib": "CUDA graph GiB", "max_concurrency": "maximum concurrency"}
