"""What every request and response of `gpuwise serve` passes through: the Host check, body limits, headers.

- **Host**: a page served on 127.0.0.1 must not answer a request whose Host names some other site: that is how DNS
  rebinding lets a web page in the user's browser reach a local server. Only the bound address, the loopback
  names and the configured extra names are answered; anything else is a 400.
- **Bodies**: at most MAX_BODY_BYTES (413 beyond, also for chunked uploads), and a JSON body nested at most
  MAX_BODY_DEPTH deep (413), checked before any parser recurses into it.
- **Headers**: nosniff, no framing, no referrer, and a Content-Security-Policy that loads scripts only from the
  app itself (Plotly and Swagger UI are served from the installed packages, never a CDN).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from gpuwise.safe_io import json_depth

MAX_BODY_BYTES = 25_000_000  # a 20 MB log for /api/diagnose, JSON-escaped
MAX_BODY_DEPTH = 64
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'")
HEADERS = [(b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY"),
           (b"referrer-policy", b"no-referrer"), (b"content-security-policy", CSP.encode())]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-")


def host_name(header: str) -> str:
    """The host part of a Host header, without the port: ``[::1]:8000`` -> ``::1``, ``Example.com:80`` ->
    ``example.com``; "" for anything that is not a host and an optional numeric port (``a:8000@evil.com``)."""
    value = header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        port = value[end + 1:] if end > 0 else "x"
        return value[1:end] if port == "" or (port[:1] == ":" and port[1:].isdigit()) else ""
    host, colon, port = value.partition(":")
    if (colon and not port.isdigit()) or not host or not set(host) <= _HOST_CHARS:
        return ""
    return host


async def _answer(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *HEADERS]})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """Pure ASGI middleware: Host allow-list, bounded bodies, security headers on every response."""

    def __init__(self, app: ASGIApp, *, allowed_hosts: tuple[str, ...]) -> None:
        self.app = app
        # an allowed name may be a bare IPv6 address (::1), which a Host header brackets
        self.allowed = {h.strip().lower() if h.count(":") > 1 and "[" not in h else host_name(h)
                        for h in allowed_hosts} - {""}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if host_name(headers.get("host", "")) not in self.allowed:
            await _answer(send, 400, "this server answers only its own address (Host header not allowed); start it "
                                     "with --allow-host NAME to add one")
            return
        length = headers.get("content-length", "0")
        if not length.isdigit() or int(length) > MAX_BODY_BYTES:
            await _answer(send, 413, f"request body larger than {MAX_BODY_BYTES:,} bytes")
            return
        body = await self._body(receive)
        if body is None:
            await _answer(send, 413, f"request body larger than {MAX_BODY_BYTES:,} bytes")
            return
        is_json = "json" in headers.get("content-type", "").lower()
        if is_json and json_depth(body.decode("utf-8", "replace")) > MAX_BODY_DEPTH:
            await _answer(send, 413, f"request body nested more than {MAX_BODY_DEPTH} levels deep")
            return
        sent = _with_headers(send)
        try:
            await self.app(scope, _replay(body, receive), sent)
        except Exception:  # a bug: answer a JSON 500 with the same headers, never the server's bare text page
            logging.getLogger("gpuwise.web").exception("unhandled error in %s", scope.get("path", "?"))
            if not sent.started:  # type: ignore[attr-defined]
                await _answer(send, 500, "internal error; this is a bug in gpuwise, please report it")

    @staticmethod
    async def _body(receive: Receive) -> bytes | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks)
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body: the disconnect the app may wait for

    return replay


def _with_headers(send: Send) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            wrapped.started = True  # type: ignore[attr-defined]
            present = {k.lower() for k, _ in message.get("headers", [])}
            message["headers"] = [*message.get("headers", []), *(h for h in HEADERS if h[0] not in present)]
        await send(message)

    wrapped.started = False  # type: ignore[attr-defined]
    return wrapped
