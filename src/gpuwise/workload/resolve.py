"""Turn what the user typed into an :class:`Architecture`: a preset, a local config.json, or a hub repo.

Order: preset id or a preset's hub id (offline) -> an existing local file or folder -> a hub repo id
(``owner/name``; only ``config.json`` is fetched, through huggingface_hub's cache; never remote code).
"""

from __future__ import annotations

import difflib
import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuwise.errors import ConfigError, UnknownModel
from gpuwise.workload.architecture import Architecture, from_config, from_param_count
from gpuwise.workload.presets import Preset, hub_index, presets

MAX_CONFIG_BYTES = 1_000_000


def architecture_of_preset(preset: Preset) -> Architecture:
    if "model_type" not in preset.config and preset.published_params:
        return from_param_count(name=preset.id, family=str(preset.config.get("_class_name", "unet")),
                                kind="unet", total=int(preset.published_params), source=preset.source)
    return from_config(preset.config, name=preset.id, source=preset.source)


def parse_config_text(text: str, *, origin: str) -> Mapping[str, Any]:
    """Parse config.json text; a one-line ConfigError when it is not a JSON object."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{origin}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{origin}: expected a JSON object (a config.json), got {type(data).__name__}")
    return data


def _from_path(path: Path) -> Architecture:
    file = path / "config.json" if path.is_dir() else path
    if not file.is_file():
        raise ConfigError(f"{path}: folder has no config.json; give the model's config.json or its folder")
    if file.stat().st_size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{file}: {file.stat().st_size} bytes is too large for a config.json")
    config = parse_config_text(file.read_text("utf-8", errors="replace"), origin=str(file))
    return from_config(config, name=str(path), source=str(file))


def _from_hub(repo_id: str) -> Architecture:
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError
    except ImportError:
        raise ConfigError(
            f"{repo_id!r} is not a preset; fetching its config.json needs huggingface_hub: "
            "pip install 'gpuwise[hf]' (or give a local config.json)"
        ) from None
    try:
        file = hf_hub_download(repo_id=repo_id, filename="config.json")
    except (RepositoryNotFoundError, EntryNotFoundError):
        raise UnknownModel(repo_id, hint="; no such repo or no config.json on the Hugging Face hub") from None
    except Exception as exc:  # offline, gated repo, proxy: the hub client raises many types
        raise ConfigError(
            f"could not fetch config.json of {repo_id!r} ({type(exc).__name__}); offline? "
            "download it and pass the file, or use a preset (`gpuwise models`)"
        ) from None
    return _from_path(Path(file))


def nearest_presets(name: str, limit: int = 3) -> list[str]:
    index = hub_index()
    close = difflib.get_close_matches(name.lower(), list(index), n=limit * 3, cutoff=0.6)
    ids: list[str] = []
    for key in close:
        if index[key] not in ids:
            ids.append(index[key])
    return ids[:limit]


@functools.lru_cache(maxsize=128)
def _cached_preset(preset_id: str) -> Architecture:
    return architecture_of_preset(presets()[preset_id])


def resolve_model(name: str) -> Architecture:
    """The architecture ``name`` designates; UnknownModel (with suggestions) or ConfigError otherwise."""
    if not name.strip():
        raise ConfigError("model name is empty; give a preset id, a config.json path or a hub repo id")
    preset_id = hub_index().get(name.strip().lower())
    if preset_id is not None:
        return _cached_preset(preset_id)
    path = Path(name).expanduser()
    if path.exists():
        return _from_path(path)
    if name.count("/") == 1 and not name.startswith((".", "/")) and not name.endswith(".json"):
        return _from_hub(name)
    if name.endswith(".json") or "/" in name:
        raise ConfigError(f"{name}: no such file; give an existing config.json or its folder")
    raise UnknownModel(name, suggestions=nearest_presets(name))
