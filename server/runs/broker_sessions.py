"""Browsers that come back: a browser session's runs in flight, kept in Redis (``jaxplay:session:<id>``), so
that a replica it reconnects to after its own one stopped can tell it how they ended.

The origin writes an entry when it pushes a run's job (in the same MULTI) and
deletes it at the run's ``done``; entries expire after a day in any case. An
entry is keyed by the run's own key, not the id its browser gave it: two tabs
of one browser may use the same id, and the end of one must not delete the
other's entry.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError

from jaxplay import browser_protocol as bp
from jaxplay.server.clients.identity import is_browser_session
from jaxplay.server.runs.broker_keys import PREFIX
from jaxplay.server.runs.broker_liveness import HEARTBEAT_S, HEARTBEAT_TTL_S
from jaxplay.server.runs.scheduler import Run

if TYPE_CHECKING:
    from jaxplay.server.runs.broker_state import BrokerState

log = logging.getLogger("jaxplay.broker")

SESSION_TTL_S = 24 * 3600
# A returning browser's old replica is judged within seconds; beyond this (Redis away?) it is not told.
RETURNING_WAIT_S = 60.0
ORIGIN_GONE = ("The server this page was connected to stopped while this run was in flight, so its result "
               "was lost; run it again.")


def session_key(session_id: str) -> str:
    return f"{PREFIX}session:{session_id}"


def remember(pipe: Any, origin: str, run: Run) -> None:
    """Add ``run``'s entry to its session's (in the caller's pipeline)."""
    pipe.hset(session_key(run.session_id), run.key,
              json.dumps({"origin": origin, "id": run.client_id, "backend": run.backend, "kind": run.request.kind}))
    pipe.expire(session_key(run.session_id), SESSION_TTL_S)


async def forget(broker: BrokerState, run: Run) -> None:
    try:
        assert broker.redis is not None
        await broker.redis.hdel(session_key(run.session_id), run.key)
    except (RedisError, OSError):
        pass


async def tell_returning_browser(broker: BrokerState, session_id: str, emit: Any,
                                 told: Callable[..., None] | None = None) -> None:
    """A browser connected to ``broker``'s replica: end the runs it had in flight on a replica that has since
    stopped.

    It often reconnects before that replica is judged gone: wait for the judgement (or for a heartbeat
    that shows the replica alive) rather than answer from a stale view. Every connection of the session
    that finds a run's entry is told; ``told(backend, status, kind=...)`` counts it once, by whichever replica's
    HDEL removed the entry (metrics: each outcome a browser is told, once per run)."""
    redis = broker.redis
    if not is_browser_session(session_id) or redis is None:
        return
    try:
        runs = await redis.hgetall(session_key(session_id))
    except (RedisError, OSError) as exc:
        log.warning("broker: could not look up session runs: %s", exc)
        return
    entries = {key: json.loads(raw) for key, raw in runs.items()}
    waiting = {key: entry["origin"] for key, entry in entries.items() if entry["origin"] != broker.id}
    started = time.monotonic()
    # A dead replica's heartbeat stays readable until it expires: only one read after that proves it alive.
    alive_after = started + HEARTBEAT_TTL_S + HEARTBEAT_S
    while waiting and time.monotonic() < started + RETURNING_WAIT_S:
        for key, origin in list(waiting.items()):
            if broker.liveness.is_gone(origin):
                # An entry of an older replica is keyed by the browser's id, and holds none.
                emit(bp.done_event(entries[key].get("id", key), bp.RunStatus.CRASHED, 0.0, ORIGIN_GONE))
                del waiting[key]
                try:
                    removed = await redis.hdel(session_key(session_id), key)
                except (RedisError, OSError):
                    removed = 0  # the entry stays: the next connection that finds it is told and counts it
                if removed and told is not None:
                    told(entries[key].get("backend"), bp.RunStatus.CRASHED, kind=entries[key].get("kind") or "run")
            elif broker.liveness.seen_at.get(origin, 0.0) > alive_after:
                del waiting[key]  # its replica is alive: it answers the run itself
        await asyncio.sleep(HEARTBEAT_S / 2)
