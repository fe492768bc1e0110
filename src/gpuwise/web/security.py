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


def host_name(header: str) -> str:
    """The host part of a Host header, without the port: ``[::1]:8000`` -> ``::1``, ``Example.com:80`` ->
    ``example.com``."""
    value = header.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


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
        self.allowed = {host_name(h) for h in allowed_hosts}

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
        if "json" in headers.get("content-type", "") and json_depth(body.decode("utf-8", "replace")) > MAX_BODY_DEPTH:
            await _answer(send, 413, f"request body nested more than {MAX_BODY_DEPTH} levels deep")
            return
        await self.app(scope, _replay(body, receive), _with_headers(send))

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
            present = {k.lower() for k, _ in message.get("headers", [])}
            message["headers"] = [*message.get("headers", []), *(h for h in HEADERS if h[0] not in present)]
        await send(message)

    return wrapped
