"""``POST /api/snippets``: a new link, within the budgets of the network that asks.

The snippet itself (its content, checks, id and store) is ``snippets.py``;
reading one back is ``serve.py``. Links are kept forever and a large one
costs about a second to parse, so each network (an IPv6 /48, one IPv4
address) may create ``--snippets-per-address-per-hour`` links of
``--snippet-mb-per-address-per-hour`` MiB; past either the answer is 429
saying which.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from jaxplay.server.clients.budgets import Budgets
from jaxplay.server.clients.identity import identity_of
from jaxplay.server.clients.sessions import SessionKeys
from jaxplay.server.sharing.snippets import SnippetError, SnippetStore, parse_content, with_checked_vouches
from jaxplay.settings import Settings

# JSON may spell a character in up to six bytes (\u00e9); a body larger than this cannot be within the limits.
JSON_ESCAPE_FACTOR = 6


def error_response(status: int, message: str) -> JSONResponse:
    return JSONResponse({"message": message}, status_code=status)


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise SnippetError(413, f"The request body is {declared} bytes; at most {limit} are accepted.")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise SnippetError(413, f"The request body is over {limit} bytes; share less.")
    return bytes(body)


class LinkBudgets:
    """Links are kept forever and a large one costs a second of parsing: both are budgeted per network,
    for every way a link is made (this route, and an assistant's at /mcp: server/agents/links.py)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.links = Budgets(per_hour=settings.snippets_per_address_per_hour)
        self.mib = Budgets(per_hour=settings.snippet_mb_per_address_per_hour)

    def spend(self, network: str, size_mib: float) -> None:
        """Spend one link of ``size_mib`` of ``network``'s budgets; ``SnippetError`` (429) saying which is spent."""
        if not self.links.allows(network):
            raise SnippetError(429, f"This address has created {self.settings.snippets_per_address_per_hour} links "
                                    "in the last hour, the most it may; wait a few minutes.")
        if not self.mib.allows(network, size_mib):
            raise SnippetError(429, f"This link is {size_mib:.1f} MiB, and this address has shared nearly "
                                    f"{self.settings.snippet_mb_per_address_per_hour} MiB in the last hour, the most "
                                    "it may; wait a few minutes, or share without the recorded run.")
        self.links.spend(network), self.mib.spend(network, size_mib)


def snippet_routes(store: SnippetStore, settings: Settings, budgets: LinkBudgets | None = None,
                   keys: SessionKeys | None = None) -> list[Route]:
    """``keys``: the server's, to check the vouches of a recorded run's rich outputs (none: every vouch goes)."""
    body_limit = JSON_ESCAPE_FACTOR * settings.max_code_bytes + 2 * settings.max_recorded_run_bytes + (1 << 20)
    budgets = budgets or LinkBudgets(settings)

    async def create_snippet(request: Request) -> Response:
        network = identity_of(request.scope).network
        try:
            raw = await read_body(request, body_limit)
            budgets.spend(network, len(raw) / 2**20)
            content = with_checked_vouches(parse_content(raw, settings), keys)
            snippet_id, created = await store.create(content)
        except SnippetError as exc:
            return error_response(exc.status, str(exc))
        base = str(request.base_url).rstrip("/")
        return JSONResponse({"id": snippet_id, "url": f"{base}/s/{snippet_id}", "embed_url": f"{base}/e/{snippet_id}",
                             "created": created}, status_code=201)  # the contract, new or not

    return [Route("/api/snippets", create_snippet, methods=["POST"])]  # reading one: serve.py
