"""Turn what the user typed into an :class:`Architecture`: a preset, a local config.json, a GGUF file, or a hub repo.

Order: a GGUF model named as one (``hf.co/<repo>[:QUANT]``, an http(s) URL: model/gguf_source.py) -> preset id or a
preset's hub id (offline) -> a local .gguf file -> an existing local file or folder -> a hub repo id (``owner/name``;
only ``config.json`` is fetched, through huggingface_hub's cache; never remote code).
"""

from __future__ import annotations

import difflib
import functools
import os
import re
import socket
import threading
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuwise.errors import ConfigError, NotEstimable, UnknownModel
from gpuwise.safe_io import parse_json, read_text
from gpuwise.workload.model.architecture import Architecture, from_config, from_param_count
from gpuwise.workload.model.checkpoint import WeightFormat, strip_variant
from gpuwise.workload.model.gguf_source import HF_PREFIX, names_hub_gguf
from gpuwise.workload.model.presets import Preset, hub_index, presets

MAX_CONFIG_BYTES = 1_000_000
HUB_TIMEOUT_S = 5.0  # per HTTP request to the hub
HUB_DEADLINE_S = 12.0  # the whole lookup, retries included
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}")  # owner/name as the hub spells repo ids


def architecture_of_preset(preset: Preset) -> Architecture:
    if "model_type" not in preset.config and preset.published_params:
        return from_param_count(name=preset.id, family=str(preset.config.get("_class_name", "unet")),
                                kind="unet", total=int(preset.published_params), source=preset.source)
    return from_config(preset.config, name=preset.id, source=preset.source)


def parse_config_text(text: str, *, origin: str) -> Mapping[str, Any]:
    """Parse config.json text (bounded depth and numbers; Infinity as transformers writes it, never NaN); a one-line
    ConfigError when it is not a JSON object."""
    data = parse_json(text, origin=origin, infinity=True)
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: expected a JSON object (a config.json), got {type(data).__name__}")
    return data


def _from_path(path: Path) -> Architecture:
    file = path / "config.json" if path.is_dir() else path
    if not file.exists():
        raise ConfigError(f"{path}: folder has no config.json; give the model's config.json or its folder")
    config = parse_config_text(read_text(file, what="config", max_bytes=MAX_CONFIG_BYTES), origin=str(file))
    return from_config(config, name=str(path), source=str(file))


def _hub_offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _download(repo_id: str) -> str:
    """config.json of ``repo_id`` from the cache, else the hub, quietly and within HUB_DEADLINE_S."""
    from huggingface_hub import constants, hf_hub_download, try_to_load_from_cache
    from huggingface_hub import utils as hub_utils

    cached = try_to_load_from_cache(repo_id, "config.json")
    if isinstance(cached, str):
        return cached
    if _hub_offline():
        raise ConfigError(f"offline (HF_HUB_OFFLINE is set) and config.json of {repo_id!r} is not in the Hugging "
                          "Face cache; download it and pass the file, or use a preset (`gpuwise models`)")
    _reachable(repo_id)
    hub_utils.disable_progress_bars()  # type: ignore[attr-defined]  # exported lazily
    hub_utils.logging.set_verbosity_error()  # type: ignore[no-untyped-call]  # its retries would print 11 lines
    outcome: dict[str, Any] = {}

    def fetch() -> None:
        try:
            outcome["file"] = hf_hub_download(repo_id=repo_id, filename="config.json", etag_timeout=HUB_TIMEOUT_S,
                                              endpoint=constants.ENDPOINT)
        except Exception as exc:  # reported by the caller, which knows the library's error types
            outcome["error"] = exc

    worker = threading.Thread(target=fetch, daemon=True)  # a stalled endpoint must not stall gpuwise
    worker.start()
    worker.join(HUB_DEADLINE_S)
    if worker.is_alive():
        raise ConfigError(f"the Hugging Face hub did not answer within {HUB_DEADLINE_S:g} s for {repo_id!r} "
                          "(offline or a stalled proxy?); pass a local config.json or use a preset")
    if "error" in outcome:
        raise _hub_error(repo_id, outcome["error"])
    return str(outcome["file"])


def _reachable(repo_id: str) -> None:
    """Fail in a second, not after the library's retries, when the hub's host cannot be reached at all."""
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    url = urlsplit(constants.ENDPOINT)
    host, port = url.hostname or "huggingface.co", url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=HUB_TIMEOUT_S).close()
    except OSError as exc:
        raise ConfigError(f"offline: cannot reach the Hugging Face hub at {host} ({exc.strerror or exc}) to fetch "
                          f"config.json of {repo_id!r}; pass a local config.json or use a preset") from None


def _hub_error(repo_id: str, exc: BaseException) -> Exception:
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
    )

    if isinstance(exc, GatedRepoError):
        return ConfigError(f"{repo_id!r} is gated: accept its license on huggingface.co and log in (hf auth "
                           "login), or pass a local config.json")
    if isinstance(exc, LocalEntryNotFoundError) or (isinstance(exc, OSError) and not isinstance(
            exc, (RepositoryNotFoundError, EntryNotFoundError))):
        return ConfigError(f"could not reach the Hugging Face hub for {repo_id!r} (offline?); pass a local "
                           "config.json or use a preset (`gpuwise models`)")
    if isinstance(exc, RepositoryNotFoundError):
        return UnknownModel(repo_id, hint="; no such repo on the Hugging Face hub (or it is private)")
    if isinstance(exc, EntryNotFoundError):
        return UnknownModel(repo_id, hint="; the repo has no config.json")
    return ConfigError(f"could not fetch config.json of {repo_id!r} ({type(exc).__name__}); pass a local "
                       "config.json or use a preset (`gpuwise models`)")


def _from_hub(repo_id: str) -> Architecture:
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        raise ConfigError(
            f"{repo_id!r} is not a preset; fetching its config.json needs huggingface_hub: "
            "pip install 'gpuwise[hf]' (or give a local config.json)"
        ) from None
    return _from_path(Path(_download(repo_id)))


def nearest_presets(name: str, limit: int = 3) -> list[str]:
    index = hub_index()
    close = difflib.get_close_matches(name.lower(), list(index), n=limit * 3, cutoff=0.6)
    ids: list[str] = []
    for key in close:
        if index[key] not in ids:
            ids.append(index[key])
    return ids[:limit]


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):  # a name too long for the file system is not a file
        return False


@functools.lru_cache(maxsize=128)
def _cached_preset(preset_id: str) -> Architecture:
    return architecture_of_preset(presets()[preset_id])


def _variant(name: str) -> Architecture | None:
    """``Qwen/Qwen3-8B-FP8``, ``google/gemma-3-4b-it``, ``...-Instruct-AWQ``: the preset of the base repo, offline,
    with the weight format the suffix implies (an -FP8 repo ships FP8 weights; -Instruct the same architecture)."""
    base, implied, removed = strip_variant(name)
    preset_id = hub_index().get(base.lower()) if removed else None
    if preset_id is None:
        return None
    arch = _cached_preset(preset_id)
    suffixes = "".join(reversed(removed))
    checkpoint = WeightFormat(implied, "all", f"the repo name ({suffixes})") if implied else arch.checkpoint
    note = f"{name} -> preset {preset_id} ({suffixes}: " + (f"{implied} weights)" if implied else
                                                            "the same architecture)")
    return replace(arch, name=name, checkpoint=checkpoint, resolved_as=note)


def names_a_file(name: str) -> bool:
    """Whether :func:`resolve_model` reads ``name`` from disk, or would try to: not a preset or an image pipeline, and
    a name that exists there or is written as a path rather than a hub repo id. The servers' access policy
    (api/access.py) asks this, so that what it checks is what this resolver opens."""
    from gpuwise.workload.diffusion.pipeline import find_pipeline

    if name.strip().lower() in hub_index() or find_pipeline(name) is not None:
        return False
    if names_hub_gguf(name):  # read from the hub like a hub id's config.json, never from disk
        return False
    if os.path.lexists(os.path.expanduser(name)):
        return True
    hub_id = HUB_ID.fullmatch(name) is not None and not set(name.split("/")) & {".", ".."}
    spelled_as_path = name.startswith(("/", "~", ".")) or "\\" in name or name.endswith(".json")
    return spelled_as_path or ("/" in name and not hub_id)


def _from_gguf(name: str) -> Architecture:
    """A GGUF model: a local .gguf file, an http(s) URL or ``hf.co/<repo>[:QUANT]`` (model/gguf_source.py)."""
    from gpuwise.workload.model.gguf_arch import architecture_from_gguf
    from gpuwise.workload.model.gguf_source import gguf_headers

    shown, headers = gguf_headers(name)
    return architecture_from_gguf(headers, name=shown, source=name[:300])


def _is_gguf_file(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"GGUF"
    except OSError:
        return False


def resolve_model(name: str) -> Architecture:
    """The architecture ``name`` designates; UnknownModel (with suggestions) or ConfigError otherwise."""
    if not name.strip() or len(name) > 1000 or "\x00" in name:
        raise ConfigError("model name is empty or not a name; give a preset id, a config.json path or a hub repo id")
    if name.startswith((HF_PREFIX, "http://", "https://")):
        return _from_gguf(name)
    preset_id = hub_index().get(name.strip().lower())
    if preset_id is not None:
        return _cached_preset(preset_id)
    from gpuwise.workload.diffusion.pipeline import find_pipeline

    pipeline = find_pipeline(name)
    if pipeline is not None:
        raise NotEstimable(f"{pipeline.id} is an image-generation pipeline: `gpuwise estimate`, `fit` and "
                           "`recommend` answer it (--resolution, --steps, --offload; in Python "
                           "gpuwise.api.image_estimate / image_fit); serve-sim, scale and training do not model it")
    path = Path(name).expanduser()
    if name.lower().endswith(".gguf") or (_exists(path) and _is_gguf_file(path)):
        return _from_gguf(name)
    if _exists(path):
        return _from_path(path)
    variant = _variant(name.strip())
    if variant is not None:
        return variant
    if HUB_ID.fullmatch(name) and not name.endswith(".json"):
        return _from_hub(name)
    if name.endswith(".json") or "/" in name:
        raise ConfigError(f"{name[:200]}: no such file; give an existing config.json or its folder")
    raise UnknownModel(name, suggestions=nearest_presets(name))
