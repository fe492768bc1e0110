"""The code's shape: what a runtime is and does lives in its profile (gpuwise/runtimes), so no module outside that
package decides anything by a runtime's name.

Every module under src/gpuwise but runtimes/ is parsed, and each place it names a runtime or tool that the runtime
registries hold is counted: a comparison (``==``, ``!=``, ``in``/``not in`` a literal tuple, set or list, a ``case``
pattern), a dict key, a ``.get()`` key. The names come from the registries themselves
(:func:`gpuwise.runtimes.names.registered`), so a runtime added there is covered here without an edit.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import gpuwise
from gpuwise.runtimes.names import registered

SRC = Path(gpuwise.__file__).parent
RUNTIMES = SRC / "runtimes"
def _names_in(node: ast.AST, names: frozenset[str]) -> Iterator[str]:
    """The runtime names a comparand holds: a string constant, or the constants of a literal tuple, set or list."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
        yield node.value
    elif isinstance(node, (ast.Tuple, ast.Set, ast.List)):
        for element in node.elts:
            yield from _names_in(element, names)


def _named(tree: ast.AST, names: frozenset[str]) -> Iterator[tuple[int, str, str]]:
    """(line, what, name) for each place ``tree`` decides by a runtime's name."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for op, left, right in zip(node.ops, sides[:-1], sides[1:], strict=True):
                if isinstance(op, (ast.Eq, ast.NotEq)):
                    for side in (left, right):
                        for name in _names_in(side, names) if isinstance(side, ast.Constant) else ():
                            yield node.lineno, "compared", name
                elif isinstance(op, (ast.In, ast.NotIn)):
                    for name in _names_in(right, names) if not isinstance(right, ast.Constant) else ():
                        yield node.lineno, "compared", name
        elif isinstance(node, ast.MatchValue):
            for name in _names_in(node.value, names):
                yield node.lineno, "a case of", name
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                for name in _names_in(key, names) if isinstance(key, ast.Constant) else ():
                    yield key.lineno, "a dict key", name
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant)):
            for name in _names_in(node.args[0], names):
                yield node.lineno, "a .get() key", name


def offenders(root: Path = SRC) -> list[str]:
    """``path:line: what 'name'`` for each place outside runtimes/ that names a registered runtime or tool."""
    names = registered()
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.is_relative_to(RUNTIMES):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        where = path.relative_to(root).as_posix()
        found += [f"{where}:{line}: {what} {name!r}" for line, what, name in sorted(set(_named(tree, names)))]
    return found


def test_the_registries_name_every_runtime() -> None:
    """The names the hook looks for are the registries' own: engines, image runtimes, frameworks, sharding
    runtimes, launch and fine-tuning tools, benchmark tools."""
    names = registered()
    for name in ("vllm", "sglang", "llamacpp", "hf", "diffusers", "comfyui", "torchtune", "axolotl", "deepspeed",
                 "fsdp2", "megatron", "unsloth", "llama-bench"):
        assert name in names, name


def test_the_hook_finds_a_name_in_each_form() -> None:
    names = frozenset({"vllm", "llama-bench"})
    source = ('a == "vllm"\n"vllm" != b\nc in ("x", "vllm")\nd = {"vllm": 1}\ne.get("llama-bench")\n'
              'match f:\n    case "vllm":\n        pass\ng = "vllm"\nh(engine="vllm")\ni in "vllm bench"\n')
    assert [line for line, _, _ in sorted(_named(ast.parse(source), names))] == [1, 2, 3, 4, 5, 7]


def test_no_runtime_name_is_compared_outside_runtimes() -> None:
    """Each runtime fact is a field of its profile: code elsewhere reads the field, never the name."""
    found = offenders()
    print("\n".join(found))
    assert not found, f"{len(found)} runtime names compared outside gpuwise/runtimes:\n" + "\n".join(found)
