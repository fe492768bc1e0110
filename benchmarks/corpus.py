"""The public measurement corpus: every published speed figure gpuwise is scored and fitted on, in one shape.

Each case is a gpuwise command (`estimate ...`, `serve-sim ...`), the JSON key its answer is read at, the figure the
source measured, and the source itself (who published it, where, at which commit, as of when). The corpus is:

  benchmarks/data/corpus/*.yaml          new runs in the corpus schema (below), one publication per file
  benchmarks/data/public-measurements.yaml        published training and batch-1 inference runs (perf.* keys)
  benchmarks/data/public-vision-measurements.yaml encoder inference (timm, ...)
  benchmarks/data/public-image-measurements.yaml  diffusion pipelines (seconds per call)

A corpus file:

  source:                       # the publication; a case may override any field with its own `source:`
    id: llm-foundry             # the publisher, the unit of leave-one-source-out
    url: https://github.com/mosaicml/llm-foundry/blob/<commit>/scripts/train/benchmarking/README.md
    commit: <40 hex or null>    # where the source is a repository
    as_of: 2024-05-01           # the date the figures were published or measured
  cases:
    - id: llmfoundry-mpt-7b-h100x8-seq2048       # unique in the corpus
      group: train              # train | infer | serving_ttft | serving_tpot | image | vision | gemm
      stack: {name: llm-foundry, version: "0.8.0"}
      settings: {...}           # the run's exact settings as the source states them
      command: [estimate, mpt-7b, --gpu, h100-sxm-80gb, --count, "8", --task, train, ...]   # without --json
      key: perf.train.mfu       # where the answer's JSON holds the comparable figure
      measured: 0.4162
      unit: fraction
      quote: "| 7b | 2048 | 8 | h100_80gb | ... |"   # the row as published
      why_approx: "..."         # optional: what the source leaves unstated and what was assumed

Run: python benchmarks/corpus.py [--check FILE] [--group G]   (prints each case's measured and predicted figure)
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).parent))
import micro

HERE = Path(__file__).parent
DATA = HERE / "data"
CORPUS = DATA / "corpus"
GROUPS = ("train", "infer", "serving_ttft", "serving_tpot", "image", "vision", "gemm", "attention", "allreduce",
          "copy")
TIME_KEY = re.compile(r"(_ms|_s|seconds_per_call)(\.mean)?$")


@dataclass(frozen=True)
class Case:
    id: str
    group: str
    source: str  # publisher: the unit left out in leave-one-source-out
    command: tuple[str, ...]
    key: str
    measured: float
    origin: str  # the file the case is stored in
    detail: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def fold(self) -> str:
        """The unit left out together: the publisher, or (where its file says ``folds: model``) one model of it."""
        source = self.detail.get("source")
        if isinstance(source, dict) and source.get("folds") == "model":
            return f"{self.source}:{self.command[1]}"
        return self.source

    @property
    def is_time(self) -> bool:
        return bool(TIME_KEY.search(self.key)) and not self.key.endswith(("per_s", "gb_s"))


class CorpusError(ValueError):
    """A corpus file that is not in the schema: its message names the file, the case and what is wrong."""


# one name per publisher, whichever way a file spells it: leave-one-source-out leaves all of a publisher out together
ALIASES = {
    "mosaicml/llm-foundry": "llm-foundry", "dao-ailab/flash-attention": "flash-attention",
    "nvidia/deeplearningexamples": "deeplearningexamples", "pytorch/torchtitan": "torchtitan",
    "pytorch/torchtune": "torchtune", "nvidia/megatron-lm": "megatron-lm", "co/stabilityai": "stabilityai",
    "huggingface.co/stabilityai": "stabilityai", "ggml-org/llama.cpp": "llama.cpp", "ggerganov/llama.cpp": "llama.cpp",
    "nvidia/tensorrt-llm": "tensorrt-llm", "internlm/lmdeploy": "lmdeploy", "casper-hansen/autoawq": "autoawq",
    "com/garden": "glennklockwood",
}


def canonical(publisher: str) -> str:
    return ALIASES.get(publisher.lower(), publisher.lower())


def _publisher(text: str) -> str:
    """The publisher named by a source string: a GitHub owner/repo where one is named, else its first word."""
    match = re.search(r"github(?:\.com)?[/ ]+([\w.-]+/[\w.-]+)", text)
    if match:
        return canonical(match.group(1))
    match = re.search(r"\b([\w-]+/[\w.-]+)\b", text)
    return canonical(match.group(1) if match else text.split()[0])


ROOT = HERE.parent


def _repo_path(arg: str) -> str:
    """A command's file argument written relative to the repository (benchmarks/data/configs/x.json), made absolute
    so the corpus scores the same from any working directory."""
    return str(ROOT / arg) if arg.endswith(".json") and not Path(arg).is_absolute() and (ROOT / arg).is_file() else arg


def _case(path: Path, raw: object, file_source: dict[str, Any]) -> Case:
    """One case of a corpus file, checked: a mapping with the needed fields of the right types."""
    if not isinstance(raw, dict):
        raise CorpusError(f"{path.name}: each case is a mapping, not {type(raw).__name__}")
    name = raw.get("id", "?")
    for needed in ("id", "group", "command", "key", "measured"):
        if needed not in raw:
            raise CorpusError(f"{path.name}: case {name} has no `{needed}`")
    if raw["group"] not in GROUPS:
        raise CorpusError(f"{path.name}: case {name} group {raw['group']!r} is not one of {', '.join(GROUPS)}")
    command = raw["command"]
    if not isinstance(command, list) or not command or not all(isinstance(a, str | int | float) for a in command):
        raise CorpusError(f"{path.name}: case {name} command is a non-empty list of words, e.g. [estimate, gpt2]")
    measured = raw["measured"]
    if isinstance(measured, bool) or not isinstance(measured, int | float) or not measured > 0:
        raise CorpusError(f"{path.name}: case {name} measured is a positive number, not {measured!r}")
    own = raw.get("source") or {}
    if not isinstance(own, dict):
        raise CorpusError(f"{path.name}: case {name} source is a mapping (id, url, commit, as_of)")
    source = {**file_source, **own}
    if not source.get("id") or not (source.get("url") or source.get("repo")) or not source.get("as_of"):
        raise CorpusError(f"{path.name}: case {name} needs a source with id, url (or repo) and as_of")
    words = tuple(_repo_path(str(a)) for a in command)
    return Case(str(raw["id"]), raw["group"], canonical(str(source["id"])), words, str(raw["key"]), float(measured),
                path.name, {**raw, "source": source})


def _corpus_file(path: Path) -> list[Case]:
    try:
        document = yaml.safe_load(path.read_text("utf-8"))
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{path.name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise CorpusError(f"{path.name}: not valid YAML{where} ({getattr(exc, 'problem', None) or 'syntax'})") from exc
    if not isinstance(document, dict) or not isinstance(document.get("cases"), list):
        raise CorpusError(f"{path.name}: a corpus file is a mapping with `source` and a list of `cases`")
    file_source = document.get("source") or {}
    if not isinstance(file_source, dict):
        raise CorpusError(f"{path.name}: `source` is a mapping (id, url, commit, as_of)")
    return [_case(path, raw, file_source) for raw in document["cases"]]


def _group_of_perf_key(key: str) -> str | None:
    if key.startswith("perf.train."):
        return "train"
    if key.startswith("perf.infer.samples_per_s"):
        return "vision"
    return "infer" if key.startswith("perf.infer.") else None


def _legacy_public() -> list[Case]:
    """benchmarks/data/public-measurements.yaml: its perf cases (memory cases belong to benchmarks/accuracy.py)."""
    path = DATA / "public-measurements.yaml"
    cases = []
    for raw in yaml.safe_load(path.read_text("utf-8"))["estimate_cases"]:
        group = _group_of_perf_key(raw["key"])
        if group is None:
            continue
        args = [str(a) for a in raw["args"]]
        if args[0].endswith(".json"):
            args[0] = str(path.parent / args[0])
        args = [a for a in args if a != "--json"]
        cases.append(Case(raw["id"], group, _publisher(raw["source"]), ("estimate", *args), raw["key"],
                          float(raw["expected"]), path.name, raw))
    return cases


def _legacy_copies() -> list[Case]:
    """The device-memory copy measurements among public-measurements.yaml's microbenchmarks (the bandwidth fraction's
    prior was read from them, so they score it in sample only)."""
    path = DATA / "public-measurements.yaml"
    cases = []
    for raw in yaml.safe_load(path.read_text("utf-8"))["microbenchmarks"]:
        if raw["metric"] == "mem_bw_gbs":
            cases.append(Case(raw["id"], "copy", _publisher(raw["source"]), ("copy", raw["gpu"]), "gb_s",
                              float(raw["expected"]), path.name, raw))
    return cases


def _legacy_listed(name: str, group: str, key: str) -> list[Case]:
    path = DATA / name
    cases = []
    for raw in yaml.safe_load(path.read_text("utf-8"))["cases"]:
        args = [str(a) for a in raw["args"] if a != "--json"]
        cases.append(Case(raw["id"], group, _publisher(raw["source"]), ("estimate", *args), key,
                          float(raw["expected"]), path.name, raw))
    return cases


def load(groups: Iterable[str] = GROUPS, files: Sequence[Path] | None = None) -> list[Case]:
    """Every case of the corpus in ``groups`` (or only those of ``files``); ids are unique."""
    wanted = set(groups)
    if files is not None:
        cases = [c for f in files for c in _corpus_file(f)]
    else:
        cases = _legacy_public() + _legacy_copies()
        cases += _legacy_listed("public-vision-measurements.yaml", "vision", "perf.infer.samples_per_s")
        cases += _legacy_listed("public-image-measurements.yaml", "image", "perf.seconds_per_call")
        cases += [c for f in sorted(CORPUS.glob("*.yaml")) for c in _corpus_file(f)]
    seen = Counter(c.id for c in cases)
    twice = [i for i, n in seen.items() if n > 1]
    if twice:
        raise CorpusError(f"case ids appear more than once: {', '.join(twice[:5])}")
    return [c for c in cases if c.group in wanted]


def read_key(document: Any, key: str) -> float | None:
    node = document
    for part in key.split("."):
        if not isinstance(node, dict) or node.get(part) is None:
            return None
        node = node[part]
    return float(node)


def predict(cases: Sequence[Case]) -> dict[str, float | str]:
    """Each case's predicted figure (or the one-line reason gpuwise refused it), one CLI call per distinct command."""
    from typer.testing import CliRunner

    from gpuwise.cli.main import app

    runner = CliRunner()
    answers: dict[tuple[str, ...], Any] = {}
    out: dict[str, float | str] = {}
    for case in cases:
        if case.command not in answers and case.command[0] in micro.KINDS:
            answers[case.command] = micro.answer(case.command)
        elif case.command not in answers:
            done = runner.invoke(app, [*case.command, "--json"])
            text = (done.stdout or "").strip()
            try:
                answers[case.command] = json.loads(text) if done.exit_code == 0 else text.splitlines()[-1][:200]
            except (json.JSONDecodeError, IndexError):
                answers[case.command] = f"exit {done.exit_code}: {(done.stderr or text)[:200]}"
        answer = answers[case.command]
        value = read_key(answer, case.key) if isinstance(answer, dict) else None
        out[case.id] = value if value is not None else (answer if isinstance(answer, str) else f"no {case.key}")
    return out


def error_pct(case: Case, predicted: float) -> float:
    """Signed error of the prediction, in %: + means gpuwise predicted a larger figure than measured."""
    return 100.0 * (predicted - case.measured) / case.measured


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", type=Path, action="append", help="score only this corpus file (repeatable)")
    parser.add_argument("--group", action="append", choices=GROUPS)
    ns = parser.parse_args(argv)
    try:
        cases = load(ns.group or GROUPS, ns.check)
    except (CorpusError, OSError, yaml.YAMLError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    predicted = predict(cases)
    errors = []
    for case in cases:
        value = predicted[case.id]
        if isinstance(value, str):
            print(f"{case.id:60} {case.group:12} measured {case.measured:>12.4g}  REFUSED {value}")
            continue
        errors.append(error_pct(case, value))
        print(f"{case.id:60} {case.group:12} measured {case.measured:>12.4g}  predicted {value:>12.4g}  "
              f"{errors[-1]:+7.1f}%")
    by_source = Counter(c.source for c in cases)
    print(f"\n{len(cases)} cases from {len(by_source)} sources; {len(errors)} answered", end="")
    if errors:
        print(f"; median |error| {statistics.median(abs(e) for e in errors):.1f}%, "
              f"signed median {statistics.median(errors):+.1f}%")
    else:
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
