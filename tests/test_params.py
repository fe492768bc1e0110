"""Parameter counts: closed-form counters against published counts and against transformers' own count."""

from __future__ import annotations

import http.server
import importlib.util
import json
import socket
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from gpuwise.errors import ConfigError, UnknownModel
from gpuwise.workload.model.params import count_params
from gpuwise.workload.model.presets import presets
from gpuwise.workload.model.resolve import resolve_model

CONFIGS = Path(__file__).parents[1] / "benchmarks" / "data" / "configs"

# Published counts named in issue #3 (safetensors index totals / model cards).
PUBLISHED = {
    "llama-3-8b": 8_030_261_248,
    "llama-2-7b": 6_738_415_616,
    "mistral-7b": 7_241_732_096,
    "gpt2": 124_439_808,
    "mixtral-8x7b": 46_702_792_704,
}

REQUIRED_PRESETS = """gpt2 gpt2-xl bert-base-uncased bert-large-uncased roberta-large t5-base t5-3b vit-b-16 vit-l-16
resnet-50 opt-1.3b opt-6.7b opt-13b opt-30b llama-2-7b llama-2-13b llama-2-70b codellama-34b llama-3-8b llama-3-70b
llama-3.1-8b llama-3.1-70b llama-3.1-405b llama-3.2-1b llama-3.2-3b mistral-7b mixtral-8x7b mixtral-8x22b qwen2-7b
qwen2.5-0.5b qwen2.5-1.5b qwen2.5-7b qwen2.5-14b qwen2.5-32b qwen2.5-72b gemma-2-2b gemma-2-9b gemma-2-27b
phi-3-mini falcon-7b falcon-40b mpt-7b""".split()


def test_every_required_preset_ships_with_a_source() -> None:
    shipped = presets()
    assert not set(REQUIRED_PRESETS) - set(shipped)
    assert len(shipped) >= 41
    moe = [p for p in shipped.values() if (p.config.get("num_local_experts") or p.config.get("num_experts"))]
    assert len(moe) >= 3  # mixtral-8x7b, mixtral-8x22b and one more of our choice
    assert all(p.source.startswith("https://") for p in shipped.values())


@pytest.mark.parametrize(("preset", "expected"), sorted(PUBLISHED.items()))
def test_issue_published_counts(preset: str, expected: int) -> None:
    assert resolve_model(preset).total_params == expected


@pytest.mark.parametrize("preset_id", sorted(p for p, v in presets().items() if v.published_params))
def test_every_preset_matches_its_published_count(preset_id: str) -> None:
    preset = presets()[preset_id]
    if "model_type" not in preset.config:  # sdxl-unet: only the published total exists
        assert resolve_model(preset_id).total_params == preset.published_params
        return
    folder = Path(__file__).parents[1] / "src/gpuwise/workload/model/presets"
    raw = json.loads((folder / f"{preset_id}.json").read_text())
    counted_as = raw["_preset"].get("counted_as")  # the class the published figure is for (BertModel ...)
    config = {**preset.config, "architectures": [counted_as]} if counted_as else preset.config
    assert count_params(config).total == preset.published_params


def test_moe_active_parameters_by_hand() -> None:
    # Mixtral-8x7B: 6 of 8 experts idle per token, each expert 3 x 4096 x 14336, in 32 layers
    mixtral = resolve_model("mixtral-8x7b")
    assert mixtral.active_params == 46_702_792_704 - 32 * 6 * 3 * 4096 * 14336 == 12_879_925_248


def test_hub_ids_of_presets_resolve_offline() -> None:
    assert resolve_model("meta-llama/Llama-3.1-8B").name == "llama-3.1-8b"
    assert resolve_model("META-LLAMA/LLAMA-3.1-8B").name == "llama-3.1-8b"


def test_local_config_files_of_the_shared_data() -> None:
    # BertModel (published 335,141,888) + a 2-label classifier (1024 x 2 + 2)
    assert resolve_model(str(CONFIGS / "bert-large-uncased-seqcls.json")).total_params == 335_141_888 + 2050


def test_a_folder_with_config_json_works(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({k: v for k, v in presets()["gpt2"].config.items()}))
    assert resolve_model(str(tmp_path)).total_params == 124_439_808


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"model_type": "llama", "hidden_size": 4096}, "lacks 'num_hidden_layers'"),
        ({"hidden_size": 4096}, "has no 'model_type'"),
        ({"model_type": "frobnicate"}, "model_type 'frobnicate' has no closed form"),
        ({"model_type": "llama", "hidden_size": 0, "num_hidden_layers": 2, "num_attention_heads": 1,
          "intermediate_size": 8, "vocab_size": 10}, "'hidden_size' must be a whole number from 1"),
    ],
)
def test_bad_configs_name_the_problem(tmp_path: Path, config: dict[str, object], message: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=message):
        resolve_model(str(path))


def test_malformed_json_and_missing_files(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match=r"not valid JSON"):
        resolve_model(str(bad))
    with pytest.raises(ConfigError, match="no such file"):
        resolve_model(str(tmp_path / "missing.json"))
    with pytest.raises(ConfigError, match=r"has no config\.json"):
        resolve_model(str(tmp_path / ".."))


def test_unknown_model_suggests_presets() -> None:
    with pytest.raises(UnknownModel) as err:
        resolve_model("llama-3.1-8")
    assert "llama-3.1-8b" in err.value.suggestions


NOT_IN_TRANSFORMERS = ("yolov8", "unet")
"""Ultralytics' and milesial's networks: their counts are checked against Ultralytics' printed summaries and a PyTorch
build of the same layers (tests/test_vision.py)."""


@pytest.mark.skipif(importlib.util.find_spec("transformers") is None or importlib.util.find_spec("torch") is None,
                    reason="needs the hf extra and torch (CI installs both)")
@pytest.mark.parametrize("preset_id", sorted(p for p, v in presets().items() if "model_type" in v.config
                                             and v.config["model_type"] not in NOT_IN_TRANSFORMERS))
def test_formula_agrees_with_transformers_on_the_meta_device(preset_id: str) -> None:
    from gpuwise.workload.exact import meta_param_count

    config = dict(presets()[preset_id].config)
    if config.get("model_type") == "mistral3":
        # Mistral3Config ties the head by default, but the checkpoint stores both matrices and from_pretrained
        # keeps them apart (modeling_utils.tie_weights): build what from_pretrained loads
        config["tie_word_embeddings"] = False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exact = meta_param_count(config)
    assert resolve_model(preset_id).total_params == exact


class _FakeHub(http.server.BaseHTTPRequestHandler):
    """The two requests huggingface_hub makes for a file: HEAD (commit, etag, size) and GET; RepoNotFound for others."""

    config = b"{}"
    seen: ClassVar[list[str]] = []

    def _headers(self) -> None:
        known = self.path.startswith("/someone/tiny-gpt2/resolve/main/config.json")
        self.send_response(200 if known else 404)
        if known:
            self.send_header("X-Repo-Commit", "a" * 40)
            self.send_header("ETag", '"' + "b" * 40 + '"')
            self.send_header("Content-Length", str(len(self.config)))
        else:
            self.send_header("X-Error-Code", "RepoNotFound")
            self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self) -> None:
        self.seen.append(self.path)
        self._headers()

    def do_GET(self) -> None:
        self.seen.append(self.path)
        self._headers()
        if self.path.startswith("/someone/tiny-gpt2/"):
            self.wfile.write(self.config)

    def log_message(self, *args: object) -> None:
        pass


def _point_at(hub: Any, monkeypatch: pytest.MonkeyPatch, endpoint: str) -> None:
    """What HF_ENDPOINT does when set before the library is imported (its URL template is built at import)."""
    monkeypatch.setattr(hub, "ENDPOINT", endpoint)
    monkeypatch.setattr(hub, "HUGGINGFACE_CO_URL_TEMPLATE", endpoint + "/{repo_id}/resolve/{revision}/{filename}")


@pytest.fixture
def fake_hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[str]:
    hub = pytest.importorskip("huggingface_hub.constants")
    _FakeHub.config = json.dumps(presets()["gpt2"].config).encode()
    _FakeHub.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _FakeHub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    _point_at(hub, monkeypatch, endpoint)
    monkeypatch.setattr(hub, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", False)
    yield endpoint
    server.shutdown()
    server.server_close()


def test_hub_repo_is_fetched_through_huggingface_hub(fake_hub: str) -> None:
    # the real library against a local hub: only config.json is fetched, never weights
    assert resolve_model("someone/tiny-gpt2").total_params == 124_439_808
    fetched = [path for path in _FakeHub.seen if "/resolve/" in path]
    assert fetched and all(path.endswith("/config.json") for path in fetched)
    with pytest.raises(UnknownModel, match="no such repo"):
        resolve_model("someone/missing")


def test_offline_hub_access_is_a_clear_error(fake_hub: str, monkeypatch: pytest.MonkeyPatch) -> None:
    hub = pytest.importorskip("huggingface_hub.constants")
    resolve_model("someone/tiny-gpt2")  # now in the cache: offline still works for it
    monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)
    assert resolve_model("someone/tiny-gpt2").total_params == 124_439_808
    asked = len(_FakeHub.seen)
    with pytest.raises(ConfigError, match=r"^offline \(HF_HUB_OFFLINE is set\).*'someone/other'"):
        resolve_model("someone/other")
    assert len(_FakeHub.seen) == asked  # no request, so no retries, when the user said offline


def test_an_unreachable_hub_fails_fast_and_says_offline(fake_hub: str, monkeypatch: pytest.MonkeyPatch) -> None:
    hub = pytest.importorskip("huggingface_hub.constants")
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there now: connections are refused at once
    _point_at(hub, monkeypatch, f"http://127.0.0.1:{port}")
    tried: list[object] = []
    connect = socket.create_connection

    def counted(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        tried.append(address)
        return connect(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", counted)
    with pytest.raises(ConfigError, match=r"^offline: cannot reach the Hugging Face hub"):
        resolve_model("someone/model")
    assert tried == [("127.0.0.1", port)]  # one refused connection, no retries: fast by construction


def test_a_stalled_hub_is_given_up_on(fake_hub: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # accepts the connection, never answers (a stalled proxy): the lookup ends at its deadline, not never
    hub = pytest.importorskip("huggingface_hub.constants")
    from gpuwise.workload.model import resolve as resolve

    stalled = socket.socket()
    stalled.bind(("127.0.0.1", 0))
    stalled.listen(8)
    _point_at(hub, monkeypatch, f"http://127.0.0.1:{stalled.getsockname()[1]}")
    monkeypatch.setattr(resolve, "HUB_DEADLINE_S", 1.5)
    try:  # the message is raised only when the lookup's thread is still waiting at the deadline
        with pytest.raises(ConfigError, match=r"did not answer within 1\.5 s"):
            resolve_model("someone/model")
    finally:
        stalled.close()
