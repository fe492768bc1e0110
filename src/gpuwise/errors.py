"""The exceptions gpuwise raises for problems the user can fix, and what each one means to a shell.

    GpuwiseError                 anything the user can act on; exit code 2, HTTP 400 unless overridden
    ├── UnknownGPU               no catalog record matches a name (carries the nearest ids)
    ├── AmbiguousGPU             a loose name matches several records (carries them)
    ├── UnknownModel             no preset, file or hub repo matches a model name (carries the nearest presets)
    ├── CatalogError             a catalog or override file is malformed (names the file and field)
    ├── ConfigError              a model config or user option is invalid (names the field and value)
    ├── NotEstimable             the question has no meaningful answer for these inputs
    └── ProbeUnavailable         no GPU, no driver or a missing optional dependency; exit code 3

Every message is one line that says what is wrong and what would be right.
"""

from __future__ import annotations

from collections.abc import Sequence


class GpuwiseError(Exception):
    """Base of every error gpuwise raises on purpose; the message is one line for the user."""

    exit_code: int = 2
    http_status: int = 400


class UnknownGPU(GpuwiseError):
    http_status = 404

    def __init__(self, name: str, *, suggestions: Sequence[str] = ()) -> None:
        self.name = name
        self.suggestions = tuple(suggestions)
        hint = f"; did you mean {', '.join(self.suggestions)}?" if self.suggestions else (
            "; run `gpuwise catalog list` to see the known ids"
        )
        super().__init__(f"unknown GPU {name!r}{hint}")


class AmbiguousGPU(GpuwiseError):
    def __init__(self, name: str, *, candidates: Sequence[str]) -> None:
        self.name = name
        self.candidates = tuple(candidates)
        super().__init__(
            f"GPU name {name!r} is ambiguous; it matches {', '.join(self.candidates)}: use one of these ids"
        )


class UnknownModel(GpuwiseError):
    http_status = 404

    def __init__(self, name: str, *, suggestions: Sequence[str] = (), hint: str = "") -> None:
        self.name = name
        self.suggestions = tuple(suggestions)
        if self.suggestions:
            hint = f"; did you mean {', '.join(self.suggestions)}?"
        super().__init__(f"unknown model {name!r}{hint or '; run `gpuwise models` to see the presets'}")


class CatalogError(GpuwiseError):
    """A data file (shipped or the user's override) does not follow the catalog schema."""


class ConfigError(GpuwiseError):
    """A user option or model config is invalid."""


class NotEstimable(GpuwiseError):
    """The inputs are valid one by one but the combination has no meaningful answer."""


class ProbeUnavailable(GpuwiseError):
    exit_code = 3
    http_status = 503


def exit_code_for(error: BaseException) -> int:
    """The process exit status a shell uses for an error: 2 bad usage, 3 no GPU/driver, 1 otherwise."""
    return error.exit_code if isinstance(error, GpuwiseError) else 1
