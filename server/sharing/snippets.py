"""A shared snippet: its content, how a request's is checked, its id, and the store that keeps it.

A snippet is immutable. Its id is the shortest prefix (at least
``MIN_ID_CHARS``) of the base32 SHA-256 of its canonical content that no other
snippet holds: the same content always gets the same id (sharing twice makes
one link) and an id never names two contents (a colliding prefix is
lengthened, never reused). The stored JSON document is what GET answers,
byte for byte, forever.

Content: ``code``, ``backend``, ``settings`` (the run fields in effect, e.g.
``inspect``), ``recorded_run`` (the run's events, ending with ``done``, or
null), ``recorded_at``, ``forked_from`` and ``runtime`` (the JAX version its
recorded run used, or null; a document without it hashes as before). docs/protocol.md has the API;
its routes are ``create.py`` (POST) and ``serve.py`` (what a link serves). Nothing here speaks HTTP.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import re
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from jaxplay import json_input
from jaxplay.server.clients.sessions import SessionKeys
from jaxplay.server.runs import output_vouch
from jaxplay.server.storage.interface import Storage, Transaction, utc_timestamp
from jaxplay.settings import Settings

MIN_ID_CHARS = 8
ID_PATTERN = re.compile(r"[a-z2-7]{1,52}")
BACKEND_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]{0,31}")
MAX_SETTINGS_BYTES = 16 * 1024
CONTENT_FORMAT = b"jaxplay-snippet-v1\n"
FIELDS = ("code", "backend", "settings", "recorded_run", "recorded_at", "forked_from", "runtime")
# Fields a document leaves out when null, so content from before they existed keeps its hash and id.
OMITTED_WHEN_NULL = frozenset({"runtime"})
RUNTIME_PATTERN = re.compile(r"[0-9][0-9A-Za-z.+_-]{0,39}")


class SnippetError(Exception):
    """A request we cannot accept; ``status`` is its HTTP status, the message says what to change."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class SnippetContent:
    code: str
    backend: str | None
    settings: dict[str, Any]
    recorded_run: list[dict[str, Any]] | None
    recorded_at: str | None
    forked_from: str | None
    runtime: str | None = None

    def fields(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in FIELDS
                if not (name in OMITTED_WHEN_NULL and getattr(self, name) is None)}

    def same_program_and_run(self, other: dict[str, Any]) -> bool:
        """True if ``other`` (a stored document) differs from this content at most in ``forked_from``."""
        return all(other.get(name) == getattr(self, name) for name in FIELDS if name != "forked_from")

    def content_hash(self) -> str:
        canonical = json.dumps(self.fields(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        digest = hashlib.sha256(CONTENT_FORMAT + canonical.encode("utf-8", "surrogatepass")).digest()
        return base64.b32encode(digest).decode("ascii").rstrip("=").lower()


def json_size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))


def page_size(value: Any) -> int:
    """Bytes of ``value`` as a link's page holds it: JSON, with <, >, & and ' written as \\u003c and so on."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode("utf-8", "surrogatepass")) + 5 * sum(text.count(char) for char in "<>&'")


def parse_content(raw: bytes, settings: Settings) -> SnippetContent:
    """Validate a POST body; every problem is a ``SnippetError`` naming the field to change."""
    try:
        body = json_input.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SnippetError(400, f"The body is not valid JSON ({exc}); send one JSON object.") from None
    if not isinstance(body, dict):
        raise SnippetError(400, "The body must be a JSON object with at least a 'code' field.")
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise SnippetError(400, f"Unknown field(s) {', '.join(map(repr, unknown))}: a snippet has "
                                f"{', '.join(map(repr, FIELDS))}.")
    code = body.get("code")
    if not isinstance(code, str):
        raise SnippetError(400, "Field 'code' is required and must be a string.")
    code_bytes = len(code.encode("utf-8", "surrogatepass"))
    if code_bytes > settings.max_code_bytes:
        raise SnippetError(413, f"The code is {code_bytes} bytes; a snippet's code may be at most "
                                f"{settings.max_code_bytes} bytes ({settings.max_code_bytes // 1024} KiB).")
    if not code.strip():
        raise SnippetError(400, "Field 'code' is empty: there is nothing to share.")
    backend = body.get("backend")
    if backend is not None and (not isinstance(backend, str) or not BACKEND_PATTERN.fullmatch(backend)):
        raise SnippetError(400, "Field 'backend' must be a backend name such as 'cpu' (lowercase letters, "
                                "digits, '-', '_' or '.', at most 32), or null.")
    run_settings = body.get("settings", {})
    if run_settings is None:
        run_settings = {}
    if not isinstance(run_settings, dict):
        raise SnippetError(400, "Field 'settings' must be a JSON object (e.g. {\"inspect\": true}), or left out.")
    if json_size(run_settings) > MAX_SETTINGS_BYTES:
        raise SnippetError(413, f"Field 'settings' is over {MAX_SETTINGS_BYTES // 1024} KiB; keep only the run's options.")
    recorded_run = _recorded_run(body.get("recorded_run"), settings.max_recorded_run_bytes)
    recorded_at = _recorded_at(body.get("recorded_at"), recorded_run is not None)
    forked_from = body.get("forked_from")
    if forked_from is not None and (not isinstance(forked_from, str) or not ID_PATTERN.fullmatch(forked_from)):
        raise SnippetError(400, "Field 'forked_from' must be the id of a snippet (e.g. 'k3v9q2xa'), or null.")
    runtime = body.get("runtime")
    if runtime is not None and (not isinstance(runtime, str) or not RUNTIME_PATTERN.fullmatch(runtime)):
        raise SnippetError(400, "Field 'runtime' must be the JAX version the run used, such as '0.4.38', or null.")
    return SnippetContent(code=code, backend=backend, settings=run_settings, recorded_run=recorded_run,
                          recorded_at=recorded_at, forked_from=forked_from, runtime=runtime)


def with_checked_vouches(content: SnippetContent, keys: SessionKeys | None) -> SnippetContent:
    """The content with a recorded run's ``vouch`` kept only where this server gave it for a run of this
    code (server/runs/output_vouch.py): the sharer's own word vouches for nothing. An export carries a
    rich output's HTML only where it has one."""
    if content.recorded_run is None:
        return content
    events = [event if keys is not None and output_vouch.checks(keys, content.code, event)
              else output_vouch.unvouched(event) for event in content.recorded_run]
    return dataclasses.replace(content, recorded_run=events)


def _recorded_run(value: Any, limit: int) -> list[dict[str, Any]] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise SnippetError(400, "Field 'recorded_run' must be the list of a run's events (ending with "
                                "'done'), or null.")
    events = []
    for index, event in enumerate(value):
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise SnippetError(400, f"recorded_run[{index}] must be an event: an object with a string 'type'.")
        # The run id was the recording browser's; it means nothing to whoever opens the link.
        events.append({k: v for k, v in event.items() if k != "id"})
    if events[-1]["type"] != "done":
        raise SnippetError(400, "Field 'recorded_run' must end with the run's 'done' event; share after the run ends.")
    if any(e["type"] == "done" for e in events[:-1]):
        raise SnippetError(400, "Field 'recorded_run' holds more than one 'done': send the events of one run.")
    size = page_size(events)  # a run printing "<" a million times is six million bytes in the page
    if size > limit:
        raise SnippetError(413, f"The recorded run is {size / 2**20:.1f} MiB as a page shows it; at most "
                                f"{limit / 2**20:.0f} MiB can be shared. Share without the recorded run, or print less.")
    return events


def _recorded_at(value: Any, has_run: bool) -> str | None:
    if value is None:
        return None
    if not has_run:
        raise SnippetError(400, "Field 'recorded_at' is only meaningful with a 'recorded_run'.")
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        moment = None
    if moment is not None and moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        if moment is not None:
            return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except OverflowError:  # a time whose UTC equivalent falls outside years 1 to 9999
        pass
    raise SnippetError(400, "Field 'recorded_at' must be an ISO 8601 time such as '2025-05-01T12:00:00Z'.")


class SnippetStore:
    def __init__(self, storage: Storage, min_id_chars: int = MIN_ID_CHARS) -> None:
        self.storage = storage
        self.min_id_chars = min_id_chars
        self.created = 0  # new snippets since start, for the metrics

    async def create(self, content: SnippetContent) -> tuple[str, bool]:
        """Store ``content`` durably; returns (id, created). Existing content returns its id."""
        snippet_id, created = await self.storage.transaction(lambda tx: self._insert(tx, content), durable=True)
        self.created += created
        return snippet_id, created

    async def _insert(self, tx: Transaction, content: SnippetContent) -> tuple[str, bool]:
        if content.forked_from is not None:
            parent = await tx.fetch_one("SELECT document FROM snippets WHERE id = ?", (content.forked_from,))
            if parent is None:
                raise SnippetError(400, f"Field 'forked_from' names {content.forked_from!r}, which is no snippet "
                                        "on this server.")
            if content.same_program_and_run(json.loads(zlib.decompress(parent["document"]))):
                return content.forked_from, False  # nothing was edited: the link is the one it came from
        content_hash = content.content_hash()
        row = await tx.fetch_one("SELECT id FROM snippets WHERE content_hash = ?", (content_hash,))
        if row is not None:
            return row["id"], False
        for length in range(self.min_id_chars, len(content_hash) + 1):
            snippet_id = content_hash[:length]
            if await tx.fetch_one("SELECT 1 AS taken FROM snippets WHERE id = ?", (snippet_id,)) is None:
                break
        else:  # the whole hash is taken only by the same content, found above
            raise RuntimeError(f"no free id for content {content_hash}")
        created_at = utc_timestamp()
        document = {"id": snippet_id, "created_at": created_at, **content.fields()}
        encoded = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
        await tx.execute("INSERT INTO snippets (id, content_hash, created_at, forked_from, document) "
                         "VALUES (?, ?, ?, ?, ?)",
                         (snippet_id, content_hash, created_at, content.forked_from, zlib.compress(encoded, 6)))
        return snippet_id, True

    async def document(self, snippet_id: str) -> bytes | None:
        """The stored JSON, exactly as it was written, or None."""
        if not ID_PATTERN.fullmatch(snippet_id):
            return None
        row = await self.storage.fetch_one("SELECT document FROM snippets WHERE id = ?", (snippet_id,))
        return zlib.decompress(row["document"]) if row is not None else None

    async def missing(self, snippet_ids: list[str]) -> list[str]:
        """Those of ``snippet_ids`` that name no snippet, in their order: one query, nothing loaded or parsed
        (a deck may name one large snippet many times)."""
        wanted = [s for s in dict.fromkeys(snippet_ids) if ID_PATTERN.fullmatch(s)]
        found: set[str] = set()
        if wanted:
            marks = ", ".join("?" * len(wanted))
            rows = await self.storage.fetch_all(f"SELECT id FROM snippets WHERE id IN ({marks})", tuple(wanted))
            found = {row["id"] for row in rows}
        return [s for s in dict.fromkeys(snippet_ids) if s not in found]

    async def load(self, snippet_id: str) -> dict[str, Any] | None:
        document = await self.document(snippet_id)
        return json.loads(document) if document is not None else None
