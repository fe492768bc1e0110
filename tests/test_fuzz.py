"""Fuzzing the edges: every flag of the typed job through the real CLI, and the config.json, scenario and catalog
readers, with values no one should type. The property is the issue's: a valid answer, or exit code 2 with one
line (JSON with --json); never a traceback, never a hang (each example runs under an alarm).
"""

from __future__ import annotations

import json
import math
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuwise import api
from gpuwise.catalog import load_catalog
from gpuwise.cli.main import app
from gpuwise.errors import GpuwiseError
from gpuwise.recommend.request import load_scenario
from gpuwise.workload.jobs.hpc import APPS
from gpuwise.workload.jobs.parse import job_flag_fields, make_job
from gpuwise.workload.model.presets import presets

runner = CliRunner()
SCALE = float(os.environ.get("GPUWISE_FUZZ_SCALE", "1"))  # a longer campaign: GPUWISE_FUZZ_SCALE=50 pytest ...
FUZZ = settings(max_examples=int(40 * SCALE), deadline=None, suppress_health_check=list(HealthCheck),
                derandomize=SCALE == 1)


def examples(n: int) -> settings:
    return settings(FUZZ, max_examples=int(n * SCALE))


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Fail the example, rather than hang the suite, when it runs past ``seconds``."""
    def expired(*_: object) -> None:
        raise TimeoutError(f"ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_cli(args: list[str], seconds: float = 20.0, *, as_json: bool | None = None, in_hypothesis: bool = True
              ) -> None:
    """``as_json``: the caller appended --json (default: the last argument is --json)."""
    as_json = args[-1] == "--json" if as_json is None else as_json
    with time_limit(seconds):
        result = runner.invoke(app, args)
    if in_hypothesis:
        event(f"exit {result.exit_code}")  # --hypothesis-show-statistics: how many examples were answered
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, repr(result.exception))
    assert "Traceback" not in result.stdout + result.stderr, args
    if result.exit_code == 0:
        if as_json:
            json.loads(result.stdout)  # valid JSON (no NaN: allow_nan is off in the writer)
        return
    assert result.exit_code in (1, 2), (args, result.exit_code, result.stderr)  # 1: doctor-style verdicts only
    assert result.stderr.strip().count("\n") == 0, (args, result.stderr)
    if as_json and "--json" in args[:-1]:
        return  # "--json" was also a value: which one click read as the flag depends on the other flags
    if as_json:
        assert result.stdout.strip(), (" ".join(args), result.stderr)
        document = json.loads(result.stdout.strip().splitlines()[-1])
        assert document["exit_code"] == result.exit_code and document["error"]


# ---- values ----------------------------------------------------------------------------------------------
ODD_NUMBERS = st.sampled_from(["0", "-1", "1e400", "nan", "inf", "-inf", "9" * 5000, "1.5", "0x10", "", " ", "1e-320",
                               "65537", "2", "4", "8", "1024", "3"])
ODD_TEXT = st.one_of(st.text(max_size=30), st.sampled_from(["", "../../etc/passwd", "\x00", "é" * 500, "--json"]))


def _bounds(info: Any) -> tuple[float, float]:
    low, high = 0.0, 4096.0
    for rule in info.metadata:
        low = float(getattr(rule, "ge", None) or getattr(rule, "gt", None) or low)
        high = min(high, float(getattr(rule, "le", None) or high))
    return low, high


def _valid(info: Any) -> st.SearchStrategy[str]:
    """Values the field's own type and range accept, most of the time (so that answers are fuzzed too)."""
    from gpuwise.flags import choices

    accepted = choices(info)
    if accepted:
        return st.sampled_from(accepted)
    low, high = _bounds(info)
    if "int" in str(info.annotation):
        return st.integers(min_value=int(low), max_value=max(int(low), int(high))).map(str)
    return st.floats(min_value=low, max_value=max(low, high), allow_nan=False).map(repr)


def _value(info: Any) -> st.SearchStrategy[str]:
    return st.one_of(*[_valid(info)] * 14, ODD_NUMBERS, ODD_TEXT)


def _flags(command: str, tasks: tuple[str, ...]) -> st.SearchStrategy[list[str]]:
    fields = job_flag_fields(command, tasks)
    pairs = []
    for name, (info, flag) in fields.items():
        spelled = flag.spelling(name)
        if info.annotation in (bool, bool | None):
            pairs.append(st.just([spelled]))
        else:
            pairs.append(_value(info).map(lambda v, s=spelled: [s, v]))
    return st.lists(st.one_of(*pairs), max_size=4).map(lambda groups: [a for g in groups for a in g])


MODELS = st.sampled_from([*sorted(presets()), "nope-model", "someone/x.json", ""])
GPUS = st.sampled_from(["rtx-4090", "h100-sxm-80gb", "t4", "mi300x", "b200-sxm-180gb", "rtx-3060-12gb", "a100-sxm-80gb",
                        "l40s", "h100", "nonexistent"])


@FUZZ
@given(data=st.data(), model=MODELS, gpu=GPUS, task=st.sampled_from(["train", "infer"]), as_json=st.booleans())
def test_estimate_and_fit_answer_or_refuse_in_one_line(data: st.DataObject, model: str, gpu: str, task: str,
                                                       as_json: bool) -> None:
    # mostly the chosen task's own flags (answers get fuzzed too), sometimes the other task's (refused by name)
    tasks = data.draw(st.sampled_from([(task,), (task,), (task,), ("train", "infer")]))
    flags = data.draw(_flags("estimate", tasks))
    for command in ("estimate", "fit"):
        check_cli([command, model, "--gpu", gpu, "--task", task, *flags, *(["--json"] if as_json else [])],
                  as_json=as_json)


LOAD = st.lists(st.one_of(
    st.sampled_from([["--qps", "1e9"], ["--qps", "0.001"], ["--p99-ms", "1"], ["--seed", "-1"],
                     ["--requests", "100000"], ["--output-len", "1000000"], ["--slo", "p50"]]),
    st.integers(min_value=1, max_value=200).map(lambda q: ["--qps", str(q)]),
    st.integers(min_value=100, max_value=60_000).map(lambda ms: ["--p99-ms", str(ms)]),
    st.integers(min_value=20, max_value=300).map(lambda n: ["--requests", str(n)]),
    st.sampled_from([["--slo", "ttft"], ["--slo", "e2e"], ["--length-dist", "exponential"], ["--seed", "7"]])),
    max_size=3)


@examples(30)
@given(model=st.sampled_from(["llama-3.1-8b", "qwen2-7b", "mixtral-8x7b", "gpt2", "gemma-2-9b", "bert-base-uncased"]),
       gpu=GPUS, flags=_flags("serve-sim", ("infer",)), load=LOAD)
def test_serve_sim_answers_or_refuses_in_one_line(model: str, gpu: str, flags: list[str],
                                                  load: list[list[str]]) -> None:
    check_cli(["serve-sim", model, "--gpu", gpu, *flags, *[a for pair in load for a in pair], "--json"])


@examples(15)
@given(data=st.data(), model=MODELS, task=st.sampled_from(["train", "infer"]),
       money=st.lists(st.sampled_from([["--budget-usd", "nan"], ["--budget-usd", "100"], ["--max-gpus", "0"],
                                       ["--max-gpus", "4"], ["--objective", "time"], ["--need", "warp"],
                                       ["--need", "fp8"], ["--years", "0"], ["--pue", "9"], ["--rent"], ["--buy"],
                                       ["--qps", "1e7"], ["--deadline-hours", "inf"], ["--top", "1"]]), max_size=3))
def test_recommend_answers_or_refuses_in_one_line(data: st.DataObject, model: str, task: str,
                                                  money: list[list[str]]) -> None:
    flags = data.draw(_flags("recommend", (task,)))
    check_cli(["recommend", model, "--task", task, "--max-gpus", "8", *flags, *[a for p in money for a in p],
               "--json"])


HPC_FLAGS = st.lists(st.tuples(st.sampled_from(["--atoms", "--cells", "--matrix-n", "--ns", "--timestep-fs",
                                                "--iterations", "--solves", "--runs", "--fp64-fraction",
                                                "--bytes-per-flop", "--memory-gb", "--work-tflop", "--count"]),
                               ODD_NUMBERS), max_size=4)


@examples(40)
@given(app_name=st.sampled_from([*APPS, "lammps2", ""]), gpu=GPUS, values=HPC_FLAGS,
       command=st.sampled_from(["estimate", "recommend"]))
def test_hpc_answers_or_refuses_in_one_line(app_name: str, gpu: str, values: list[tuple[str, str]],
                                            command: str) -> None:
    where = ["--gpu", gpu] if command == "estimate" else ["--max-gpus", "4", "--top", "2"]
    check_cli([command, "--task", "hpc", "--app", app_name, *where, *[a for pair in values for a in pair], "--json"])


@examples(30)
@given(gpu=GPUS, values=st.lists(st.tuples(st.sampled_from(["--count", "--price-usd", "--hours-per-day", "--years",
                                                            "--usd-per-kwh", "--pue"]), ODD_NUMBERS), max_size=4),
       used=st.booleans())
def test_tco_answers_or_refuses_in_one_line(gpu: str, values: list[tuple[str, str]], used: bool) -> None:
    check_cli(["tco", gpu, *[a for pair in values for a in pair], *(["--used"] if used else []), "--json"])


# ---- config.json -----------------------------------------------------------------------------------------
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-(10**12), max_value=10**12),
              st.sampled_from([10**30, -(10**9), 0, 1, 2, 3, 7, 64]), st.floats(allow_nan=False, allow_infinity=False),
              st.text(max_size=12)),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children,
                                                                               max_size=4)),
    max_leaves=12,
)
KEYS = sorted({key for p in presets().values() for key in p.config if isinstance(key, str)})


@examples(150)
@given(preset=st.sampled_from(sorted(presets())), changes=st.dictionaries(st.sampled_from(KEYS), JSON_VALUES,
                                                                           max_size=4),
       task=st.sampled_from(["train", "infer"]))
def test_a_mutated_config_json_is_an_architecture_or_a_one_line_error(preset: str, changes: dict[str, Any],
                                                                      task: str) -> None:
    config = {**presets()[preset].config, **changes}
    with time_limit(10):
        try:
            arch = api.model_from_config(config)
            result = api.estimate(arch, gpu="h100-sxm-80gb", task=task)
        except GpuwiseError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 2000
            return
    memory = result.memory
    assert all(math.isfinite(v) and v >= 0 for v in memory.breakdown_bytes.values()), memory.breakdown_bytes
    assert 0 < arch.active_params <= arch.total_params


@pytest.mark.parametrize("content", [
    b"\xff\xfe{\x00}\x00",  # UTF-16
    bytes(range(256)),  # binary
    b"[" * 100_000 + b"]" * 100_000,  # nested past any recursion limit
    b'{"model_type": "llama", "hidden_size": ' + b"9" * 5000 + b"}",  # past int()'s 4,300 digits
    b'{"model_type": "llama", "hidden_size": NaN}',
    b'{"model_type": "resnet", "embedding_size": 64, "hidden_sizes": [64], "depths": [1000000000]}',  # spins for ever
    b"",
], ids=["utf-16", "binary", "nested", "5000-digits", "nan", "resnet-depths", "empty"])
def test_hostile_config_files_are_one_line(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(content)
    check_cli(["estimate", str(path), "--gpu", "t4", "--json"], seconds=10, in_hypothesis=False)
    check_cli(["estimate", str(path), "--gpu", "t4"], seconds=10, in_hypothesis=False)


# ---- scenario files ----------------------------------------------------------------------------------------
SCENARIO_PARTS = st.fixed_dictionaries({}, optional={
    "workloads": st.one_of(st.lists(st.fixed_dictionaries({"model": st.sampled_from(["qwen2-7b", "x"])}, optional={
        "task": st.sampled_from(["train", "infer", "serve", 3]), "options": JSON_VALUES, "tokens": JSON_VALUES,
        "qps": JSON_VALUES, "deadline_hours": JSON_VALUES}), max_size=3), JSON_VALUES),
    "budget_usd": JSON_VALUES, "usage": JSON_VALUES, "constraints": JSON_VALUES, "objective": JSON_VALUES,
    "top": JSON_VALUES, "acquisitions": JSON_VALUES,
})


@examples(120)
@given(scenario=SCENARIO_PARTS)
def test_a_scenario_is_a_request_or_a_one_line_error(tmp_path_factory: pytest.TempPathFactory,
                                                     scenario: dict[str, Any]) -> None:
    path = tmp_path_factory.mktemp("scenario") / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    with time_limit(5):
        try:
            load_scenario(path)
        except GpuwiseError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 2000


@pytest.mark.parametrize("text", [
    # a billion laughs: nine aliases of nine aliases ... expand to 10^9 values in whatever reads them
    "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
    "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
    "g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nworkloads: [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n",
    "[" * 10_000 + "]" * 10_000,
    "workloads: [{model: qwen2-7b, tokens: " + "9" * 5000 + "}]",
    "workloads:\n" + "".join(f"  - {{model: qwen2-7b, tokens: {i + 1}}}\n" for i in range(1000)),  # 1,000 ran 30 s
], ids=["billion-laughs", "nested", "5000-digits", "1000-workloads"])
def test_hostile_scenarios_are_refused_quickly(tmp_path: Path, text: str) -> None:
    path = tmp_path / "scenario.yaml"
    path.write_text(text)
    check_cli(["recommend", "--scenario", str(path)], seconds=5, in_hypothesis=False)


def test_a_scenario_that_is_not_a_file_is_refused(tmp_path: Path) -> None:
    check_cli(["recommend", "--scenario", "/dev/zero"], seconds=5, in_hypothesis=False)  # read until MemoryError
    check_cli(["recommend", "--scenario", str(tmp_path)], seconds=5, in_hypothesis=False)


# ---- catalog override files ------------------------------------------------------------------------------
GPU_FIELDS = ["memory_gb", "memory_bandwidth_gb_s", "bf16_dense_tflops", "tdp_w", "price", "software", "pcie_lanes",
              "launch_year", "aliases", "name", "sources", "form_factor", "scale_up_link", "fp32_tflops"]


@examples(80)
@given(patch=st.dictionaries(st.sampled_from(GPU_FIELDS), JSON_VALUES, min_size=1, max_size=3))
def test_a_catalog_patch_is_a_catalog_or_a_one_line_error(tmp_path_factory: pytest.TempPathFactory,
                                                          patch: dict[str, Any]) -> None:
    path = tmp_path_factory.mktemp("catalog") / "patch.yaml"
    path.write_text(yaml.safe_dump({"gpus": [{"id": "rtx-4090", **patch}]}))
    with time_limit(5):
        try:
            catalog = load_catalog([path], use_user_dir=False)
        except GpuwiseError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 2000
            return
    card = catalog.gpus["rtx-4090"]
    assert math.isfinite(card.memory_bytes) and card.memory_bytes > 0


def test_every_job_flag_is_validated_by_the_model_not_the_shell() -> None:
    # the fuzzing above goes through the CLI; the same values through the API meet the same model
    with pytest.raises(GpuwiseError, match="--batch"):
        make_job("train", batch=10**30)
    with pytest.raises(GpuwiseError, match=r"--seq: Input should be a (finite number|valid)"):
        make_job("train", seq=float("nan"))


FLEET_KEYS = ["results", "checks", "inventory", "gemm_tflops", "memory_gb_s", "status", "reasons", "clock_ratio",
              "metric", "value", "reference", "id", "gpu", "catalog_id", "host", "taken_at"]
FLEET_DOC = st.dictionaries(st.sampled_from(FLEET_KEYS), st.one_of(JSON_VALUES, st.lists(
    st.dictionaries(st.sampled_from(FLEET_KEYS), JSON_VALUES, max_size=5), max_size=4)), max_size=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docs=st.lists(st.tuples(FLEET_DOC, FLEET_DOC, FLEET_DOC), min_size=1, max_size=3))
def test_fleet_report_answers_or_refuses_in_one_line(tmp_path_factory: pytest.TempPathFactory,
                                                      docs: list[tuple[dict[str, Any], dict[str, Any],
                                                                       dict[str, Any]]]) -> None:
    """Node files of any shape (wrong types, missing keys, huge or negative numbers) give a report or a one-line
    error, never a traceback."""
    root = tmp_path_factory.mktemp("fleet")
    for i, (doctor, bench, burn) in enumerate(docs):
        node = root / f"n{i}"
        node.mkdir()
        for name, doc in (("doctor.json", doctor), ("bench.json", bench), ("burnin.json", burn)):
            (node / name).write_text(json.dumps(doc))
    done = runner.invoke(app, ["fleet", "report", str(root), "--json"])
    assert done.exit_code in (0, 1, 2), done.output
    if done.exit_code == 2:
        assert "error" in json.loads(done.stdout)
    else:
        assert "nodes" in json.loads(done.stdout)


# ---- what the kept campaign of issue 37 found (975 CLI inputs, 4 wrong exit codes) -------------------------------
LOG_TEXT = st.one_of(st.text(max_size=300), st.sampled_from(["." * 5000, ".\n" * 2000, "\x1b[31m[/]\u202e", "[[gpu]]"]))


@examples(40)
@given(log=LOG_TEXT, as_json=st.booleans())
def test_diagnose_answers_any_log_or_refuses_in_one_line(tmp_path_factory: pytest.TempPathFactory, log: str,
                                                        as_json: bool) -> None:
    # not check_cli: the answer may say "Traceback" (the checklist names it, a log's lines quote it)
    path = tmp_path_factory.mktemp("log") / "run.log"
    path.write_text(log, encoding="utf-8")
    with time_limit(20):
        done = runner.invoke(app, ["diagnose", str(path), *(["--json"] if as_json else [])])
    assert done.exit_code == 0 and done.exception is None and done.stderr == "", (log, done.output)
    if as_json:
        assert isinstance(json.loads(done.stdout)["matches"], list)
    assert "\x1b" not in done.stdout and "\u202e" not in done.stdout


@pytest.mark.parametrize("log", ["." * 10_000, ".\n" * 500, "...", ""], ids=["a-line", "lines", "three", "empty"])
def test_a_log_of_dots_is_diagnosed_as_nothing_known(tmp_path: Path, log: str) -> None:
    # a readable log in which nothing is recognised is an answer (exit 0): the checklist of what to collect
    path = tmp_path / "dots.log"
    path.write_text(log)
    shown = runner.invoke(app, ["diagnose", str(path)])
    assert shown.exit_code == 0 and "no known signature in this log" in shown.stdout, shown.output
    answered = runner.invoke(app, ["diagnose", str(path), "--json"])
    document = json.loads(answered.stdout)
    assert answered.exit_code == 0 and document["matches"] == [] and document["checklist"]


@pytest.mark.parametrize("args", [["bench", "--gpu", "nosuch"], ["bench", "--gpu", "nosuch", "--save", "x.json"],
                                  ["bench", "--gpu", "nosuch", "--save", "x.json", "--json"],
                                  ["validate", "llama-3.2-1b", "--gpu", "nosuch", "--save", "x.json"]],
                         ids=" ".join)
def test_an_unknown_gpu_is_bad_input_before_the_device_is_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 args: list[str]) -> None:
    # it was exit 3 (no CUDA device) on a machine without a GPU: the name is wrong whatever the machine
    monkeypatch.chdir(tmp_path)
    check_cli(args, in_hypothesis=False)
    done = runner.invoke(app, args)
    assert done.exit_code == 2 and "unknown GPU 'nosuch'" in done.stderr, done.output
    assert list(tmp_path.iterdir()) == []
