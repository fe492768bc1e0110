"""The exceptions gpuwise raises for problems the user can fix, and what each one means to a shell.

    GpuwiseError                 anything the user can act on; exit code 2, HTTP 422 unless overridden
    ├── UnknownGPU               no catalog record matches a name (carries the nearest ids); HTTP 404
    ├── AmbiguousGPU             a loose name matches several records (carries them)
    ├── UnknownModel             no preset, file or hub repo matches a model name (carries the nearest presets); 404
    ├── CatalogError             a catalog or override file is malformed (names the file and field)
    ├── ConfigError              a model config or user option is invalid (names the field and value)
    │   └── InputTooLarge        a file or body is larger or deeper than gpuwise reads; HTTP 413
    ├── NotEstimable             the question has no meaningful answer for these inputs
    ├── ProbeUnavailable         no GPU, no driver or a missing optional dependency; exit code 3, HTTP 503
    └── TimeLimitExceeded        a computation ran past its time limit or its caller left; HTTP 503

Every message is one line that says what is wrong and what would be right. :func:`exit_code_for` and
:func:`http_status_for` are the one map from an error to a process exit status and an HTTP status.
"""

from __future__ import annotations

from collections.abc import Sequence


class GpuwiseError(Exception):
    """Base of every error gpuwise raises on purpose; the message is one line for the user."""

    exit_code: int = 2
    http_status: int = 422


class UnknownGPU(GpuwiseError):
    http_status = 404

    def __init__(self, name: str, *, suggestions: Sequence[str] = ()) -> None:
        self.name = name
        self.suggestions = tuple(suggestions)
        hint = f"; did you mean {', '.join(self.suggestions)}?" if self.suggestions else (
            "; run `gpuwise catalog list` to see the known ids"
        )
        super().__init__(f"unknown GPU {name[:80]!r}{hint}")


class AmbiguousGPU(GpuwiseError):
    def __init__(self, name: str, *, candidates: Sequence[str]) -> None:
        self.name = name
        self.candidates = tuple(candidates)
        super().__init__(
            f"GPU name {name[:80]!r} is ambiguous; it matches {', '.join(self.candidates)}: use one of these ids"
        )


class UnknownModel(GpuwiseError):
    http_status = 404

    def __init__(self, name: str, *, suggestions: Sequence[str] = (), hint: str = "") -> None:
        self.name = name
        self.suggestions = tuple(suggestions)
        if self.suggestions:
            hint = f"; did you mean {', '.join(self.suggestions)}?"
        super().__init__(f"unknown model {name[:120]!r}{hint or '; run `gpuwise models` to see the presets'}")


class CatalogError(GpuwiseError):
    """A data file (shipped or the user's override) does not follow the catalog schema."""


class ConfigError(GpuwiseError):
    """A user option or model config is invalid."""


class InputTooLarge(ConfigError):
    """A file, body or structure is larger or more deeply nested than gpuwise reads."""

    http_status = 413


class NotEstimable(GpuwiseError):
    """The inputs are valid one by one but the combination has no meaningful answer."""


class ProbeUnavailable(GpuwiseError):
    exit_code = 3
    http_status = 503


class TimeLimitExceeded(GpuwiseError):
    """A computation ran past the time limit its caller set, or the caller cancelled it."""

    http_status = 503


def exit_code_for(error: BaseException) -> int:
    """The process exit status a shell uses for an error: 2 bad usage, 3 no GPU/driver, 1 otherwise."""
    return error.exit_code if isinstance(error, GpuwiseError) else 1


def http_status_for(error: BaseException) -> int:
    """The HTTP status a web handler answers an error with: 4xx for the caller's input, 503 for no capacity, else
    500 (a bug: gpuwise raised something it did not mean to)."""
    return error.http_status if isinstance(error, GpuwiseError) else 500
