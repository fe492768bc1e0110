"""Which hosts a read may reach: an address is public when the internet routes it (not loopback, private,
link-local such as the cloud metadata address 169.254.169.254, shared or multicast), and a redirect may not take a
read that began at a public host to one that is not (a server-side request forgery through a redirect).

One place for the address rule: the servers' access policy (api/access.py) allows a bare ``--allow-url`` only to
public hosts, and every HTTP read (safe_io.read_url_range) follows redirects through ``GuardedRedirects``.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.parse
import urllib.request
from http.client import HTTPMessage
from typing import IO

from gpuwise.errors import ConfigError


def host_is_public(host: str, port: int | None = None) -> bool:
    """Whether every address ``host`` stands for is a public one (a name is resolved; an address that cannot be
    resolved is not known to be public). ``2852039166`` and ``0xa9.254.169.254`` are 169.254.169.254 to a resolver."""
    try:
        found = socket.getaddrinfo(host, port or 443, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError, ValueError):
        return False
    addresses = {ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found}
    mapped = {a.ipv4_mapped for a in addresses if isinstance(a, ipaddress.IPv6Address) and a.ipv4_mapped}
    return bool(addresses) and all(a.is_global and not a.is_multicast for a in addresses | mapped)


class GuardedRedirects(urllib.request.HTTPRedirectHandler):
    """urllib's redirects, to http(s) only, and from a public host to public hosts only (Hugging Face's download URLs
    redirect to its CDN, which stays allowed; a redirect to 169.254.169.254 or localhost does not). A read the user
    began at a local server of their own may be redirected within it."""

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str, headers: HTTPMessage,
                         newurl: str) -> urllib.request.Request | None:
        target = urllib.parse.urlsplit(newurl)
        if target.scheme not in ("http", "https"):
            raise ConfigError(f"{req.full_url[:120]!r} redirects to a {target.scheme or 'relative'}: URL; only "
                              "http(s) is read")
        began = urllib.parse.urlsplit(req.full_url)
        if host_is_public(began.hostname or "", began.port) and not host_is_public(target.hostname or "",
                                                                                  target.port):
            raise ConfigError(f"{req.full_url[:120]!r} redirects to {target.hostname!r}, which is not a public host; "
                              "a read that began at a public host is not followed there")
        return super().redirect_request(req, fp, code, msg, headers, newurl)
