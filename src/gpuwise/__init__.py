"""gpuwise: which GPU to buy or rent for your AI work, what it will do, and proof on the real card.

The public names are those of :mod:`gpuwise.api` (``gpuwise.__all__ == gpuwise.api.__all__``), each imported on
first use, so ``import gpuwise`` costs almost nothing.
"""

from __future__ import annotations

import sys
import types
from typing import TYPE_CHECKING, Any

from gpuwise import api
from gpuwise.api import __all__ as __all__  # the one list of public names

if TYPE_CHECKING:
    from gpuwise.api import *  # noqa: F403


def __getattr__(name: str) -> Any:
    """A public name of gpuwise.api on first use, and ``__version__`` from the installed metadata."""
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("gpuwise")
        except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
            return "0.0.0+unknown"
    if name in api.__all__:
        return getattr(api, name)
    raise AttributeError(f"module 'gpuwise' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(types.ModuleType):
    """gpuwise's module type: ``estimate`` and ``recommend`` name both an API function and a subpackage. The
    function wins, as it did when the package imported them eagerly: the import system's binding of the subpackage
    on first load is ignored (the subpackage stays in ``sys.modules`` for ``from gpuwise.estimate... import``)."""

    estimate = property(lambda self: api.estimate, lambda self, subpackage: None)
    recommend = property(lambda self: api.recommend, lambda self, subpackage: None)


sys.modules[__name__].__class__ = _Package
