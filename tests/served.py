"""Start `gpuwise serve` as a real process for the tests that need a server (browser, load, signals)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(*flags: str) -> tuple[subprocess.Popen[bytes], str]:
    """The server process and its URL once it answers /api/models (fails the test if it does not start in 30 s)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gpuwise.cli.main", "serve", "--port", str(port), *flags],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/api/models", timeout=1):
                return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    proc.wait()
    pytest.fail("the server did not start within 30 s")


@contextmanager
def serving(*flags: str) -> Iterator[str]:
    proc, url = start(*flags)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=15)
