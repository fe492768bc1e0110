"""Where a GGUF model's headers come from: a local file, an http(s) URL, or a Hugging Face repo and quant tag
(``hf.co/<owner>/<repo>[:QUANT]``, what llama.cpp's ``-hf <owner>/<repo>[:quant]`` takes), every part of a split
model included. Only headers are read (HTTP range requests, bounded: workload/weights_gguf.py); the network is
reached only for a URL or a repo the user named.

The repo's file is chosen as llama.cpp chooses it: the quant tag is optional and case-insensitive, Q4_K_M when none
is given, else the first GGUF in the repo (``-hf`` help, ggml-org/llama.cpp@ec026579 common/arg.cpp). llama.cpp
asks the hub which file a tag means (``common_get_hf_file``, common/download.cpp: ``/v2/<repo>/manifests/<tag>``; and
at 03eb25f3 common/hf-cache.cpp lists the repo's files at its commit); gpuwise lists the repo's files and its commit
through the hub's model API (``/api/models/<repo>``: ``siblings`` and ``sha``), picks the .gguf files whose path holds
the tag (not an mmproj projector), and reads them at that commit. The endpoint is ``HF_ENDPOINT`` when set, and the
token ``HF_TOKEN``, as huggingface_hub reads them; the token goes to the endpoint's host only.
"""

from __future__ import annotations

import functools
import os
import re
import time
import urllib.parse
from pathlib import Path
from typing import Any

from gpuwise.errors import ConfigError
from gpuwise.safe_io import excerpt, parse_json, read_url_range
from gpuwise.workload.weights_gguf import GgufHeader, read_gguf_header
from gpuwise.workload.weights_source import HTTP_DEADLINE_S, Source

HF_PREFIX = "hf.co/"
DEFAULT_ENDPOINT = "https://huggingface.co"  # huggingface_hub constants.ENDPOINT without HF_ENDPOINT
DEFAULT_TAG = "Q4_K_M"  # llama.cpp's -hf default
MAX_LISTING_BYTES = 8_000_000  # the model API's answer for one repo (a GGUF repo with hundreds of files: ~100 kB)
MAX_PARTS = 256  # split parts of one model: gguf-split numbers them with 5 digits; no published model has 256
_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)  # llama_split_path: %s-%05d-of-%05d.gguf
_REPO = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}")


def is_gguf_name(name: str) -> bool:
    """Whether ``name`` designates a GGUF model this module reads: hf.co/<repo>, an http(s) URL, a .gguf path."""
    return name.startswith((HF_PREFIX, "http://", "https://")) or name.lower().endswith(".gguf")


def names_hub_gguf(name: str) -> bool:
    """``hf.co/<owner>/<repo>[:QUANT]`` with a well-formed repo id: a GGUF read from the hub, not a path."""
    repo = name[len(HF_PREFIX):].partition(":")[0] if name.startswith(HF_PREFIX) else ""
    return bool(_REPO.fullmatch(repo)) and not set(repo.split("/")) & {".", ".."}


def _split_parts(where: str, header: GgufHeader, what: str) -> list[str]:
    """Every part's path or URL when ``where`` is one part of a split model (``split.count`` > 1), in order."""
    count = header.values.get("split.count")
    if not isinstance(count, int) or count <= 1:
        return [where]
    base, _, query = where.partition("?")
    match = _SPLIT.search(base)
    if match is None or int(match[2]) != count or count > MAX_PARTS:
        raise ConfigError(f"{what}: part of a model split in {count} files, but its name does not end "
                          "-NNNNN-of-NNNNN.gguf as llama.cpp names the parts; give the first part by that name")
    stem = base[:match.start()]
    return [f"{stem}-{index:05d}-of-{count:05d}.gguf" + (f"?{query}" if query else "") for index in range(1, count + 1)]


def _headers(where: str, *, what: str, token: dict[str, str], deadline: float) -> list[GgufHeader]:
    first = read_gguf_header(Source(where, what=what, headers=token, deadline_s=deadline - time.monotonic()))
    parts = _split_parts(where, first, what)
    headers = [first if part == where else read_gguf_header(Source(part, what=what, headers=token,
                                                                   deadline_s=deadline - time.monotonic()))
               for part in parts]
    numbers = [h.values.get("split.no", 0) for h in headers]
    if len(parts) > 1 and numbers != list(range(len(parts))):
        raise ConfigError(f"{what}: the split parts number themselves {numbers[:8]}, not 0 to {len(parts) - 1}")
    if "general.architecture" not in headers[0].values:
        raise ConfigError(f"{what}: the first part's GGUF metadata has no general.architecture; give a llama.cpp "
                          "model file")
    return headers


def endpoint() -> str:
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def _token() -> dict[str, str]:
    token = os.environ.get("HF_TOKEN", "").strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


def _listing(repo: str, what: str, deadline: float) -> tuple[list[str], str]:
    """The repo's file paths and its commit (``main`` when the answer names none)."""
    url = f"{endpoint()}/api/models/{repo}"
    reply = read_url_range(url, first=0, size=MAX_LISTING_BYTES, deadline=deadline, what=what, headers=_token())
    if len(reply.data) >= MAX_LISTING_BYTES:
        raise ConfigError(f"{what}: the hub's file list is over {MAX_LISTING_BYTES:,} bytes; give the file's URL")
    data: Any = parse_json(reply.data.decode("utf-8", errors="replace"), origin=f"{what}: the hub's model API answer")
    siblings = data.get("siblings") if isinstance(data, dict) else None
    if not isinstance(siblings, list):
        raise ConfigError(f"{what}: the hub's answer lists no files (no 'siblings'); is it a model repo?")
    files = [s["rfilename"] for s in siblings if isinstance(s, dict) and isinstance(s.get("rfilename"), str)]
    sha = data.get("sha")
    return files, sha if isinstance(sha, str) and re.fullmatch(r"[0-9a-f]{40}", sha) else "main"


def _model_of(path: str) -> str:
    """One model's name: a split part's path without its -NNNNN-of-NNNNN."""
    match = _SPLIT.search(path)
    return path[:match.start()] + ".gguf" if match else path


def choose_file(files: list[str], tag: str | None, what: str) -> list[str]:
    """The repo paths of the one GGUF model ``tag`` names (all its split parts, in order)."""
    ggufs = [f for f in files if f.lower().endswith(".gguf") and "mmproj" not in f.lower().rsplit("/", 1)[-1]]
    if not ggufs:
        raise ConfigError(f"{what}: the repo holds no .gguf model file ({len(files):,} files); give a GGUF repo")
    wanted = tag or DEFAULT_TAG
    pattern = re.compile(rf"(?<![A-Za-z0-9]){re.escape(wanted)}(?![A-Za-z0-9])", re.IGNORECASE)
    exact = [f for f in ggufs if f == wanted]
    matching = exact or [f for f in ggufs if pattern.search(f)]
    if not matching and tag is None:
        matching = [ggufs[0]]  # llama.cpp: the first file when the repo has no Q4_K_M
    models = sorted({_model_of(f) for f in matching})
    if len(models) != 1:
        listed = ", ".join(repr(m) for m in sorted({_model_of(f) for f in ggufs})[:12])
        found = "no file" if not models else f"{len(models)} models"
        raise ConfigError(f"{what}: quant {excerpt(wanted, 40)} matches {found} in the repo; give a tag or file "
                          f"name that names one of: {listed}")
    return sorted(f for f in matching if _model_of(f) == models[0])


def _hf_headers(spec: str, deadline: float) -> tuple[str, list[GgufHeader]]:
    repo, _, tag = spec[len(HF_PREFIX):].partition(":")
    what = f"-hf {excerpt(spec[len(HF_PREFIX):], 120)}"
    if not names_hub_gguf(spec):
        raise ConfigError(f"{what}: give <owner>/<repo>[:QUANT], e.g. unsloth/Qwen3-8B-GGUF:Q4_K_M")
    files, commit = _listing(repo, what, deadline)
    chosen = choose_file(files, tag or None, what)
    first = f"{endpoint()}/{repo}/resolve/{commit}/{urllib.parse.quote(chosen[0])}"
    headers = _headers(first, what=what, token=_token(), deadline=deadline)
    if len(headers) != len(chosen):
        raise ConfigError(f"{what}: {chosen[0]!r} says the model is split in {len(headers)} files; the repo has "
                          f"{len(chosen)} of them")
    return f"{repo}:{chosen[0]}", headers


@functools.lru_cache(maxsize=8)
def _remote(name: str, endpoint_now: str, token_given: bool) -> tuple[str, tuple[GgufHeader, ...]]:
    """A repo's or URL's headers, read once per process for the same endpoint and token (a command may resolve its
    model more than once)."""
    del endpoint_now, token_given  # the cache's key only
    deadline = time.monotonic() + HTTP_DEADLINE_S
    if name.startswith(HF_PREFIX):
        label, headers = _hf_headers(name, deadline)
        return label, tuple(headers)
    same_host = urllib.parse.urlsplit(name).netloc == urllib.parse.urlsplit(endpoint()).netloc
    return name, tuple(_headers(name, what="model", token=_token() if same_host else {}, deadline=deadline))


def gguf_headers(name: str) -> tuple[str, tuple[GgufHeader, ...]]:
    """The model's name as shown and the headers of all its parts: ``hf.co/<repo>[:QUANT]``, an http(s) URL, or a
    local .gguf file (any one part of a split model)."""
    if name.startswith((HF_PREFIX, "http://", "https://")):
        if name.startswith(HF_PREFIX) and os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true",
                                                                                                     "yes", "on"):
            raise ConfigError(f"offline (HF_HUB_OFFLINE is set) and -hf {excerpt(name[len(HF_PREFIX):], 80)} needs "
                              "the hub; download the .gguf file and give its path")
        return _remote(name, endpoint(), bool(_token()))
    path = Path(name).expanduser()
    headers = _headers(str(path), what="model", token={}, deadline=time.monotonic() + HTTP_DEADLINE_S)
    return path.name, tuple(headers)
