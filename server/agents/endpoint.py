"""``/mcp``: the Streamable HTTP transport of the Model Context Protocol, behind this server's own checks.

Every request, before the SDK sees it:

- its ``Host`` is an allowed name (``AllowedHostsMiddleware``, outside the
  app, as for every request) and its ``Origin``, when it sends one, is this
  server's own page (``same_origin.origin_allowed``): the transport's guard
  against DNS rebinding, which the MCP spec asks of a server. A browser page
  of another site can neither read answers nor spend a network's budgets.
- it names its client: ``Authorization: Bearer <token>`` of a token the
  operator issued (``jaxplay tokens add``), which is the client
  ``agent:<name>``; or, with ``--mcp-anonymous``, no header at all, which is
  its network's address client (server/clients/identity.py), shared with
  every browser of that network without the session cookie. A token nobody
  issued, or one removed, is refused with 401, whatever the setting.

The transport is stateless with JSON answers: each POST is one JSON-RPC
message answered in full, so a request holds nothing between calls and any
replica may answer it, and there is no stream to listen on (a GET is 405).
The SDK's session manager runs inside the app's lifespan (``running``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import anyio
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.responses import JSONResponse
from starlette.types import Message, Receive, Scope, Send

from jaxplay.server.agents.tokens import TokenStore
from jaxplay.server.agents.tools import SCOPE_KEY, AgentTools
from jaxplay.server.clients.identity import ClientIdentity, address_client, identity_of
from jaxplay.server.clients.same_origin import origin_allowed
from jaxplay.server.storage.interface import StorageError
from jaxplay.settings import Settings

log = logging.getLogger("jaxplay.agents")

AGENT_CLIENT_PREFIX = "agent:"
# JSON may spell a character in up to six bytes; beyond this a request cannot hold a program within the limit.
JSON_ESCAPE_FACTOR = 6


def refusal(status: int, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": message}},
                        status_code=status, headers=headers)


class AgentEndpoint:
    def __init__(self, settings: Settings, tools: AgentTools, tokens: TokenStore) -> None:
        self.settings = settings
        self.tools = tools
        self.tokens = tokens
        self.max_body_bytes = JSON_ESCAPE_FACTOR * settings.max_code_bytes + (1 << 20)
        self.manager = StreamableHTTPSessionManager(
            app=tools.server._lowlevel_server, json_response=True, stateless=True,
            max_request_body_size=self.max_body_bytes)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self.manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        origin = headers.get("origin")
        if not origin_allowed(origin, headers.get("host"), scope.get("scheme") == "https"):
            log.info("refused an /mcp request from the page %r", origin)
            await refusal(403, f"This request came from the page {origin!r}, not from this server's own pages: "
                               "other sites may not call /mcp. Assistants send no Origin header.")(scope, receive, send)
            return
        identity = await self.identify(headers.get("authorization"), identity_of(scope))
        if isinstance(identity, JSONResponse):
            await identity(scope, receive, send)
            return
        if scope["method"] == "GET":
            # A stateless server has nothing to send outside an answer; the SDK would hold the stream open
            # forever, a connection no limit counts. 405 is the spec's word for "no stream here".
            await refusal(405, "This server's /mcp is stateless: it answers each POST in full and offers no stream "
                               "to listen on; send requests as POSTs.", Allow="POST")(scope, receive, send)
            return
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:  # one sent in chunks: the SDK counts them
            await refusal(413, f"This request is {int(declared)} bytes; /mcp takes at most {self.max_body_bytes} "
                               f"(a program is at most {self.settings.max_code_bytes} bytes here: send a shorter "
                               "one).")(scope, receive, send)
            return
        scope[SCOPE_KEY] = identity
        await self.answer_unless_gone(scope, receive, send)

    async def answer_unless_gone(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The SDK's answer; cancelled, with the tool call and so its runs, when the assistant hangs up before
        it. The transport itself never listens for that once it has read the request, so a run would go on
        for nobody, holding its client's place in the queue."""
        body_read = anyio.Event()
        answered = False

        async def receive_body() -> Message:
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body", False):
                body_read.set()
            return message

        async def send_answer(message: Message) -> None:
            nonlocal answered
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                answered = True  # before it is sent: the server then reports a disconnect for every request
            await send(message)

        async with anyio.create_task_group() as waiting:
            async def hang_up() -> None:
                await body_read.wait()
                if (await receive())["type"] == "http.disconnect" and not answered:
                    log.info("%s hung up before its answer; its tool call is cancelled", scope[SCOPE_KEY].key)
                    waiting.cancel_scope.cancel()

            waiting.start_soon(hang_up)
            await self.manager.handle_request(scope, receive_body, send_answer)
            waiting.cancel_scope.cancel()

    async def identify(self, authorization: str | None, asker: ClientIdentity) -> ClientIdentity | JSONResponse:
        """The client a request counts as, or the answer refusing it."""
        network = asker.network
        if authorization is None:
            if self.settings.mcp_anonymous:
                return address_client(network)
            return refusal(401, "This server's /mcp needs a token: send 'Authorization: Bearer <token>' with a token "
                                "its operator issued (jaxplay tokens add NAME).", **{"WWW-Authenticate": "Bearer"})
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return refusal(401, "Send the token as 'Authorization: Bearer <token>'.",
                           **{"WWW-Authenticate": "Bearer"})
        try:
            name = await self.tokens.name_of(token.strip())
        except StorageError as exc:
            return refusal(503, f"Tokens cannot be checked now: {exc}")
        if name is None:
            log.info("refused an /mcp request of %s: a token nobody issued, or one removed", network)
            return refusal(401, "This token is not one this server issued, or it was removed; ask the operator for "
                                "a new one (jaxplay tokens add NAME).",
                           **{"WWW-Authenticate": 'Bearer error="invalid_token"'})
        return ClientIdentity(key=AGENT_CLIENT_PREFIX + name, network=network)

