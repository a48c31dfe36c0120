"""Who a request counts as: one client, and the network it comes from.

A *client* is what fairness, limits and room counts key on. It is a browser
session (its signed cookie, server/clients/sessions.py) when the request
carries one, and otherwise the *address client* of its network: every
connection without a session cookie from one network is one client, sharing
that client's limits (connections, runs, unknown room codes). A script
therefore cannot multiply itself by leaving the cookie out, and it cannot
mint sessions faster than its network's budget (``new_sessions_per_address_per_hour``).

The *network* is the unit per-address limits count, and the first level of
the run queue's fairness (server/runs/fair_queue.py): an IPv4 address, or
the /48 prefix of an IPv6 address. A site (a home, an office, anyone with a
free tunnel-broker account) is given a /48 or a /56 of one, so counting /64s
would let it be 65,536 networks, each with its own turn and budgets: enough to
fill the queue with one run apiece, which no other network's run could then
displace. A /48 is what one IPv4 address behind NAT is: a site, its people
its clients. The address is the client's as the trusted proxies report it
(server/clients/proxies.py), never what an untrusted client claims.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SCOPE_KEY = "jaxplay.client"
ADDRESS_CLIENT_PREFIX = "address:"
IPV6_NETWORK_BITS = 48


@dataclass(frozen=True)
class ClientIdentity:
    key: str  # a browser session id, or "address:<network>" for a request without a session cookie
    network: str  # the client's IPv4 address or IPv6 /48: what per-address limits count

    @property
    def browser_session(self) -> bool:
        return is_browser_session(self.key)


def is_browser_session(key: str) -> bool:
    """True for a signed browser session, False for an address client (and the in-process "")."""
    return bool(key) and not key.startswith(ADDRESS_CLIENT_PREFIX)


def network_of(host: str | None) -> str:
    """``203.0.113.7`` -> itself; ``2001:db8:1:2:a:b:c:d`` -> ``2001:db8:1::/48``; anything else as given."""
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, IPV6_NETWORK_BITS), strict=False))
    return str(address)


def address_client(network: str) -> ClientIdentity:
    return ClientIdentity(key=ADDRESS_CLIENT_PREFIX + network, network=network)


def identity_of(scope: Mapping[str, Any]) -> ClientIdentity:
    """Who an ASGI scope's request counts as: what ``SessionMiddleware`` decided, or, in an app built
    without it (in-process tests), its peer's address client."""
    identity = scope.get(SCOPE_KEY)
    if identity is None:
        client = scope.get("client")
        identity = address_client(network_of(client[0] if client else None))
    return identity
