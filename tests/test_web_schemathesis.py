"""Property-based API testing against the OpenAPI schema: no request, however odd, gets a 500."""

from __future__ import annotations

import os

import pytest

schemathesis = pytest.importorskip("schemathesis")
pytest.importorskip("fastapi")
from hypothesis import HealthCheck, settings  # noqa: E402

from gpuwise.web.app import create_app  # noqa: E402
from gpuwise.web.settings import ServeSettings  # noqa: E402

schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(ServeSettings(allow_host=("localhost",
                                                                                              "testserver"))))


SCALE = float(os.environ.get("GPUWISE_FUZZ_SCALE", "1"))  # a longer campaign: GPUWISE_FUZZ_SCALE=20


@schema.parametrize()
@settings(max_examples=int(40 * SCALE), deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors(case: schemathesis.Case) -> None:
    """Every operation of the OpenAPI document, with generated bodies, queries and paths: 4xx or 200, never 5xx
    (a 503 would be a request past its time limit), and never the echo of a long input."""
    response = case.call()
    assert response.status_code < 500, (case.method, case.path, case.body, response.text[:300])
