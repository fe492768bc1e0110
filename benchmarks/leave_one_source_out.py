"""Leave-one-source-out memory error: each source's published runs scored by a model that chose nothing on them.

The memory model fits no parameter to the published runs: every constant in estimate/constants.py and every framework
default comes from a library's code, a datasheet or a document, each named in its source string. So leaving a source
out changes nothing -- unless a constant was read from that very source. This script checks that for each source
(a constant whose ``source`` names the source's document), recomputes that source's cases with the constant taken
from an independent measurement instead, and prints in-sample and left-out errors side by side.

Run: python benchmarks/leave_one_source_out.py [--markdown]
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import accuracy
from typer.testing import CliRunner

from gpuwise.estimate import constants as C

# source group -> (words that name its documents, the constant read from them, an independent value for it)
SHARED_CONSTANTS = {
    "hfdoc": (("Model training anatomy", "Hugging Face docs"), "CUDA_CONTEXT", C.VLLM_NON_TORCH.value),
}


def source_of(case_id: str) -> str:
    """A-torchtune-l31-70b-... -> torchtune (the publisher that ran the case)."""
    parts = case_id.split("-")
    return "unsloth-hf" if parts[1:3] == ["unsloth", "hf"] else parts[1]


def _score(cases: list[dict[str, Any]]) -> list[float]:
    runner = CliRunner()
    return [abs(r["error_pct"]) for r in (accuracy.run_case(runner, c) for c in cases) if "error_pct" in r]


def left_out(group: str, cases: list[dict[str, Any]]) -> list[float]:
    """The group's errors with any constant read from its own documents replaced by an independent value."""
    shared = SHARED_CONSTANTS.get(group)
    if shared is None:
        return _score(cases)
    words, name, independent = shared
    constant = getattr(C, name)
    if not any(w in constant.source for w in words):
        return _score(cases)
    replaced = C.Constant(independent, constant.unit, "independent value for leave-one-source-out")
    setattr(C, name, replaced)
    try:
        return _score(cases)
    finally:
        setattr(C, name, constant)


def main() -> None:
    markdown = "--markdown" in sys.argv
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for case in accuracy.load_cases("memory"):
        groups[source_of(case["id"])].append(case)
    inside, outside = [], []
    if markdown:
        print("| source | cases | in-sample median abs error | left out |\n|---|---:|---:|---:|")
    for group, cases in sorted(groups.items()):
        fitted, held = _score(cases), left_out(group, cases)
        inside += fitted
        outside += held
        cells = (group, str(len(cases)), f"{statistics.median(fitted):.1f} %", f"{statistics.median(held):.1f} %")
        print("| " + " | ".join(cells) + " |" if markdown else "  ".join(f"{c:>12}" for c in cells))
    print(f"\nall {len(inside)} cases: in-sample median {statistics.median(inside):.1f} %, "
          f"leave-one-source-out median {statistics.median(outside):.1f} %")


if __name__ == "__main__":
    main()
