"""Who may read ``/metrics``: never the whole world by default.

- ``off``: 404, as if there were no such page.
- ``loopback`` (default): only a client on this host, and not through a
  reverse proxy on this host (a request carrying ``Forwarded`` or
  ``X-Forwarded-For`` came from further away): 403 naming the setting.
- ``token``: ``Authorization: Bearer <JAXPLAY_METRICS_TOKEN>``, from anywhere
  (a Prometheus in a cluster scrapes pod IPs, never loopback).
"""

from __future__ import annotations

import hmac
import ipaddress

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from jaxplay.settings import Settings

MODES = ("off", "loopback", "token")
PROXY_HEADERS = ("forwarded", "x-forwarded-for", "x-real-ip")


def check_settings(settings: Settings) -> None:
    """Refuse to start with a setting that cannot work; the message names what to change."""
    if settings.metrics not in MODES:
        raise ValueError(f"--metrics must be one of {', '.join(MODES)}, not {settings.metrics!r}.")
    if settings.metrics == "token" and not settings.metrics_token:
        raise ValueError("--metrics token needs a token: set JAXPLAY_METRICS_TOKEN in the server's environment.")


def is_loopback(host: str | None) -> bool:
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def refusal(request: Request, settings: Settings) -> Response | None:
    """None if the request may read the metrics, else the response that refuses it."""
    if settings.metrics == "off":
        return PlainTextResponse("Metrics are off on this server (--metrics off).", status_code=404)
    if settings.metrics == "token":
        offered = request.headers.get("authorization", "")
        expected = f"Bearer {settings.metrics_token}"
        if hmac.compare_digest(offered.encode(), expected.encode()):
            return None
        return PlainTextResponse("Send 'Authorization: Bearer <token>' with the server's JAXPLAY_METRICS_TOKEN.",
                                 status_code=401, headers={"www-authenticate": "Bearer"})
    client = request.client.host if request.client else None
    if is_loopback(client) and not any(h in request.headers for h in PROXY_HEADERS):
        return None
    return PlainTextResponse("Metrics are readable from this host only (--metrics loopback); to scrape from "
                             "elsewhere start the server with --metrics token and JAXPLAY_METRICS_TOKEN.",
                             status_code=403)
