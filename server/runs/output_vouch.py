"""The server's word that a rich output came from a run of a given program on a worker it trusts.

A ``display`` event (HTML, an image) that a run sends through a worker the
server trusts leaves the server with a ``vouch``: an HMAC, under the server's
own key (``session.key``, the same on every replica), of the program's code
and the event's content. Nothing else can make one: a run's own ``vouch`` is
dropped before the server adds its own, and a browser never sees the key.

What it is for: a link's recorded run is the sharer's word (the browser sends
it, and anyone can send anything). When a link is created the server keeps a
display's ``vouch`` only if it checks against the link's code
(server/sharing/snippets.py), so a recorded run keeps a ``vouch`` exactly
where this server ran that code and saw that output. An exported notebook
(frontend/src/sharing/share_export.ts) carries HTML only where there is one;
text, PNG and SVG without scripts or handlers it carries from anyone.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

from jaxplay.server.clients.sessions import SessionKeys

VOUCHED_TYPES = frozenset({"display"})
FIELD = "vouch"
PURPOSE = "output-vouch"


def _content(code: str, event: dict[str, Any]) -> str:
    fields = {k: v for k, v in event.items() if k not in ("id", FIELD)}
    code_digest = hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()
    return code_digest + ":" + json.dumps(fields, sort_keys=True, separators=(",", ":"))


def vouched(keys: SessionKeys, code: str, event: dict[str, Any]) -> dict[str, Any]:
    """``event`` as a trusted worker's run of ``code`` sent it, with the server's ``vouch`` where it
    takes one (and never one of the run's own making)."""
    event = {k: v for k, v in event.items() if k != FIELD}
    if event.get("type") in VOUCHED_TYPES:
        event[FIELD] = keys.mac(PURPOSE, _content(code, event))
    return event


def unvouched(event: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k != FIELD}


def checks(keys: SessionKeys, code: str, event: dict[str, Any]) -> bool:
    """Whether ``event`` carries this server's ``vouch`` for a run of ``code``."""
    claimed = event.get(FIELD)
    return isinstance(claimed, str) and hmac.compare_digest(claimed, keys.mac(PURPOSE, _content(code, event)))
