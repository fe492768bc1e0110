"""Redirects are where an allowed URL can still reach what was not allowed (a server-side request forgery): a read
that began at a public host is not followed to a loopback, private or link-local one such as the cloud metadata
address, nor to any scheme but http(s); a read the user began at their own local server may move within it."""

from __future__ import annotations

import io
import threading
import urllib.request
from collections.abc import Iterator
from http.client import HTTPMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from gpuwise.errors import ConfigError
from gpuwise.hosts import GuardedRedirects, host_is_public
from gpuwise.safe_io import read_url_range

PUBLIC, OTHER_PUBLIC = "http://93.184.215.14/model.safetensors", "http://8.8.8.8/model.safetensors"  # numeric: no DNS


def _follow(start: str, target: str) -> urllib.request.Request | None:
    request = urllib.request.Request(start)
    return GuardedRedirects().redirect_request(request, io.BytesIO(), 302, "Found", HTTPMessage(), target)


@pytest.mark.parametrize("target", ["http://169.254.169.254/latest/meta-data", "http://2852039166/", "http://127.0.0.1/",
                                    "http://[::ffff:169.254.169.254]/", "http://10.0.0.7/", "http://localhost:8080/"])
def test_a_public_read_is_not_redirected_to_a_host_that_is_not_public(target: str) -> None:
    with pytest.raises(ConfigError, match="not a public host"):
        _follow(PUBLIC, target)


def test_a_public_read_follows_a_redirect_to_another_public_host() -> None:
    followed = _follow(PUBLIC, OTHER_PUBLIC)
    assert followed is not None and followed.full_url == OTHER_PUBLIC


@pytest.mark.parametrize("target", ["file:///etc/hostname", "ftp://93.184.215.14/x"])
def test_no_redirect_leaves_http(target: str) -> None:
    with pytest.raises(ConfigError, match="only http"):
        _follow(PUBLIC, target)


def test_the_address_rule() -> None:
    assert host_is_public("93.184.215.14") and not host_is_public("169.254.169.254")
    assert not host_is_public("0xa9.254.169.254") and not host_is_public("::1") and not host_is_public("")


class _Redirecting(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/start":
            self.send_response(302)
            self.send_header("Location", "file:///etc/hostname")
            self.end_headers()
            return
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        """Quiet."""


@pytest.fixture()
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Redirecting)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_real_read_refuses_a_redirect_to_a_file_in_one_line(server: str) -> None:
    import time

    with pytest.raises(ConfigError, match="302") as caught:  # urllib itself stops a redirect to file: first
        read_url_range(f"{server}/start", first=0, size=8, deadline=time.monotonic() + 10, what="--weights")
    assert "\n" not in str(caught.value)


def test_an_error_names_a_url_without_its_credentials_or_signature() -> None:
    """A signed download URL's token and a URL's password are not repeated in an error message or a log."""
    from gpuwise.workload.weights_source import label

    named = label("https://user:secret@example.org/m/model.safetensors?X-Amz-Signature=abc123#part")
    assert named == "'https://example.org/m/model.safetensors'"
    assert "secret" not in named and "abc123" not in named
