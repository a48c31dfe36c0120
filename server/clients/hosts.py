"""The host names this server answers to (``--allowed-hosts``): a guard against DNS rebinding.

A page on ``evil.example`` can make its own name resolve to 127.0.0.1 and
then talk to a server on this host as a "same-origin" page: read
``/metrics`` (the peer is loopback), open ``/ws``, start rooms whose links
name ``evil.example``. Its requests still say ``Host: evil.example``, so
every HTTP request and websocket whose Host is not an allowed name is
refused before anything else sees it.

Allowed: the names configured (``*.example.org`` covers its subdomains,
``*`` everything; by default the bound host), the localhost names, and any
IP address written as such (``10.1.2.3:8000``, ``[::1]``). None of those
can be rebound: browsers resolve ``localhost`` to loopback themselves, a
page reaches an address only through its own origin, and health probes and
scrapers in a cluster address pods by IP.
"""

from __future__ import annotations

import ipaddress
import logging
import re

from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("jaxplay.server")

LOCAL_NAMES = ("localhost", "localhost.")
PORT = re.compile(r":[0-9]{1,5}", re.ASCII)  # ASCII digits only: str.isdigit takes "²"
WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def split_host(host_header: str) -> str:
    """``Example.org:8000`` -> ``example.org``; ``[::1]:80`` -> ``::1``. Anything after the host that is not
    a port (``127.0.0.1:80@evil.example``: no browser's) is kept, so the whole matches no allowed name."""
    text = host_header.strip().lower()
    if text.startswith("["):
        address, _, rest = text[1:].partition("]")
        return address if rest == "" or PORT.fullmatch(rest) else text
    host, colon, port = text.rpartition(":")
    return host if colon and text.count(":") == 1 and PORT.fullmatch(colon + port) else text


def is_ip_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class AllowedHosts:
    def __init__(self, configured: str, bound_host: str) -> None:
        names = [n.strip().lower() for n in configured.split(",") if n.strip()]
        if not names and bound_host not in WILDCARD_HOSTS:
            names = [bound_host.lower()]
        names += LOCAL_NAMES
        for name in names:
            if "/" in name or ":" in name.strip("[]") and not is_ip_address(name.strip("[]")):
                raise ValueError(f"--allowed-hosts: {name!r} is not a host name (give names without scheme or "
                                 "port, e.g. play.example.org,*.example.org).")
        self.any = "*" in names
        self.exact = frozenset(n.strip("[]") for n in names if not n.startswith("*."))
        self.suffixes = tuple(n[1:] for n in names if n.startswith("*."))  # "*.example.org" -> ".example.org"

    def allows(self, host_header: str | None) -> bool:
        if self.any:
            return True
        if not host_header:
            return False  # HTTP/1.1 requires Host; a request without one is no browser's
        host = split_host(host_header)
        return host in self.exact or host.endswith(self.suffixes) or is_ip_address(host)

    def describe(self) -> str:
        return ", ".join(sorted(self.exact | {"*" + s for s in self.suffixes})) + ", and IP addresses"


class AllowedHostsMiddleware:
    def __init__(self, app: ASGIApp, hosts: AllowedHosts) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"), None)
        if self.hosts.allows(host):
            await self.app(scope, receive, send)
            return
        log.info("refused a request for host %r (not in --allowed-hosts)", host)
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # before accept: answered 403
            return
        message = (f"This server does not answer to the host name {host!r}. If that is its real name, add it to "
                   f"--allowed-hosts (JAXPLAY_ALLOWED_HOSTS); it answers to {self.hosts.describe()}.")
        await PlainTextResponse(message, status_code=400)(scope, receive, send)
