"""docs/architecture.md names only what exists: every path, module and ``file.py:name`` it mentions.

The document described modules that did not exist (an ``api.py``, ``probe/validate.py``, estimators named memory,
flops, roofline and parallel). These tests read every backticked path-like token, every ``src/...``, ``tests/...``,
``benchmarks/...`` or ``gpuwise/...`` path in its prose, every dotted ``gpuwise.*`` name and every relative link,
and find each in the repository: a path relative to the repository root, to ``src/`` or to ``src/gpuwise/``
(``<id>`` and ``*`` match any name); ``path.py:name`` must also define ``name`` there (a call's arguments aside), and
``gpuwise.module.name`` likewise (or export it by name, as ``gpuwise.api`` does its lazy names). A name the document
says does not exist is struck through (``~~`benchmarks/fit.py`~~``) and not looked for.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
BASES = (ROOT, ROOT / "src", ROOT / "src" / "gpuwise")
SUFFIXES = (".py", ".yaml", ".yml", ".json", ".md", ".toml", ".lock")
PROSE_PATH = re.compile(r"(?<![\w./-])(?:src|tests|benchmarks|docs|deploy|scripts|gpuwise)/[\w.*<>/-]*[\w*>/]")
BACKTICKED = re.compile(r"`([^`]+)`")  # a code span may wrap a line, as Markdown allows
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
DOTTED = re.compile(r"gpuwise(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
STRUCK = re.compile(r"~~.+?~~", re.DOTALL)


def _matches(relative: str) -> bool:
    """Whether ``relative`` (``<id>`` and ``*`` as wildcards) names a file or folder under one of the bases."""
    pattern = re.sub(r"<[^>]+>", "*", relative.rstrip("/"))
    for base in BASES:
        if "*" in pattern:
            if any(base.glob(pattern)):
                return True
        elif (base / pattern).exists():
            return True
    return False


def _defines(path: Path, name: str, *, exported: bool = False) -> bool:
    """Whether the module at ``path`` defines every part of ``name`` (``Class.attribute``: both); ``exported``: or
    imports it, or names it as a string (a package's ``__all__`` and its table of names imported on first use)."""
    text = path.read_text(encoding="utf-8")
    name = name.split("(", 1)[0]
    rule = r"^\s*(?:async\s+def|def|class)\s+{0}\b|^\s*{0}\s*[:=]"
    if exported:
        rule += r"|^\s*from \S+ import .*\b{0}\b|[\"']{0}[\"']"
    return all(re.search(rule.format(re.escape(part)), text, re.MULTILINE) for part in name.split("."))


def _located(relative: str) -> Path | None:
    for base in BASES:
        if (base / relative).is_file():
            return base / relative
    return None


def _module_file(dotted: str) -> tuple[Path | None, list[str]]:
    """The source file of the longest importable prefix of ``dotted`` (without importing), and the rest."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        stem = ROOT / "src" / Path(*parts[:cut])
        for candidate in (stem.with_suffix(".py"), stem / "__init__.py"):
            if candidate.is_file():
                return candidate, parts[cut:]
    return None, parts


def missing(text: str) -> list[str]:
    """Every name in ``text`` that the repository does not hold, once each, in order."""
    found: list[str] = []
    text = STRUCK.sub("", text)
    candidates = [m.group(0) for m in PROSE_PATH.finditer(text)]
    for token in (t.strip() for t in BACKTICKED.findall(text)):
        if " " in token or token.startswith(("-", "../", "http")):
            continue
        if DOTTED.fullmatch(token):
            source, rest = _module_file(token)
            if source is None or (rest and not _defines(source, rest[0], exported=True)):
                found.append(token)
            continue
        if ":" in token and token.split(":", 1)[0].endswith(".py"):
            file, name = token.split(":", 1)
            located = _located(file)
            if located is None or not _defines(located, name):
                found.append(token)
            continue
        if "/" in token or token.endswith(SUFFIXES):
            candidates.append(token)
    for link in LINK.findall(text):
        if not link.startswith(("http:", "https:", "mailto:")) and not (DOC.parent / link).exists():
            found.append(link)
    found += [c for c in candidates if not _matches(c)]
    return list(dict.fromkeys(found))


def test_every_path_and_module_the_architecture_document_names_exists() -> None:
    assert missing(DOC.read_text(encoding="utf-8")) == []


def test_the_document_names_the_plan_and_the_contracts_it_describes() -> None:
    """The sections the document promises are there, and each import-linter contract it quotes is a contract."""
    text = DOC.read_text(encoding="utf-8")
    for heading in ("## Layers", "## The plan", "## Where a new thing goes", "## One request",
                    "## The estimate contract (JSON)"):
        assert heading in text
    contracts = re.findall(r'^name = "(.+)"$', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.MULTILINE)
    quoted = re.findall(r'\*\*"(.+?)"\*\*', text.replace("\n  ", " "))
    assert quoted and all(q in contracts for q in quoted), [q for q in quoted if q not in contracts]


def test_a_made_up_name_is_reported() -> None:
    made_up = ("`gpuwise/api.py` and `src/gpuwise/probe/validate.py`, `estimate/flops.py`, "
               "`gpuwise.estimate.flops`, `estimate/estimate.py:no_such_function`, `catalog/data/gpus/<id>.toml`, "
               "src/gpuwise/probe/calibrate/ "
               "and [a page](no-such-page.md)")
    assert sorted(missing(made_up)) == sorted([
        "gpuwise.estimate.flops", "estimate/estimate.py:no_such_function", "no-such-page.md", "gpuwise/api.py",
        "src/gpuwise/probe/calibrate/", "src/gpuwise/probe/validate.py", "estimate/flops.py",
        "catalog/data/gpus/<id>.toml"])
    assert missing("~~`benchmarks/fit.py`~~ is struck through: the document says it does not exist") == []


def test_real_names_in_each_form_are_found() -> None:
    real = ("`src/gpuwise/estimate/plan/models.py`, `estimate/plan/`, `gpuwise.api.plan`, `gpuwise.estimate.plan`, "
            "`estimate/plan/models.py:TrainPlan.microbatches`, `catalog/data/gpus/<id>.yaml`, "
            "`troubleshoot/data/kb-*.yaml`, tests/test_accuracy.py and [the index](index.md#top)")
    assert missing(real) == []
