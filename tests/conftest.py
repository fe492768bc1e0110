"""Shared fixtures: every test sees only the shipped catalog unless it adds files itself."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from gpuwise.catalog import Catalog, load_catalog


@pytest.fixture(autouse=True)
def _isolated_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point the user config folder at an empty temporary folder so a developer's own files never leak in."""
    folder = tmp_path_factory.mktemp("config")
    monkeypatch.setenv("GPUWISE_CONFIG_DIR", str(folder))
    yield folder


@pytest.fixture(scope="session")
def shipped() -> Catalog:
    return load_catalog(use_user_dir=False)


def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked `gpu` run only where torch sees a CUDA device (scripts/gpu-check runs them on one)."""
    if any("gpu" in item.keywords for item in items) and not _has_cuda():
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU visible to torch")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


BENCHMARKS = Path(__file__).parents[1] / "benchmarks"


def load_benchmark(name: str) -> ModuleType:
    """A script of benchmarks/ (not a package) imported by path, as ``gpuwise_<name>``."""
    spec = importlib.util.spec_from_file_location(f"gpuwise_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[f"gpuwise_{name}"] = module
    spec.loader.exec_module(module)
    return module
