"""The /mcp tools: run, inspect, sharding, compare, share, runtimes, backends, and the sandbox's rules.

Each tool that executes code goes through ``AgentClient`` (agent_runs.py)
onto the one path of every run (server/runs/run_path.py), and takes the
run's flags: its deadline, a profile, a fresh run, and the JAX options and
XLA flags a browser's run may set (jaxplay/run_flags.py). Each answers
structured content (protocol.py) and a short text form (answers.py). A refusal (unknown runtime, code too
large, a client at its limit) is a tool error whose message is the one a
browser gets, naming what to change.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent

from jaxplay import __version__
from jaxplay.server.agents import answers
from jaxplay.server.agents.agent_runs import AgentClient, AgentRefusal, AgentRun, RunAsked
from jaxplay.server.agents.links import RunLinks
from jaxplay.server.agents.protocol import (
    BackendOffer,
    CompareAnswer,
    InspectAnswer,
    OfferAnswer,
    RunAnswer,
    RuntimeOffer,
    ShardingAnswer,
    ShareAnswer,
)
from jaxplay.server.agents.sandbox_rules import SANDBOX_RULES_URI, sandbox_rules
from jaxplay.server.clients.identity import ClientIdentity
from jaxplay.server.runs.run_path import RunPath

SCOPE_KEY = "jaxplay.agent"  # the ClientIdentity endpoint.py decided for the request
RUN_FIELDS = {"timeout_s": (int, float), "profile": bool, "fresh": bool}
# The run's JAX options and XLA flags, as the browser protocol's ``flags``: checked by RunPath.request.
FLAG_GROUPS = ("config", "xla")
MAX_COMPARED_RUNTIMES = 4
FLAGS_HELP = ("flags: {timeout_s, profile, fresh, config: {JAX option: value}, xla: {XLA flag: value}}, e.g. "
              "{\"config\": {\"jax_enable_x64\": true}, \"xla\": {\"xla_backend_optimization_level\": 1}}; the "
              "allowed options and flags are listed in the resource jaxplay://sandbox.")

INSTRUCTIONS = """\
JAX Playground: runs JAX programs in a sandbox on this server's workers and shows what JAX made of them.
Tools: run (output, error with its line, final value, a link to the recorded run), inspect (jaxpr, StableHLO,
HLO, cost, memory, recompile reasons of each compiled function), sharding (each shown array's layout),
compare (one program on several JAX versions), share (a permanent link), runtimes and backends (what is offered).
Each tool that runs code takes flags: a deadline, a profile, a fresh run, JAX options (config) and XLA flags (xla).
Read the resource jaxplay://sandbox for what a program may do here (libraries, limits, no network, the flags)."""


def answered(structured: dict[str, Any], text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def asked_with_flags(code: str, runtime: str | None, backend: str | None, flags: dict[str, Any] | None,
                     compare: bool = False) -> RunAsked:
    """What a tool call asked; its run fields checked here, its JAX options and XLA flags on the run path."""
    flags = flags or {}
    unknown = sorted(set(flags) - set(RUN_FIELDS) - set(FLAG_GROUPS))
    if unknown:
        raise ToolError(f"Unknown flag(s) {', '.join(map(repr, unknown))}: {FLAGS_HELP} An XLA flag goes in "
                        "flags.xla, a JAX option in flags.config.")
    for name, kinds in RUN_FIELDS.items():
        value = flags.get(name)
        if value is not None and (not isinstance(value, kinds) or (name == "timeout_s" and isinstance(value, bool))):
            raise ToolError(f"Flag {name!r} must be a {'number' if name == 'timeout_s' else 'boolean'}.")
    run_flags = {group: flags[group] for group in FLAG_GROUPS if flags.get(group) is not None}
    return RunAsked(code=code, backend=backend, runtime=runtime, timeout_s=flags.get("timeout_s"),
                    profile=bool(flags.get("profile")), fresh=bool(flags.get("fresh")), compare=compare,
                    flags=run_flags or None)


class AgentTools:
    def __init__(self, path: RunPath, links: RunLinks) -> None:
        self.path = path  # the one path of every run (server/runs/run_path.py)
        self.scheduler = path.scheduler
        self.links = links
        self.server = MCPServer("jaxplay", title="JAX Playground", version=__version__, instructions=INSTRUCTIONS,
                                log_level="WARNING")
        self._register()

    def client(self, ctx: Context) -> AgentClient:
        request = ctx.request_context.request
        identity = request.scope.get(SCOPE_KEY) if request is not None else None
        if not isinstance(identity, ClientIdentity):  # endpoint.py sets it on every request it lets through
            raise ToolError("This request did not come through the playground's /mcp endpoint.")
        return AgentClient(identity, self.path, str(request.base_url))

    async def _run(self, client: AgentClient, asked: RunAsked) -> AgentRun:
        try:
            return await client.execute(client.request_of(asked))
        except AgentRefusal as refusal:
            raise ToolError(str(refusal)) from None

    def _register(self) -> None:
        server = self.server

        @server.tool(description="Run a JAX program in the sandbox: its status, stdout and stderr (bounded), the "
                                 "error with its line, its final expression's value, and a link that opens the "
                                 "program and this recorded run in the browser. " + FLAGS_HELP)
        async def run(code: str, ctx: Context, runtime: str | None = None, backend: str | None = None,
                      flags: dict[str, Any] | None = None) -> Annotated[CallToolResult, RunAnswer]:
            asked = asked_with_flags(code, runtime, backend, flags)
            async with self.scope(ctx) as client:
                agent_run = await self._run(client, asked)
                link, note = await self.links.link_for(client, asked, agent_run)
            answer = answers.run_answer(agent_run, link, note)
            return answered(dict(answer), answers.run_text(answer))

        @server.tool(description="Compile and run a program, and answer each compiled function's jaxpr, "
                                 "StableHLO and HLO (bounded), XLA's cost and memory analyses, and why a function "
                                 "was compiled again. function: only the functions of that name. " + FLAGS_HELP)
        async def inspect(code: str, ctx: Context, function: str | None = None, runtime: str | None = None,
                          backend: str | None = None,
                          flags: dict[str, Any] | None = None) -> Annotated[CallToolResult, InspectAnswer]:
            asked = asked_with_flags(code, runtime, backend, flags)
            async with self.scope(ctx) as client:
                agent_run = await self._run(client, asked)
                link, note = await self.links.link_for(client, asked, agent_run)
            cut: list[str] = []
            functions = answers.compiled_functions(agent_run, function, cut)
            run_answer = answers.run_answer(agent_run, link, note)
            text = answers.run_text(run_answer) + "\n" + answers.functions_text(functions)
            return answered(dict(InspectAnswer(run=run_answer, functions=functions, cut=cut)), text)

        @server.tool(description="Run a program and answer the layout of each array it showed with "
                                 "playground.show_sharding(x) (or jax.debug.visualize_array_sharding): its "
                                 "PartitionSpec, mesh, and which device holds which block. " + FLAGS_HELP)
        async def sharding(code: str, ctx: Context, runtime: str | None = None, backend: str | None = None,
                           flags: dict[str, Any] | None = None) -> Annotated[CallToolResult, ShardingAnswer]:
            asked = asked_with_flags(code, runtime, backend, flags)
            async with self.scope(ctx) as client:
                agent_run = await self._run(client, asked)
                link, note = await self.links.link_for(client, asked, agent_run)
            arrays = answers.array_layouts(agent_run)
            run_answer = answers.run_answer(agent_run, link, note)
            text = "\n".join([answers.run_text(run_answer)] + [
                f"array line {a['line']}: {a['shape']} {a['dtype']} {a['sharding']} {a['spec']}\n{a['layout']}"
                for a in arrays] or ["No array was shown: call playground.show_sharding(x)."])
            return answered(dict(ShardingAnswer(run=run_answer, arrays=arrays)), text)

        @server.tool(description="Run one program on several JAX versions (see runtimes) and answer each one's "
                                 "output, and where their jaxpr, StableHLO and HLO differ (unified diffs). The flags apply to "
                                 "every runtime's run. " + FLAGS_HELP)
        async def compare(code: str, runtimes: list[str], ctx: Context, backend: str | None = None,
                          flags: dict[str, Any] | None = None) -> Annotated[CallToolResult, CompareAnswer]:
            if not 2 <= len(set(runtimes)) <= MAX_COMPARED_RUNTIMES:
                raise ToolError(f"Name 2 to {MAX_COMPARED_RUNTIMES} different runtimes to compare (the runtimes "
                                "tool lists them).")
            runs, by_runtime, cut = [], {}, []
            async with self.scope(ctx) as client:
                for runtime in dict.fromkeys(runtimes):  # one after another: one client's runs take turns anyway
                    asked = asked_with_flags(code, runtime, backend, flags, compare=True)
                    agent_run = await self._run(client, asked)
                    link, _ = await self.links.link_for(client, asked, agent_run)
                    runs.append(answers.runtime_run(runtime, agent_run, link))
                    by_runtime[runtime] = answers.compiled_functions(agent_run, None, cut)
            differences, alike = answers.ir_differences(by_runtime)
            same_output = len({(r["status"], r["stdout"], r["value"]) for r in runs}) == 1
            answer = CompareAnswer(runs=runs, same_output=same_output, differences=differences, same_ir=alike,
                                   cut=cut)
            text = "\n".join([f"{r['runtime']}: {r['status']}; stdout {r['stdout'][:200]!r}" for r in runs]
                             + [f"output {'the same' if same_output else 'differs'} across runtimes"]
                             + [f"{d['function']} {d['artifact']} differs:\n{d['diff']}" for d in differences])
            return answered(dict(answer), text)

        @server.tool(description="A permanent link to a program. with_run: run it first and include the "
                                 "recorded run, so the link opens on its output. The link keeps the flags: its page opens with "
                                 "them chosen. " + FLAGS_HELP)
        async def share(code: str, ctx: Context, with_run: bool = False, runtime: str | None = None,
                        backend: str | None = None,
                        flags: dict[str, Any] | None = None) -> Annotated[CallToolResult, ShareAnswer]:
            asked = asked_with_flags(code, runtime, backend, flags)
            async with self.scope(ctx) as client:
                run_answer = None
                if with_run:
                    agent_run = await self._run(client, asked)
                    snippet = await self.links.create(client, asked, agent_run.request, agent_run)
                    run_answer = answers.run_answer(agent_run, snippet["url"])
                else:
                    try:  # the same checks as a run's: its size, backend, runtime and flags
                        request = client.request_of(asked)
                    except AgentRefusal as refusal:
                        raise ToolError(str(refusal)) from None
                    snippet = await self.links.create(client, asked, request, None)
            answer = ShareAnswer(id=snippet["id"], url=snippet["url"], embed_url=snippet["embed_url"],
                                 with_run=with_run, run=run_answer)
            return answered(dict(answer), f"link: {snippet['url']}" + (" (with its recorded run)" if with_run
                                                                          else ""))

        @server.tool(description="The JAX versions this server runs programs on, per backend.")
        async def runtimes() -> Annotated[CallToolResult, OfferAnswer]:
            return await self.offer(runtimes_only=True)

        @server.tool(description="The backends (cpu, gpu, tpu) this server offers: device kind and count, JAX "
                                 "versions, the libraries a program can import, workers and queue.")
        async def backends() -> Annotated[CallToolResult, OfferAnswer]:
            return await self.offer(runtimes_only=False)

        @server.resource(SANDBOX_RULES_URI, name="sandbox", mime_type="text/markdown",
                         description="What a program may do on this server: libraries, limits, no network.")
        def sandbox() -> str:
            return sandbox_rules(self.scheduler)

    def scope(self, ctx: Context) -> _Entered:
        """The tool call's client, holding one of its connections while it lasts (``async with``)."""
        return _Entered(self.client(ctx))

    async def offer(self, runtimes_only: bool) -> CallToolResult:
        await self.scheduler.refresh_waiting()
        default = self.scheduler.default_backend()
        offers = [BackendOffer(
            name=b["name"], default=b["name"] == default, device_kind=b["device_kind"],
            device_count=b["device_count"], jax_version=b["jax_version"],
            runtimes=[RuntimeOffer(name=r["name"], jax_version=r["jax_version"], jaxlib_version=r["jaxlib_version"],
                                   default=r["default"]) for r in b["runtimes"] if r["workers"]],
            libraries={} if runtimes_only else dict(b["libraries"]), workers=b["workers"], queued=b["queued"])
            for b in self.scheduler.backends()]
        answer = OfferAnswer(backends=offers, default_backend=default)
        text = "\n".join(f"{b['name']}{' (default)' if b['default'] else ''}: {b['device_count']} x "
                         f"{b['device_kind']}; JAX " + ", ".join(r["name"] + (" (default)" if r["default"] else "")
                                                               for r in b["runtimes"]) for b in offers)
        return answered(json.loads(json.dumps(answer)), text or "No worker is connected yet.")


class _Entered:
    """``async with`` around an ``AgentClient`` that turns its refusal to attach into a tool error."""

    def __init__(self, client: AgentClient) -> None:
        self.client = client

    async def __aenter__(self) -> AgentClient:
        try:
            return await self.client.__aenter__()
        except AgentRefusal as refusal:
            raise ToolError(self.worded_for_an_assistant(refusal)) from None

    def worded_for_an_assistant(self, refusal: AgentRefusal) -> str:
        """The scheduler words its limit on a client's connections for tabs; an assistant holds tool calls."""
        client = self.client
        limit = client.scheduler.settings.max_connections_per_client
        held = client.scheduler.connections[client.session_id]
        if refusal.reason != "connection_limit" or held < limit:
            return str(refusal)  # the network's limit: its tabs and assistants together, as worded
        who = "This token already has" if client.session_id.startswith("agent:") else \
            "Calls without a token and the page's connections without its session cookie from your network have"
        return (f"{who} {held} tool calls or connections open here (the limit is {limit}, "
                "--max-connections-per-client); wait for one to answer before making another.")

    async def __aexit__(self, *exc_info: object) -> None:
        await self.client.__aexit__(*exc_info)
