"""What a server may read for a caller it does not trust: the one policy for paths and URLs.

The CLI reads whatever its user names. The web app and the MCP server answer callers that are not that user (a web
page, an agent, a prompt injected into one), so every value the api would open -- a model given as a path, a weights
file or URL, catalog files, calibration records -- passes :func:`check_access` first, under an :class:`AccessPolicy`
that allows nothing unless the user started the server with ``--allow-path DIR`` or ``--allow-url [PREFIX]``.

- A **model** is no file when it is a preset id, an image pipeline or a hub repo id (``owner/name``); a name the model
  resolver would open (path syntax, ``~``, ``.json``, or a name that exists on disk) is checked as a path.
- A **path** is expanded (``~``) and resolved (``..``, symlinks) with ``os.path.realpath``; it must lie inside an
  allowed folder, and the resolved path is what the api is given, so the file checked is the file read.
- A **URL** is http(s) only, without user info, ``%`` or ``\\`` in the host, or dot segments; it must start with an
  allowed prefix, compared by scheme, host, port and whole path segments. A prefix without a host (``https://``, what
  a bare ``--allow-url`` gives) allows any host whose addresses are all public: never loopback, private, link-local
  (``169.254.169.254``, the cloud metadata service) or reserved ones, however the address is spelled.

A refusal is :class:`AccessDenied`: one line naming the field and how to allow it, HTTP 403, an MCP tool error.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

from gpuwise.errors import ConfigError
from gpuwise.hosts import host_is_public
from gpuwise.safe_io import excerpt
from gpuwise.workload.model.resolve import names_a_file

Kind = Literal["model", "file", "file-or-url"]
ANY_URL = ("http://", "https://")  # what a bare --allow-url allows: any http(s) URL to a public address
FIELDS: dict[str, Kind] = {"model": "model", "weights": "file-or-url", "calibration": "file", "catalog_files": "file"}
"""The api's keywords that open what they name, and what each takes; every other argument is a job field."""
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")  # two letters at least: C:\\ is a drive
_PATH_REMEDY = "start the server with --allow-path DIR to let it read files under DIR"
_URL_REMEDY = "start the server with --allow-url PREFIX (or a bare --allow-url: any public http(s) URL)"


class AccessDenied(ConfigError):
    """A server was asked to read a path or URL its user did not allow."""

    http_status = 403


@dataclass(frozen=True)
class AccessPolicy:
    """The paths and URLs a server may read for its callers. The default allows none.

    ``allow_paths``: folders (or files), resolved once here; each must exist. ``allow_urls``: http(s) prefixes, e.g.
    ``https://huggingface.co/meta-llama/``; ``https://`` alone is any https URL to a public address. ``remedy``: what a
    refusal tells the caller to do instead of naming the server's flags (a server that has none sets it).
    """

    allow_paths: tuple[str, ...] = ()
    allow_urls: tuple[str, ...] = ()
    remedy: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "allow_paths", tuple(_allowed_folder(p) for p in self.allow_paths))
        object.__setattr__(self, "allow_urls", tuple(_allowed_prefix(u) for u in self.allow_urls))

    def how(self, default: str) -> str:
        return self.remedy or default


def _allowed_folder(given: str) -> str:
    real = os.path.realpath(os.path.expanduser(str(given)))
    if not os.path.exists(real):
        raise ConfigError(f"--allow-path {excerpt(str(given), 200)}: no such folder; give an existing folder")
    return real


def _allowed_prefix(given: str) -> str:
    if given in ANY_URL:
        return given
    parts = urlsplit(str(given))
    if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc or parts.query:
        raise ConfigError(f"--allow-url {excerpt(str(given), 200)}: give an http(s)://HOST[/PATH] prefix, or "
                          "--allow-url alone for any public http(s) URL")
    return urlunsplit((parts.scheme, parts.netloc.lower(), parts.path, "", ""))


def check_access(value: object, *, field: str, kind: Kind, policy: AccessPolicy) -> str:
    """``value`` as the api should be given it (a path resolved, a URL normalised, a model id unchanged) when
    ``policy`` lets a server read it for a caller; :class:`AccessDenied` (one line naming ``field``) otherwise.

    ``kind``: ``model`` (preset or hub id, else a path), ``file`` (a path) or ``file-or-url`` (a path or http(s)).
    """
    if not isinstance(value, str) or not value.strip() or "\x00" in value or len(value) > 4096:
        raise ConfigError(f"{field}: expected a name, path or URL as text, got {excerpt(value, 40)}")
    if kind == "model" and not names_a_file(value):
        return value
    if _SCHEME.match(value):
        if kind == "file-or-url":
            return _checked_url(value, field, policy)
        raise AccessDenied(f"{field}: {excerpt(value)} is a URL; this field takes a preset id or hub id"
                           if kind == "model" else f"{field}: {excerpt(value)} is a URL; this field takes a file")
    return _checked_path(value, field, policy)


def _checked_path(value: str, field: str, policy: AccessPolicy) -> str:
    real = os.path.realpath(os.path.expanduser(value))
    if not policy.allow_paths:
        raise AccessDenied(f"{field}: {excerpt(value)} is a path and this server reads no files for its callers; "
                           f"{policy.how(_PATH_REMEDY)}")
    if not any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in policy.allow_paths):
        raise AccessDenied(f"{field}: {excerpt(value)} is outside the folders this server may read "
                           f"({', '.join(policy.allow_paths)}); {policy.how(_PATH_REMEDY)}")
    return real


def _checked_url(value: str, field: str, policy: AccessPolicy) -> str:
    parts = urlsplit(value.strip())
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise AccessDenied(f"{field}: {excerpt(value)}: only http(s) URLs are read; a file is given by its path "
                           f"({policy.how(_PATH_REMEDY)})")
    if not policy.allow_urls:
        raise AccessDenied(f"{field}: {excerpt(value)} is a URL and this server reads none for its callers; "
                           f"{policy.how(_URL_REMEDY)}")
    if _odd(parts, value):
        raise AccessDenied(f"{field}: {excerpt(value)} is not a plain http(s) URL (user info, an escaped or missing "
                           "host, a port that is not a number, spaces, or . and .. segments); give the file's own URL")
    url = parts._replace(scheme=scheme, netloc=parts.netloc.lower())
    if any(_under(url, prefix) for prefix in policy.allow_urls if prefix not in ANY_URL):
        return urlunsplit(url)
    if f"{scheme}://" not in policy.allow_urls:
        raise AccessDenied(f"{field}: {excerpt(value)} starts with none of the allowed URL prefixes "
                           f"({', '.join(policy.allow_urls)}); {policy.how(_URL_REMEDY)}")
    if not host_is_public(url.hostname or "", url.port):
        raise AccessDenied(f"{field}: {excerpt(value)}: its host is not a public address (loopback, private, "
                           "link-local such as the cloud metadata service 169.254.169.254, or unresolvable); "
                           + policy.how(f"start the server with --allow-url {scheme}://{url.hostname}/ to allow it"))
    return urlunsplit(url)


def _odd(parts: SplitResult, value: str) -> bool:
    """User info, an escaped, missing or ill-ported host, a backslash, spaces, or . and .. segments: spellings that
    parsers read differently, never needed by a file's own URL."""
    try:
        parts.port  # noqa: B018  # raises on a port that is not a number
    except ValueError:
        return True
    segments = set(unquote(parts.path).split("/"))
    return ("@" in parts.netloc or "%" in parts.netloc or "\\" in value or not parts.hostname
            or any(c.isspace() or ord(c) < 32 for c in value) or bool(segments & {".", ".."}))


def _under(url: SplitResult, prefix: str) -> bool:
    """Whether ``url`` is under an allowed ``http(s)://HOST[:PORT][/PATH]``: the same scheme, host and port, and the
    prefix's path segments (``/org`` allows ``/org/x``, not ``/org-evil/x``)."""
    allowed = urlsplit(prefix)
    if (url.scheme, url.hostname, url.port) != (allowed.scheme, allowed.hostname, allowed.port):
        return False
    base = allowed.path.rstrip("/")
    return not base or url.path == base or url.path.startswith(base + "/")


def check_arguments(arguments: Mapping[str, Any], *, policy: AccessPolicy) -> dict[str, Any]:
    """A caller's arguments for an api function with each value the api would open checked by :func:`check_access`
    (and replaced by what it returns); a recommend request's workloads' models too. One list of such keywords:
    :data:`FIELDS`; ``job`` (a typed job object) is never taken from a caller."""
    checked = dict(arguments)
    if "job" in checked:
        raise ConfigError("job: give the job's own fields (method, batch, seq ...) as arguments, not a job object")
    for key, kind in FIELDS.items():
        if checked.get(key) is not None:
            checked[key] = _each(checked[key], key, kind, policy)
    workloads = checked.get("workloads")
    if isinstance(workloads, (list, tuple)):
        checked["workloads"] = [_workload(w, policy) for w in workloads]
    return checked


def _each(value: object, field: str, kind: Kind, policy: AccessPolicy) -> str | list[str]:
    if isinstance(value, (list, tuple)) and field != "model":
        return [check_access(v, field=field, kind=kind, policy=policy) for v in value]
    return check_access(value, field=field, kind=kind, policy=policy)


def _workload(workload: object, policy: AccessPolicy) -> object:
    """A recommend workload with its model checked (a task hpc workload's model is its application, no file)."""
    if not isinstance(workload, Mapping) or workload.get("task") == "hpc" or workload.get("model") is None:
        return workload
    return {**workload, "model": check_access(workload["model"], field="workloads.model", kind="model",
                                              policy=policy)}
