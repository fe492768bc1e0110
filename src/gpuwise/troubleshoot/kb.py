"""The troubleshooting knowledge base: error signatures -> cause, how to confirm, fix, sources.

Entries live in ``data/kb-*.yaml`` and are validated by :class:`Entry` at load. Each carries real error texts as
``samples``; the test suite checks that every sample is recognised as its own entry.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

import yaml
from pydantic import BaseModel, ConfigDict, Field, HttpUrl, ValidationError, field_validator

from gpuwise.errors import CatalogError


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    url: HttpUrl
    title: str


class Fact(BaseModel):
    """A doctor check that confirms (or rules out) an entry: ``{check: temperature, status: FAIL}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    check: str
    status: str = "FAIL"


class Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
    title: str
    patterns: tuple[str, ...] = Field(min_length=1)
    weight: float = Field(default=1.0, gt=0, le=3)
    cause: str
    confirm: tuple[str, ...] = Field(min_length=1)
    fix: tuple[str, ...] = Field(min_length=1)
    sources: tuple[Source, ...] = Field(min_length=1)
    folklore: str | None = None
    samples: tuple[str, ...] = Field(min_length=1)
    confirmed_by: tuple[Fact, ...] = ()
    ruled_out_by: tuple[Fact, ...] = ()

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            try:
                re.compile(pattern, re.IGNORECASE)
            except re.error as exc:
                raise ValueError(f"pattern {pattern!r} does not compile: {exc}") from None
        return patterns


@functools.lru_cache(maxsize=1)
def entries() -> tuple[Entry, ...]:
    """Every entry of every shipped knowledge-base file, ids unique."""
    folder = resources.files("gpuwise.troubleshoot") / "data"
    loaded: list[Entry] = []
    for path in sorted(folder.iterdir(), key=lambda p: p.name):
        if not path.name.endswith(".yaml"):
            continue
        for raw in yaml.safe_load(path.read_text("utf-8")) or []:
            try:
                loaded.append(Entry.model_validate(raw))
            except ValidationError as exc:
                err = exc.errors()[0]
                raise CatalogError(f"{path.name}: entry {raw.get('id')!r}: field "
                                   f"{'.'.join(str(p) for p in err['loc'])!r}: {err['msg']}") from None
    ids = [e.id for e in loaded]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise CatalogError(f"knowledge base: duplicate entry id {duplicates[0]!r}")
    return tuple(loaded)
