"""HTTP side of workshop rooms: ``POST /api/rooms``, the room page ``/r/{code}`` and its embed ``/e/r/{code}``.

The presenter link carries the secret in the URL fragment (``#presenter=...``),
which browsers never send to a server: it stays out of access logs and
Referer headers. The page reads it and presents it over /ws.
"""

from __future__ import annotations

import html

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from jaxplay import browser_protocol as bp
from jaxplay import json_input
from jaxplay.server.clients.identity import identity_of
from jaxplay.server.pages.editor import render_page
from jaxplay.server.rooms.codes import AddressLimit, normalize_code
from jaxplay.server.rooms.hub import RoomError, RoomHub, TooManyCodeTries
from jaxplay.server.sharing.create import read_body
from jaxplay.server.sharing.snippets import SnippetError

MAX_BODY_BYTES = 512 * 1024
ROOMS_PER_ADDRESS_PER_MINUTE = 10


def message_page(title: str, text: str, status: int) -> HTMLResponse:
    body = (
        f"<!doctype html><meta charset=utf-8><title>{html.escape(title)} · JAX Playground</title>"
        "<meta name=viewport content='width=device-width, initial-scale=1'>"
        "<body style='font:15px/1.5 system-ui,sans-serif;max-width:36em;margin:12vh auto;padding:0 20px'>"
        f"<h1 style='font-size:22px'>{html.escape(title)}</h1><p>{html.escape(text)}</p>"
        "<form action='/r' method='get' style='margin:18px 0'><label>Room code "
        "<input name='code' placeholder='jax-7Q4KM2' autocomplete='off' style='font:inherit'></label> "
        "<button style='font:inherit'>Join</button></form>"
        "<p><a href='/'>Open the playground</a></p>"
    )
    return HTMLResponse(body, status_code=status)


def room_routes(hub: RoomHub) -> list[Route]:
    creations = AddressLimit(ROOMS_PER_ADDRESS_PER_MINUTE)

    async def create_room(request: Request) -> Response:
        address = identity_of(request.scope).network
        if not creations.allowed(address):
            return JSONResponse({"message": f"At most {ROOMS_PER_ADDRESS_PER_MINUTE} rooms a minute may be started "
                                            "from one address; wait a minute."}, status_code=429)
        try:
            raw = await read_body(request, MAX_BODY_BYTES)
            body = json_input.loads(raw) if raw.strip() else {}  # bounded nesting: no RecursionError
        except SnippetError as exc:
            return JSONResponse({"message": str(exc)}, status_code=exc.status)
        except ValueError as exc:
            return JSONResponse({"message": f"The body is not valid JSON ({exc}); send one JSON object."}, 400)
        problem = _body_problem(body, hub.settings.max_code_bytes)
        if problem:
            return JSONResponse({"message": problem}, status_code=400)
        creations.record(address)  # before the deck is looked up: a room that fails costs a lookup too
        try:
            room, secret = await hub.create(body.get("program", ""), body.get("deck", []),
                                            body.get("attendee_timeout_s"))
        except RoomError as exc:
            return JSONResponse({"message": str(exc)}, status_code=400)
        base = str(request.base_url).rstrip("/")
        return JSONResponse({"room": room.code, "secret": secret, "url": f"{base}/r/{room.code}",
                             "presenter_url": f"{base}/r/{room.code}#presenter={secret}",
                             "embed_url": f"{base}/e/r/{room.code}",
                             "attendee_timeout_s": room.record.attendee_timeout_s}, status_code=201)

    def page(mode: str):  # noqa: ANN202 - a route handler
        async def handler(request: Request) -> Response:
            text = request.path_params.get("code") or request.query_params.get("code", "")
            code = normalize_code(text)
            if code is not None and code != text:
                prefix = "/e/r/" if mode == "embed" else "/r/"
                return RedirectResponse(prefix + code, status_code=302)
            if code is not None and hub.short_code_ended(code):
                # Looked up only over /ws, where a presenter's secret (in this link's fragment) moves the room
                # to a new code; anyone else is told the code ended. The page itself tells nothing.
                return render_page({"mode": mode, "snippet": None, "room": {"code": code},
                                    "page_title": f"Room {code} · JAX Playground"})
            client = identity_of(request.scope)
            try:
                room = await hub.find(text, client.key, client.network)
            except TooManyCodeTries as exc:
                return message_page("Too many tries", str(exc), 429)
            except RoomError as exc:
                return message_page(f"No room {code or text.strip()[:32]}", str(exc), 404)
            return render_page({"mode": mode, "snippet": None, "room": {"code": room.code},
                                "page_title": f"Room {room.code} · JAX Playground"})
        return handler

    return [
        Route("/api/rooms", create_room, methods=["POST"]),
        Route("/r", page("editor"), methods=["GET"]),
        Route("/r/{code}", page("editor"), methods=["GET"]),
        Route("/e/r/{code}", page("embed"), methods=["GET"]),
    ]


def _body_problem(body: object, max_code_bytes: int) -> str | None:
    if not isinstance(body, dict):
        return "The body must be a JSON object: {\"program\": ..., \"deck\": [...], \"attendee_timeout_s\": ...}."
    unknown = sorted(set(body) - {"program", "deck", "attendee_timeout_s"})
    if unknown:
        return f"Unknown field(s) {', '.join(map(repr, unknown))}: a room takes 'program', 'deck', 'attendee_timeout_s'."
    program = body.get("program", "")
    if not isinstance(program, str):
        return f"Field 'program' must be the starting code, at most {max_code_bytes} bytes."
    try:
        if bp.text_bytes(program, "program") > max_code_bytes:
            return f"Field 'program' must be the starting code, at most {max_code_bytes} bytes."
    except bp.ProtocolError as exc:
        return str(exc)
    deck = body.get("deck", [])
    if not isinstance(deck, list) or len(deck) > 200 or not all(isinstance(s, str) and s for s in deck):
        return "Field 'deck' must be a list of at most 200 snippet ids."
    timeout = body.get("attendee_timeout_s")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float)):
        return "Field 'attendee_timeout_s' must be a number of seconds, or left out."
    return None
