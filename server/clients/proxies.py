"""Where a request comes from: the peer, or what a trusted reverse proxy says about the client behind it.

``X-Forwarded-For`` and ``Forwarded`` are words anyone can write. They are
read only when the peer itself is a configured trusted proxy
(``--trusted-proxies``: addresses and networks), and only the one header
the operator says the proxy writes (``--trusted-proxy-header``): a proxy
that appends to ``X-Forwarded-For`` passes a client's own ``Forwarded``
through untouched, so reading both would let the client choose.

The client is the rightmost address in the header that is not itself a
trusted proxy: a proxy appends the address it saw, so what stands left of
that is whatever the client sent. The scheme (https) is taken from the same
proxy's ``X-Forwarded-Proto`` or ``proto=``; without a trusted proxy it is
the connection's own. ``ClientAddressMiddleware`` rewrites the ASGI scope's
``client`` and ``scheme``, so every later layer (session cookies, limits,
links built from ``base_url``) sees the judged values. uvicorn's own proxy
handling, which trusts loopback peers, is turned off (jaxplay/cli/commands.py).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from starlette.types import ASGIApp, Receive, Scope, Send

HEADERS = ("x-forwarded-for", "forwarded")
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(text: str, setting: str = "--trusted-proxies") -> tuple[IPNetwork, ...]:
    """``"10.0.0.0/8, 192.0.2.7"`` -> networks; a word that is no address names the setting to fix."""
    networks = []
    for word in (w.strip() for w in text.split(",")):
        if not word:
            continue
        try:
            networks.append(ipaddress.ip_network(word, strict=False))
        except ValueError:
            raise ValueError(f"{setting}: {word!r} is not an IP address or network (e.g. 10.0.0.0/8 or "
                             "192.0.2.7); separate several with commas.") from None
    return tuple(networks)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An address as proxies write it: ``1.2.3.4``, ``1.2.3.4:5678``, ``[2001:db8::1]:80``, ``"[::1]"``."""
    text = text.strip().strip('"')
    if text.startswith("["):
        text = text[1:].split("]", 1)[0]
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return mapped or address


class TrustedProxies:
    def __init__(self, networks: Sequence[IPNetwork], header: str = "x-forwarded-for") -> None:
        if header not in HEADERS:
            raise ValueError(f"--trusted-proxy-header must be one of {', '.join(HEADERS)}, not {header!r}.")
        self.networks = tuple(networks)
        self.header = header

    def trusts(self, host: str | None) -> bool:
        address = _address(host) if host else None
        return address is not None and any(address in network for network in self.networks)

    def judge(self, peer: str | None, headers: dict[str, str], scheme: str) -> tuple[str | None, str]:
        """(client address, "http" or "https") for a request from ``peer`` with these (lower-case) headers."""
        if not self.networks or not self.trusts(peer):
            return peer, scheme
        if self.header == "forwarded":
            hops = _forwarded_elements(headers.get("forwarded", ""))
            chain = [hop.get("for", "") for hop in hops]
            protos = [hop.get("proto", "") for hop in hops]
        else:
            chain = [h for h in headers.get("x-forwarded-for", "").split(",") if h.strip()]
            protos = [p for p in headers.get("x-forwarded-proto", "").split(",") if p.strip()]
        client = peer
        for hop in reversed(chain):
            address = _address(hop)
            if address is None:  # "unknown" or an obfuscated name: the proxy cannot say; count it as the proxy
                break
            client = str(address)
            if not any(address in network for network in self.networks):
                break
        forwarded_scheme = protos[-1].strip().lower() if protos else ""
        return client, forwarded_scheme if forwarded_scheme in ("http", "https") else scheme


def _forwarded_elements(value: str) -> list[dict[str, str]]:
    """RFC 7239: ``for=192.0.2.1;proto=https, for="[2001:db8::1]"`` -> one dict per element."""
    elements = []
    for element in value.split(","):
        pairs = {}
        for pair in element.split(";"):
            name, _, text = pair.partition("=")
            if name.strip():
                pairs[name.strip().lower()] = text.strip().strip('"')
        if pairs:
            elements.append(pairs)
    return elements


class ClientAddressMiddleware:
    """Rewrites ``scope["client"]`` and ``scope["scheme"]`` from a trusted proxy's headers."""

    def __init__(self, app: ASGIApp, proxies: TrustedProxies) -> None:
        self.app = app
        self.proxies = proxies

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and self.proxies.networks:
            peer = scope["client"][0] if scope.get("client") else None
            headers: dict[str, str] = {}
            for name, value in scope.get("headers", []):
                if name.lower() in (b"x-forwarded-for", b"x-forwarded-proto", b"forwarded"):
                    key = name.decode("latin-1").lower()  # repeated lines are one comma-separated list
                    headers[key] = f"{headers[key]},{value.decode('latin-1')}" if key in headers \
                        else value.decode("latin-1")
            secure = scope.get("scheme") in ("https", "wss")
            client, scheme = self.proxies.judge(peer, headers, "https" if secure else "http")
            if client != peer:
                scope["client"] = (client, 0)
            if scope["type"] == "websocket":
                scope["scheme"] = "wss" if scheme == "https" else "ws"
            else:
                scope["scheme"] = scheme
        await self.app(scope, receive, send)
