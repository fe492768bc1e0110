"""An HTTP handler's answer to a ``Range: bytes=FIRST-LAST`` request, as a file server (and the Hugging Face hub's
CDN) gives it: 206 Partial Content with its Content-Range; shared by the tests that read headers remotely."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler


def send_range(handler: BaseHTTPRequestHandler, data: bytes, *, first: int | None = None, last: int | None = None,
               total: str | None = None) -> None:
    """The range the request asked for (or ``first``-``last``), with the file's size (or ``total`` in its place:
    ``*`` for a server that does not say)."""
    if first is None or last is None:
        first, last = (int(x) for x in handler.headers["Range"].removeprefix("bytes=").split("-"))
    part = data[first:last + 1]
    handler.send_response(206)
    handler.send_header("Content-Range", f"bytes {first}-{first + len(part) - 1}/{total or len(data)}")
    handler.send_header("Content-Length", str(len(part)))
    handler.end_headers()
    handler.wfile.write(part)
