"""Links an assistant hands its person: the program with its recorded run, as the page's Share makes them.

A link is a snippet (server/sharing/snippets.py) holding the code, the run's
fields, and the run's events as the page received them, so ``/s/{id}``
opens the editor on that recorded run. Links are kept forever, so an
assistant's are budgeted per network as the page's are
(``--snippets-per-address-per-hour``, ``--snippet-mb-per-address-per-hour``), in the same budgets;
past them a run is still answered, with a note instead of a link.
"""

from __future__ import annotations

import logging
from typing import Any

from jaxplay import worker_protocol as wp
from jaxplay.server.agents.agent_runs import AgentClient, AgentRun, RunAsked
from jaxplay.server.sharing.create import LinkBudgets
from jaxplay.server.sharing.snippets import SnippetContent, SnippetError, SnippetStore, page_size
from jaxplay.server.storage.interface import StorageError, utc_timestamp
from jaxplay.settings import Settings

log = logging.getLogger("jaxplay.agents")


class LinkRefused(Exception):
    """No link now (a budget spent, the database away); the message says why."""


class RunLinks:
    def __init__(self, snippets: SnippetStore, settings: Settings, budgets: LinkBudgets) -> None:
        self.snippets = snippets
        self.settings = settings
        self.budgets = budgets  # the page's own: a network's links count together, however they are made

    async def create(self, client: AgentClient, asked: RunAsked, request: wp.RunRequest,
                     run: AgentRun | None) -> dict[str, str]:
        """A link to ``asked.code`` as ``request`` runs it (with ``run``'s recorded events when given);
        ``ToolError`` when refused."""
        from mcp.server.mcpserver.exceptions import ToolError

        try:
            return await self._create(client, asked, request, run)
        except LinkRefused as refused:
            raise ToolError(str(refused)) from None

    async def link_for(self, client: AgentClient, asked: RunAsked, run: AgentRun) -> tuple[str | None, str | None]:
        """(a link to the recorded run, None), or (None, why there is none)."""
        if run.done.get("status") == "rejected":
            return None, "the run was refused, so there is nothing recorded to link to"
        try:
            return (await self._create(client, asked, run.request, run))["url"], None
        except LinkRefused as refused:
            return None, str(refused)

    async def _create(self, client: AgentClient, asked: RunAsked, request: wp.RunRequest,
                      run: AgentRun | None) -> dict[str, str]:
        started: dict[str, Any] = next((e for e in run.events if e.get("type") == "started"), {}) if run else {}
        # The run fields, as the page keeps them in a link: its page opens with the same flags chosen.
        settings: dict[str, Any] = {"inspect": asked.inspect} | ({"profile": True} if asked.profile else {})
        if request.options.flags:
            settings["flags"] = request.options.flags.plain()
        recorded = run.events if run is not None else None
        if recorded is not None and page_size(recorded) > self.settings.max_recorded_run_bytes:
            raise LinkRefused(f"the recorded run is over {self.settings.max_recorded_run_bytes >> 20} MiB as a page "
                              "shows it; print less, or share the code alone")
        content = SnippetContent(code=asked.code, backend=started.get("backend") or asked.backend, settings=settings,
                                 recorded_run=recorded, recorded_at=utc_timestamp() if recorded else None,
                                 forked_from=None, runtime=started.get("runtime"))
        try:
            self.budgets.spend(client.network, page_size(content.fields()) / 2**20)
            snippet_id, _ = await self.snippets.create(content)
        except SnippetError as exc:  # a budget spent: the page's own words
            raise LinkRefused(str(exc)) from None
        except StorageError as exc:
            log.info("no link for an agent's run: %s", exc)
            raise LinkRefused(f"the link could not be stored: {exc}") from None
        base = client.base_url.rstrip("/")
        return {"id": snippet_id, "url": f"{base}/s/{snippet_id}", "embed_url": f"{base}/e/{snippet_id}"}
