"""Find a catalog record from what a person types: an id, an alias, or a loose name.

Resolution, in order:
1. exact match of the *compact key* (lower case, vendor words and punctuation removed:
   ``"GeForce RTX 4090"``, ``"rtx4090"`` and ``"rtx-4090"`` all become ``rtx4090``);
2. *token containment*: the name's tokens (letters and digits split apart: ``a100 80g`` ->
   ``a 100 80 gb``) all occur in one record's names. A record that adds a variant token the name
   lacks (``ti``, ``super``, ``xtx`` ...) is a different product and only suggested, so ``3090``
   finds the RTX 3090, not the 3090 Ti. Several records left means the name is ambiguous;
3. otherwise the name is unknown and the nearest ids are suggested.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpuwise.errors import AmbiguousGPU, UnknownGPU

_STOP_WORDS = frozenset({"nvidia", "geforce", "amd", "intel", "tesla", "instinct", "gpu", "graphics", "card"})
_VARIANT_TOKENS = frozenset({"ti", "super", "x", "xt", "xtx", "d", "max", "ultra"})


def _words(name: str) -> list[str]:
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w and w not in _STOP_WORDS]
    merged: list[str] = []
    for word in words:  # "80 gb" -> "80gb", "80g" -> "80gb"
        if word in ("gb", "g") and merged and merged[-1].isdigit():
            merged[-1] += "gb"
        else:
            merged.append(re.sub(r"^(\d+)g$", r"\1gb", word))
    return merged


def compact_key(name: str) -> str:
    """``"NVIDIA GeForce RTX 4090"`` -> ``"rtx4090"``; ``"A100 80G"`` -> ``"a10080gb"``."""
    return "".join(_words(name))


def tokens(name: str) -> frozenset[str]:
    """Letters and digits split apart: ``"rtx4090"`` -> {rtx, 4090}; ``"a100-80gb"`` -> {a, 100, 80, gb}."""
    return frozenset(t for w in _words(name) for t in re.findall(r"[a-z]+|\d+", w))


@dataclass(frozen=True)
class NameIndex:
    """Lookup tables over ``{id: names}``; build once per catalog with :meth:`build`."""

    by_key: Mapping[str, frozenset[str]]
    token_sets: Mapping[str, tuple[frozenset[str], ...]]

    @classmethod
    def build(cls, names_by_id: Mapping[str, Iterable[str]]) -> NameIndex:
        by_key: dict[str, set[str]] = {}
        token_sets: dict[str, tuple[frozenset[str], ...]] = {}
        for record_id, names in names_by_id.items():
            names = tuple(names)
            for name in names:
                by_key.setdefault(compact_key(name), set()).add(record_id)
            token_sets[record_id] = tuple(tokens(name) for name in names)
        return cls({k: frozenset(v) for k, v in by_key.items()}, token_sets)

    def resolve(self, name: str) -> str:
        """The one id ``name`` designates; raises AmbiguousGPU or UnknownGPU (with suggestions)."""
        key = compact_key(name)
        exact = self.by_key.get(key, frozenset())
        if len(exact) == 1:
            return next(iter(exact))
        if len(exact) > 1:
            raise AmbiguousGPU(name, candidates=sorted(exact))
        wanted = tokens(name)
        if not wanted:
            raise UnknownGPU(name, suggestions=())
        matches, variants = self._containing(wanted)
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise AmbiguousGPU(name, candidates=matches)
        raise UnknownGPU(name, suggestions=variants or self.nearest(key))

    def _containing(self, wanted: frozenset[str]) -> tuple[list[str], list[str]]:
        """Ids whose names contain every wanted token, split into plain matches and variants."""
        matches: list[str] = []
        variants: list[str] = []
        for record_id, sets in self.token_sets.items():
            hits = [s for s in sets if wanted <= s]
            if not hits:
                continue
            if any(not ((s - wanted) & _VARIANT_TOKENS) for s in hits):
                matches.append(record_id)
            else:
                variants.append(record_id)
        return sorted(matches), sorted(variants)

    def nearest(self, key: str, limit: int = 3) -> list[str]:
        """Ids whose compact names are closest to ``key`` (difflib ratio), best first."""
        close = difflib.get_close_matches(key, list(self.by_key), n=limit * 3, cutoff=0.5)
        ids: list[str] = []
        for k in close:
            for record_id in sorted(self.by_key[k]):
                if record_id not in ids:
                    ids.append(record_id)
        return ids[:limit]
