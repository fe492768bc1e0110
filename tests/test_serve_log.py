"""`gpuwise serve` says where it is and logs each request (issue 30: it printed nothing), quiet with --quiet; the
real server is started by the test."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request

import pytest

pytest.importorskip("uvicorn")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _served(*flags: str) -> str:
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "gpuwise.cli.main", "serve", "--port", str(port), *flags],
                              stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        for _ in range(100):  # up to 20 s for the app to import and bind
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/models", timeout=2):
                    break
            except OSError:
                time.sleep(0.2)
        time.sleep(0.3)
    finally:
        server.terminate()
        out, err = server.communicate(timeout=20)
    return out + err


def test_serve_prints_its_url_and_a_line_per_request() -> None:
    log = _served()
    assert "at http://127.0.0.1:" in log and "/docs" in log
    assert '"GET /api/models HTTP/1.1" 200' in log


def test_quiet_keeps_the_url_and_drops_the_request_lines() -> None:
    log = _served("--quiet")
    assert "at http://127.0.0.1:" in log and "GET /api/models" not in log
