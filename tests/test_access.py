"""The one policy for what a server reads for its callers (api/access.py), tried on the real file system: absolute
paths, ``..``, symlinks out of an allowed folder, ``~``, models that are really paths, URLs to the cloud metadata
service however spelled, and the api's file-taking keywords pinned against its signatures."""

from __future__ import annotations

import inspect
import os
from pathlib import Path

import pytest

from gpuwise import api
from gpuwise.api import AccessDenied, AccessPolicy, ConfigError, check_access, check_arguments
from gpuwise.api.access import FIELDS, Kind

NONE = AccessPolicy()
ANY_URL = AccessPolicy(allow_urls=("http://", "https://"))


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    """An allowed folder with a config.json, and a secret file beside it (outside)."""
    allowed, secret = tmp_path / "allowed", tmp_path / "secret.txt"
    allowed.mkdir()
    (allowed / "config.json").write_text("{}")
    secret.write_text("key")
    return allowed, secret


def _refused(value: str, *, kind: Kind = "file", policy: AccessPolicy = NONE, field: str = "weights") -> str:
    with pytest.raises(AccessDenied) as caught:
        check_access(value, field=field, kind=kind, policy=policy)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{field}: ")
    return message


@pytest.mark.parametrize("value", ["/etc/hostname", "/etc", "etc/../../../../etc/passwd", "~/.ssh/id_rsa",
                                   "./config.json", "config.json", "C:\\Windows\\win.ini"])
def test_by_default_no_path_is_read_and_the_refusal_says_how_to_allow_one(value: str) -> None:
    assert "start the server with --allow-path DIR" in _refused(value)
    assert "--allow-path DIR" in _refused(value, kind="model", field="model")


@pytest.mark.parametrize("value", ["file:///etc/hostname", "http://169.254.169.254/latest/meta-data/",
                                   "https://huggingface.co/x/resolve/main/model.safetensors", "gopher://x/"])
def test_by_default_no_url_is_read(value: str) -> None:
    message = _refused(value, kind="file-or-url")
    assert "--allow-url" in message or "only http(s) URLs" in message
    assert "is a URL; this field takes a file" in _refused(value, kind="file")  # catalogs and calibrations


def test_a_path_inside_an_allowed_folder_is_given_on_resolved(folders: tuple[Path, Path],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    allowed, _ = folders
    policy = AccessPolicy(allow_paths=(str(allowed),))
    inside = str(allowed / "config.json")
    assert check_access(inside, field="model", kind="model", policy=policy) == os.path.realpath(inside)
    monkeypatch.chdir(allowed.parent)  # a relative path is resolved from the server's folder
    relative = check_access("allowed/./config.json", field="weights", kind="file", policy=policy)
    assert relative == os.path.realpath(inside)
    assert check_access("allowed", field="model", kind="model", policy=policy) == os.path.realpath(allowed)


def test_dot_dot_and_absolute_paths_out_of_an_allowed_folder_are_refused(folders: tuple[Path, Path],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    allowed, secret = folders
    policy = AccessPolicy(allow_paths=(str(allowed),))
    for value in (str(secret), f"{allowed}/../secret.txt", "/etc/hostname", f"{allowed}-evil/config.json"):
        assert "is outside the folders this server may read" in _refused(value, policy=policy)
    monkeypatch.chdir(allowed)
    assert "outside" in _refused("../secret.txt", policy=policy)
    assert "outside" in _refused("./../secret.txt", kind="model", policy=policy, field="model")


def test_a_symlink_out_of_an_allowed_folder_is_refused_and_one_within_is_followed(
        folders: tuple[Path, Path]) -> None:
    allowed, secret = folders
    (allowed / "escape.json").symlink_to(secret)
    (allowed / "etc").symlink_to("/etc", target_is_directory=True)
    (allowed / "again.json").symlink_to(allowed / "config.json")
    policy = AccessPolicy(allow_paths=(str(allowed),))
    assert "outside" in _refused(str(allowed / "escape.json"), policy=policy)
    assert "outside" in _refused(str(allowed / "etc" / "hostname"), policy=policy)
    assert check_access(str(allowed / "again.json"), field="calibration", kind="file", policy=policy) == (
        os.path.realpath(allowed / "config.json"))
    linked = allowed.parent / "linked"  # an allowed folder that is itself a link allows its target's files
    linked.symlink_to(allowed, target_is_directory=True)
    assert check_access(str(linked / "config.json"), field="weights", kind="file",
                        policy=AccessPolicy(allow_paths=(str(linked),))) == os.path.realpath(allowed / "config.json")


def test_tilde_is_expanded_before_the_check(folders: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    allowed, _ = folders
    policy = AccessPolicy(allow_paths=(str(allowed),))
    monkeypatch.setenv("HOME", str(allowed.parent))  # the home folder holds the allowed one, and the secret
    assert "outside" in _refused("~/secret.txt", policy=policy)
    assert "outside" in _refused("~", kind="model", policy=policy, field="model")
    assert check_access("~/allowed/config.json", field="model", kind="model", policy=policy) == (
        os.path.realpath(allowed / "config.json"))


@pytest.mark.parametrize("name", ["llama-3.1-8b", "meta-llama/Llama-3.1-8B", "Qwen/Qwen3-8B-FP8", "sdxl",
                                  "some-org/some-model", "no-such-model-xyz"])
def test_preset_hub_and_pipeline_ids_are_no_files(name: str) -> None:
    assert check_access(name, field="model", kind="model", policy=NONE) == name


def test_a_model_name_that_exists_on_disk_is_a_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The resolver reads an existing `owner/name` folder before asking the hub, so the policy does too."""
    (tmp_path / "some-org" / "some-model").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert "is a path" in _refused("some-org/some-model", kind="model", field="model")
    assert check_access("llama-3.1-8b", field="model", kind="model", policy=NONE) == "llama-3.1-8b"
    for name in ("a/../b", "a/b/c", "x.json", "/etc", ".", "..", "~root"):
        assert "is a path" in _refused(name, kind="model", field="model")


def test_a_model_given_as_a_url_is_refused() -> None:
    assert "takes a preset id or hub id" in _refused("http://169.254.169.254/", kind="model", policy=ANY_URL,
                                                     field="model")


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://2852039166/", "http://0xa9fea9fe/",
                                 "http://0251.0376.0251.0376/", "http://169.254.43518/",
                                 "https://[::ffff:169.254.169.254]/", "http://127.0.0.1:8000/x", "http://localhost/x",
                                 "http://[::1]/x", "http://10.0.0.1/x", "http://192.168.1.1/x", "http://0.0.0.0/",
                                 "https://100.64.0.1/x"])
def test_any_url_still_refuses_hosts_that_are_not_public(url: str) -> None:
    assert "its host is not a public address" in _refused(url, kind="file-or-url", policy=ANY_URL)


@pytest.mark.parametrize("url", ["http://user@93.184.215.14/x", "http://93.184.215.14%2f@x/", "http:///etc/passwd",
                                 "https://93.184.215.14/a/../b", "https://93.184.215.14/a/%2e%2e/b",
                                 "https://93.184.215.14\\@169.254.169.254/", "https://93.184.215.14:port/x",
                                 "https://93.184.215.14/a b"])
def test_urls_spelled_to_confuse_a_parser_are_refused(url: str) -> None:
    assert "not a plain http(s) URL" in _refused(url, kind="file-or-url", policy=ANY_URL)


def test_any_url_to_a_public_address_is_allowed_and_normalised() -> None:
    url = "HTTPS://93.184.215.14/Org/model.safetensors?download=1"
    assert check_access(url, field="weights", kind="file-or-url", policy=ANY_URL) == (
        "https://93.184.215.14/Org/model.safetensors?download=1")
    only_https = AccessPolicy(allow_urls=("https://",))
    assert "none of the allowed URL prefixes" in _refused("http://93.184.215.14/x", kind="file-or-url",
                                                          policy=only_https)


def test_a_prefix_allows_its_host_and_path_segments_only() -> None:
    policy = AccessPolicy(allow_urls=("https://huggingface.co/org", "http://127.0.0.1:8000/"))
    good = "https://huggingface.co/org/model/resolve/main/model.safetensors"
    assert check_access(good, field="weights", kind="file-or-url", policy=policy) == good
    assert check_access("http://127.0.0.1:8000/w.gguf", field="weights", kind="file-or-url", policy=policy)  # named
    for bad in ("https://huggingface.co/org-evil/x", "https://huggingface.co.evil.com/org/x",
                "http://huggingface.co/org/x", "https://huggingface.co:444/org/x", "https://huggingface.co/",
                "http://127.0.0.1:8001/w.gguf", "http://169.254.169.254/org/x"):
        assert "none of the allowed URL prefixes" in _refused(bad, kind="file-or-url", policy=policy)
    assert "not a plain" in _refused("https://huggingface.co/org/../other/x", kind="file-or-url", policy=policy)
    assert "not a plain" in _refused("https://huggingface.co@evil.com/org/x", kind="file-or-url", policy=policy)


def test_a_policy_refuses_what_cannot_be_allowed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--allow-path .*: no such folder"):
        AccessPolicy(allow_paths=(str(tmp_path / "nope"),))
    for prefix in ("ftp://x/", "file:///etc", "https://user@x/", "x.com", "https://x/?a=1"):
        with pytest.raises(ConfigError, match="--allow-url"):
            AccessPolicy(allow_urls=(prefix,))


def test_a_refusal_is_a_403_config_error_that_names_only_what_was_typed(folders: tuple[Path, Path]) -> None:
    allowed, secret = folders
    (allowed / "escape.json").symlink_to(secret)
    message = _refused(str(allowed / "escape.json"), policy=AccessPolicy(allow_paths=(str(allowed),)))
    assert str(secret) not in message  # where a link points is not told to the caller
    assert issubclass(AccessDenied, ConfigError) and AccessDenied.http_status == 403
    assert AccessDenied.exit_code == 2


def test_check_arguments_checks_every_file_taking_keyword(folders: tuple[Path, Path]) -> None:
    allowed, secret = folders
    policy = AccessPolicy(allow_paths=(str(allowed),))
    given = {"model": "llama-3.1-8b", "gpu": "rtx-4090", "method": "qlora",
             "catalog_files": [str(allowed / "config.json")], "weights": str(allowed / "config.json")}
    real = os.path.realpath(allowed / "config.json")
    assert check_arguments(given, policy=policy) == {**given, "catalog_files": [real], "weights": real}
    for key, value in (("calibration", str(secret)), ("catalog_files", [str(allowed / "config.json"), str(secret)]),
                       ("weights", "file:///etc/hostname"), ("model", "/etc")):
        with pytest.raises(AccessDenied, match=rf"^{key}: "):
            check_arguments({**given, key: value}, policy=policy)
    with pytest.raises(ConfigError, match="catalog_files: expected"):  # a mapping's keys would be iterated as paths
        check_arguments({"catalog_files": {"/etc/hosts": 1}}, policy=policy)
    with pytest.raises(ConfigError, match=r"^job: "):
        check_arguments({"job": {"method": "qlora"}}, policy=policy)


def test_check_arguments_checks_a_recommend_requests_models() -> None:
    request = {"workloads": [{"model": "qwen2-7b"}, {"task": "hpc", "options": {"app": "hpl"}},
                             {"model": "/etc/passwd", "task": "infer"}]}
    with pytest.raises(AccessDenied, match=r"^workloads\.model: '/etc/passwd' is a path"):
        check_arguments(request, policy=NONE)
    fine = {"workloads": request["workloads"][:2]}
    assert check_arguments(fine, policy=NONE) == fine


CALLER_FIELDS = {"gpu", "gpus", "task", "job", "doctor_report", "descending", "vendor", "segment", "min_memory_gb",
                 "features", "sort", "usage"}  # usage: electricity price and PUE (numbers, no path)


@pytest.mark.parametrize("name", ["estimate", "fit", "serve_sim", "tco", "recommend", "hpc_estimate", "image_estimate",
                                  "image_fit", "diagnose", "plan", "scale", "layer_split", "list_gpus", "find_gpu"])
def test_every_file_taking_keyword_of_the_api_is_checked(name: str) -> None:
    """A new keyword that opens a file must join FIELDS (or the job) before a server can pass it on unchecked."""
    keywords = {p.name for p in inspect.signature(getattr(api, name)).parameters.values()
                if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert keywords - CALLER_FIELDS <= set(FIELDS), keywords - CALLER_FIELDS - set(FIELDS)
