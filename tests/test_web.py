"""The web API with FastAPI's client: the same documents as the CLI's JSON, 4xx for bad input, no file paths."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from gpuwise import __version__
from gpuwise.web.app import create_app
from gpuwise.web.settings import ServeSettings

client = TestClient(create_app(ServeSettings(allow_host=("testserver",))))  # TestClient's Host


def test_pages_and_bundled_plotly() -> None:
    for page in ("/", "/fit", "/recommend", "/compare", "/tco", "/doctor"):
        r = client.get(page)
        assert r.status_code == 200 and "/static/plotly.min.js" in r.text
        assert "cdn" not in r.text.lower()  # works offline
    js = client.get("/static/plotly.min.js")
    assert js.status_code == 200 and len(js.content) > 1_000_000
    assert client.get("/nope").status_code == 404
    docs = client.get("/docs")
    assert docs.status_code == 200 and "cdn" not in docs.text.lower()
    assert "/static/docs/swagger-ui-bundle.js" in docs.text
    assert client.get("/static/docs/swagger-ui-bundle.js").status_code == 200
    assert client.get("/static/docs/..%2F..%2Fcore.py").status_code == 404
    assert client.get("/openapi.json").json()["info"]["version"] == __version__ != "0"


def test_catalog_endpoints() -> None:
    records = client.get("/api/catalog", params={"vendor": "amd"}).json()
    assert records and all(r["vendor"] == "amd" for r in records)
    one = client.get("/api/catalog/RTX 4090").json()
    assert one["id"] == "rtx-4090" and one["memory_bandwidth_gb_s"] == 1008
    assert client.get("/api/catalog/rtx-4909").status_code == 404
    assert client.get("/api/catalog", params={"vendor": "nvdia"}).status_code == 422


def test_estimate_matches_the_cli_contract() -> None:
    from gpuwise import api
    from gpuwise.report.estimate import estimate_json

    body = {"model": "llama-3.1-8b", "gpu": "rtx-4090", "task": "train", "options": {"method": "qlora", "seq": 1024}}
    web = client.post("/api/estimate", json=body).json()
    direct = estimate_json(api.estimate("llama-3.1-8b", gpu="rtx-4090", method="qlora", seq=1024))
    assert web == direct


def test_an_hpc_estimate_matches_the_cli_contract_and_refuses_a_model() -> None:
    from gpuwise import api
    from gpuwise.report.hpc import hpc_json

    body = {"gpu": "rtx-4090", "task": "hpc", "options": {"app": "amber", "atoms": 23_558, "timestep_fs": 4}}
    web = client.post("/api/estimate", json=body).json()
    assert web == hpc_json(api.hpc_estimate(gpu="rtx-4090", app="amber", atoms=23_558, timestep_fs=4))
    refused = client.post("/api/estimate", json={**body, "model": "/etc/passwd"})
    assert refused.status_code == 422 and "no model" in refused.json()["detail"]
    ranked = client.post("/api/recommend", json={"workloads": [{"task": "hpc", "options": {"app": "hpl"}}], "top": 3})
    assert ranked.status_code == 200 and ranked.json()["options"][0]["hpc"]["unit"] == "TFLOPS"


def test_uploaded_config_instead_of_a_preset() -> None:
    config = {"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
              "intermediate_size": 1024, "vocab_size": 1000}
    r = client.post("/api/fit", json={"config": config, "gpu": "t4", "options": {"precision": "fp16"}})
    assert r.status_code == 200 and r.json()["estimate"]["workload"]["params"] == 2 * 1000 * 512 + 4 * (
        4 * 512 * 512 + 3 * 512 * 1024 + 2 * 512) + 512


@pytest.mark.parametrize(("body", "status", "needle"), [
    ({"model": "/etc/passwd", "gpu": "rtx-4090"}, 403, "model: '/etc/passwd' is a path"),
    ({"model": "../secrets/config.json", "gpu": "rtx-4090"}, 403, "or upload the config.json"),
    ({"model": "meta-llama/Llama-3.2-90B-Vision", "gpu": "rtx-4090"}, 422, "not a preset"),  # a hub id: no file
    ({"model": "llama-3.1-8b", "gpu": "rtx-4090", "options": {"batch": 0}}, 422, "--batch"),
    ({"model": "llama-3.1-8b", "gpu": "rtx-4090", "options": {"method": "dora"}}, 422, "--method 'dora'"),
    ({"model": "llama-3.1-8b", "gpu": "h200"}, 422, "ambiguous"),
    ({"model": "llama-3.1-8b", "gpu": "gtx-9999"}, 404, "unknown GPU"),
    ({"gpu": "rtx-4090"}, 422, "give 'model'"),
    ({"model": "llama-3.1-8b", "gpu": "rtx-4090", "bogus": 1}, 422, "bogus"),
    # the api's file-taking keywords must never be reachable from a request
    ({"model": "llama-3.1-8b", "gpu": "rtx-4090", "options": {"calibration": "/etc/passwd"}}, 422,
     "unknown option 'calibration'"),
    ({"model": "llama-3.1-8b", "gpu": "rtx-4090", "options": {"catalog_files": ["/etc/hosts"]}}, 422,
     "unknown option 'catalog_files'"),
    ({"model": "llama-3.1-8b", "gpu": "rtx-4090", "task": "infer", "options": {"method": "lora"}}, 422,
     "--method applies to training; this is an inference job"),
    ({"config": {"model_type": "llama", "hidden_size": [512], "num_hidden_layers": 4, "num_attention_heads": 8,
                 "intermediate_size": 1024, "vocab_size": 1000}, "gpu": "t4"}, 422, "hidden_size"),
    ({"config": {"model_type": "llama", "hidden_size": 10**400, "num_hidden_layers": 4, "num_attention_heads": 8,
                 "intermediate_size": 1024, "vocab_size": 1000}, "gpu": "t4"}, 422, "hidden_size"),
    ({"config": {"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 0,
                 "intermediate_size": 1024, "vocab_size": 1000}, "gpu": "t4"}, 422, "num_attention_heads"),
])
def test_bad_input_is_a_4xx_that_names_the_problem(body: dict[str, object], status: int, needle: str) -> None:
    r = client.post("/api/estimate", json=body)
    assert r.status_code == status and needle in str(r.json()["detail"])


def test_recommend_tco_diagnose() -> None:
    rec = client.post("/api/recommend", json={"workloads": [{"model": "qwen2-7b", "options": {"method": "qlora"}}],
                                              "top": 3}).json()
    assert len(rec["options"]) == 3 and rec["rejected"] and rec["pareto"]
    bad = client.post("/api/recommend", json={"workloads": [{"model": "/tmp/x.json"}]})
    assert bad.status_code == 403 and bad.json()["detail"].startswith("workloads.model: '/tmp/x.json' is a path")
    tco = client.post("/api/tco", json={"gpu": "rtx-4090", "years": 3}).json()
    assert len(tco["buy"]["by_year_usd"]) == 3
    assert client.post("/api/tco", json={"gpu": "rtx-4090", "count": 0}).status_code == 422
    diag = client.post("/api/diagnose", json={"text": "RuntimeError: CUDA error: device-side assert triggered"}).json()
    assert diag["matches"][0]["id"] == "device-side-assert"


def test_diagnose_with_a_doctor_report_of_the_wrong_shape_is_a_422() -> None:
    r = client.post("/api/diagnose", json={"text": "CUDA out of memory", "doctor": {"checks": [1, "x"]}})
    assert r.status_code == 422 and "not a `gpuwise doctor --json` document" in r.json()["detail"]


def test_the_host_must_be_this_server_and_every_response_carries_security_headers() -> None:
    # DNS rebinding: a page on evil.example resolves its own name to 127.0.0.1 and calls the local API; its requests
    # carry Host: evil.example, which a local-only server must refuse
    assert client.get("/api/models", headers={"host": "evil.example"}).status_code == 400
    assert client.get("/api/models", headers={"host": "evil.example:8000"}).status_code == 400
    local = TestClient(create_app(ServeSettings(port=8123)), base_url="http://127.0.0.1:8123")
    assert local.get("/api/models").status_code == 200
    assert local.get("/api/models", headers={"host": "localhost:8123"}).status_code == 200
    assert local.get("/api/models", headers={"host": "[::1]:8123"}).status_code == 200
    assert local.get("/api/models", headers={"host": "testserver"}).status_code == 400
    for odd in ("localhost:8123@evil.example", "localhost:abc", "localhost:", "local host", "[::1]x"):
        assert local.get("/api/models", headers={"host": odd}).status_code == 400, odd
    r = client.get("/fit")
    assert r.headers["x-content-type-options"] == "nosniff" and r.headers["x-frame-options"] == "DENY"
    assert "script-src 'self'" in r.headers["content-security-policy"] and "<script>" not in r.text


def test_bodies_are_bounded_in_size_and_depth_and_never_echoed() -> None:
    deep = "[" * 100_000 + "]" * 100_000  # a recursive parser would blow its stack (500) before validating
    r = client.post("/api/estimate", content=deep, headers={"content-type": "application/json"})
    assert r.status_code == 413 and "nested" in r.json()["detail"]
    huge = client.post("/api/diagnose", content=b'{"text": "' + b"x" * 26_000_000 + b'"}',
                       headers={"content-type": "application/json"})
    assert huge.status_code == 413
    shouted = client.post("/api/estimate", content=deep, headers={"content-type": "Application/JSON"})
    assert shouted.status_code == 413  # the depth guard reads the media type case-insensitively
    secret = "s" * 50_000
    r = client.post("/api/estimate", json={"model": "llama-3.1-8b", "gpu": "rtx-4090", "junk": secret})
    assert r.status_code == 422 and secret[:100] not in r.text and len(r.text) < 2000


@pytest.mark.parametrize("config", [
    {"architectures": 5}, {"sliding_window": "abc"}, {"num_experts_per_tok": 64, "num_local_experts": 8},
    {"tie_word_embeddings": "no"}, {"sliding_window": -4096}, {"num_key_value_heads": 3},
])
def test_config_fields_that_once_gave_500s_or_wrong_answers_are_422s(config: dict[str, object]) -> None:
    # 12 hostile requests gave 500s (architectures: 5 ...); a negative window gave a negative KV cache, "no" read as
    # tied embeddings, 64-of-8 experts gave 363 B active of 47 B
    base = {"model_type": "mistral", "hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8,
            "intermediate_size": 1024, "vocab_size": 1000}
    r = client.post("/api/estimate", json={"config": {**base, **config}, "gpu": "t4", "task": "infer"})
    assert r.status_code == 422, r.text
    assert next(iter(config)) in r.json()["detail"]


def test_a_resnet_config_that_would_spin_for_ever_is_refused_at_once() -> None:
    config = {"model_type": "resnet", "embedding_size": 64, "hidden_sizes": [256, 512, 1024, 2048],
              "depths": [10**9, 10**9, 10**9, 10**9], "layer_type": "bottleneck"}
    r = client.post("/api/estimate", json={"config": config, "gpu": "t4"})
    assert r.status_code == 422 and "depths" in r.json()["detail"]


def test_a_bug_answers_json_500_with_the_security_headers() -> None:
    """An unhandled exception got Starlette's bare text 500, without nosniff/DENY/CSP, past the Guard middleware."""
    app = create_app(ServeSettings(allow_host=("testserver",)))

    def boom() -> None:
        raise RuntimeError("secret-boom")

    app.add_api_route("/boom", boom)
    app.router.routes.insert(0, app.router.routes.pop())  # ahead of the page routes

    r = TestClient(app, raise_server_exceptions=False).get("/boom")
    assert r.status_code == 500 and "bug in gpuwise" in r.json()["detail"] and "secret-boom" not in r.text
    assert r.headers["x-content-type-options"] == "nosniff" and "content-security-policy" in r.headers


def test_image_pipelines_answer_like_the_cli() -> None:
    from gpuwise.api import image_estimate
    from gpuwise.report.image import image_json

    body = {"model": "flux.1-dev", "gpu": "rtx-4090", "task": "infer",
            "options": {"offload": "model-cpu", "quant": "fp8", "steps": 20}}
    web = client.post("/api/estimate", json=body).json()
    cli = image_json(image_estimate("flux.1-dev", gpu="rtx-4090", offload="model-cpu", quant="fp8", steps=20))
    assert web == json.loads(json.dumps(cli))
    fitted = client.post("/api/fit", json={**body, "options": {}}).json()
    assert fitted["fitting_options"] and not fitted["memory"]["fits"]
    bad = client.post("/api/estimate", json={**body, "options": {"offload": "optimizer"}})
    assert bad.status_code == 422 and "--offload" in bad.json()["detail"]
    assert client.post("/api/estimate", json={**body, "task": "train"}).status_code == 422
    untasked = {k: v for k, v in body.items() if k != "task"}
    assert client.post("/api/estimate", json=untasked).json() == web  # a pipeline's task is infer
    assert {"id": "sdxl", "hub_ids": ["stabilityai/stable-diffusion-xl-base-1.0"], "kind": "image-pipeline"} in (
        client.get("/api/models").json())


@pytest.mark.parametrize(("path", "body"), [
    ("/api/estimate", {"gpu": "rtx-4090", "task": "hpc", "options": {"app": "amber", "atoms": 1000,
                                                                     "catalog_files": ["/etc/hostname"]}}),
    ("/api/estimate", {"gpu": "rtx-4090", "task": "hpc", "options": {"app": "amber", "catalog_files": "/etc"}}),
    ("/api/fit", {"model": "~/.ssh/config.json", "gpu": "rtx-4090"}),
    ("/api/fit", {"model": "./config.json", "gpu": "rtx-4090"}),
    ("/api/serving", {"model": "/etc", "gpu": "rtx-4090"}),
    ("/api/recommend", {"workloads": [{"model": "../../etc", "task": "infer"}]}),
])
def test_no_request_reads_a_path_the_same_policy_as_mcp(path: str, body: dict[str, object]) -> None:
    """api.check_access with nothing allowed: a task hpc request's options once reached load_catalog's files (the
    answer named /etc/hostname's contents as not a catalog); every path is now a 403 before anything opens it."""
    r = client.post(path, json=body)
    detail = r.json()["detail"]
    assert r.status_code == 403 and "is a path and this server reads no files" in detail, r.text
    assert "give a preset id (see /api/models) or upload the config.json" in detail and "--allow-path" not in detail
