"""One function decides what kind of workload a request is; the CLI, the web app and recommend all call it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gpuwise.workload.kind import workload_kind

SRC = Path(__file__).parents[1] / "src" / "gpuwise"


@pytest.mark.parametrize(("task", "model", "kind"), [
    ("hpc", None, "hpc"), ("hpc", "llama-3.1-8b", "hpc"),  # --task hpc names an application, never a model
    (None, "sdxl", "image"), ("infer", "black-forest-labs/FLUX.1-dev", "image"),  # the pipelines' ids and hub ids
    ("train", "llama-3.1-8b", "model"), (None, "resnet-50", "model"), ("infer", None, "model"),  # an upload
])
def test_each_request_has_one_kind(task: str | None, model: str | None, kind: str) -> None:
    assert workload_kind(task, model) == kind


@pytest.mark.parametrize("module", ["cli/jobs.py", "cli/recommend.py", "web/app.py", "recommend/request.py",
                                    "recommend/rank.py"])
def test_the_shells_and_recommend_ask_the_one_function(module: str) -> None:
    """None of them looks a pipeline up itself to decide the kind."""
    tree = ast.parse((SRC / module).read_text())
    calls = {n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
             for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert "workload_kind" in calls
    assert "pipeline" not in calls  # api.pipeline(name) is not None was the old test of the kind
