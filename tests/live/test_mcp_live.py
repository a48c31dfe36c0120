"""/mcp on a real server and sandbox, driven by the MCP SDK's own client over Streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
import websockets

from tests.live.faults import cache_entries, metric_total, run_until_stored, wait_until
from tests.live_server import PROJECT_ROOT, LiveServer, collect, done_of, output_text, running_server
from tests.mcp_client import call, call_tool, issue_token, mcp_session, tokens_command
from tests.runtimes_server import runtimes_server
from tests.security.test_compile_cache_trust import CRAFT, HONEST, HONEST_OUTPUT, POISONED_OUTPUT

pytestmark = pytest.mark.live

# The program the editor opens with, which `make run`'s page offers a new visitor.
DEFAULT_EXAMPLE = (PROJECT_ROOT / "frontend" / "src" / "examples" / "default.py").read_text()

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "0"}}}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    with runtimes_server() as live:
        yield live


@pytest.fixture(scope="module")
def token(server: LiveServer) -> str:
    return issue_token(server.log_path.parent, "assistant")


def structured(result) -> dict:
    assert not result.is_error, result.content[0].text
    return result.structured_content


def test_every_tool_answers_structured_content_and_a_short_text(server: LiveServer, token: str) -> None:
    async def scenario():
        async with mcp_session(server.http_url, token) as session:
            tools = {t.name for t in (await session.list_tools()).tools}
            run = await session.call_tool("run", {"code": DEFAULT_EXAMPLE})
            inspect = await session.call_tool("inspect", {"code": DEFAULT_EXAMPLE, "function": "update"})
            sharding = await session.call_tool("sharding", {"code": SHARDED})
            compare = await session.call_tool("compare", {"code": COMPARED, "runtimes": ["0.4.38", "0.6.2"]})
            share = await session.call_tool("share", {"code": "print('shared')"})
            share_run = await session.call_tool("share", {"code": "print('shared with run')", "with_run": True})
            offered = await session.call_tool("runtimes", {})
            backends = await session.call_tool("backends", {})
            rules = await session.read_resource("jaxplay://sandbox")
            return tools, run, inspect, sharding, compare, share, share_run, offered, backends, rules

    tools, run, inspect, sharding, compare, share, share_run, offered, backends, rules = asyncio.run(scenario())
    assert {"run", "inspect", "sharding", "compare", "share", "runtimes", "backends"} <= tools

    answer = structured(run)
    assert answer["status"] == "ok" and answer["backend"] == "cpu" and answer["devices"] == "8 x cpu"
    assert "step 7: loss" in answer["stdout"] and "per-example loss:" in answer["stdout"]
    assert "Array(" in answer["value"] and answer["error"] is None and answer["cut"] == []
    assert answer["link"].startswith(server.http_url + "/s/")
    text = run.content[0].text
    assert text.startswith("status: ok") and "step 7: loss" in text and f"link: {answer['link']}" in text
    # The link holds the program and its recorded run, as the page's Share makes it.
    snippet = server.get_json("/api/snippets/" + answer["link"].rsplit("/", 1)[1])
    assert snippet["code"] == DEFAULT_EXAMPLE and snippet["recorded_run"][-1]["status"] == "ok"
    assert "step 7: loss" in "".join(e.get("text", "") for e in snippet["recorded_run"] if e["type"] == "stdout")

    functions = structured(inspect)["functions"]
    assert functions and {f["function"] for f in functions} == {"update"}
    update = functions[0]
    assert update["hlo"].startswith("HloModule jit_update") and "dot" in update["hlo"]
    assert "stablehlo.dot_general" in update["stablehlo"] and "dot_general" in update["jaxpr"]
    assert update["cost"]["flops"] > 0 and update["memory"] is not None and update["line"] == 11
    assert "HloModule jit_update" in inspect.content[0].text

    arrays = structured(sharding)["arrays"]
    assert len(arrays) == 1 and arrays[0]["shape"] == [8, 4] and "'x'" in arrays[0]["spec"]
    assert arrays[0]["layout"].count("device ") == 8 and "device 0: [0:1, 0:4]" in arrays[0]["layout"]

    compared = structured(compare)
    assert [r["runtime"] for r in compared["runs"]] == ["0.4.38", "0.6.2"]
    stdouts = [r["stdout"] for r in compared["runs"]]
    assert all(r["status"] == "ok" for r in compared["runs"]) and all(o.startswith("48.7420") for o in stdouts)
    assert compared["same_output"] == (stdouts[0] == stdouts[1])  # two XLAs may round the last digit apart
    assert {d["artifact"] for d in compared["differences"]} & {"stablehlo", "hlo"}  # two XLAs lower differently
    assert all(d["diff"].startswith("--- 0.4.38\n+++ 0.6.2") for d in compared["differences"])

    link = structured(share)
    assert link["url"] == f"{server.http_url}/s/{link['id']}" and not link["with_run"] and link["run"] is None
    assert server.get_json(f"/api/snippets/{link['id']}")["recorded_run"] is None
    with_run = structured(share_run)
    assert with_run["run"]["stdout"] == "shared with run\n"
    assert server.get_json(f"/api/snippets/{with_run['id']}")["recorded_run"][-1]["type"] == "done"

    versions = {r["name"] for b in structured(offered)["backends"] for r in b["runtimes"]}
    assert {"0.4.38", "0.6.2"} <= versions
    cpu = structured(backends)["backends"][0]
    assert cpu["name"] == "cpu" and cpu["device_count"] == 8 and "optax" in cpu["libraries"]
    assert structured(backends)["default_backend"] == "cpu"
    rules_text = rules.contents[0].text
    assert "no network" in rules_text and "30 s" in rules_text and "optax" in rules_text
    # The flags a run may set, from the allow-list itself: a flag the runtime's XLA lacks says which it needs.
    assert "`jax_enable_x64`: true or false" in rules_text and "`xla_backend_optimization_level`" in rules_text
    assert "`xla_cpu_use_xnnpack`: true or false; CPU: XNNPACK kernels (JAX 0.6 or later)" in rules_text


def test_bad_input_is_refused_saying_what_to_change(server: LiveServer, token: str) -> None:
    async def scenario():
        async with mcp_session(server.http_url, token) as session:
            return [await session.call_tool("run", arguments) for arguments in (
                {"code": "print(1)", "runtime": "9.9.9"},
                {"code": "x = 1\n" * 60_000},
                {"code": 5},
                {"code": "print(1)", "flags": {"xla_dump_to": "/tmp"}},
                {"code": "print(1)", "backend": "tpu"},
                {"code": "print('x' * (10 << 20))"},
                {"code": "import jax.numpy as jnp\nx = jnp.ones(3)\nx @ jnp.ones(4)\n"},
            )]

    unknown_runtime, too_large, malformed, unknown_flag, unknown_backend, flood, failing = asyncio.run(scenario())
    assert unknown_runtime.is_error and "JAX 9.9.9 is not offered on cpu" in unknown_runtime.content[0].text
    assert too_large.is_error and "the limit is 262144 bytes" in too_large.content[0].text
    assert malformed.is_error and "code" in malformed.content[0].text
    assert unknown_flag.is_error and "'xla_dump_to'" in unknown_flag.content[0].text
    assert unknown_backend.is_error and "Unknown backend 'tpu'" in unknown_backend.content[0].text
    answer = structured(flood)  # 10 MB of output: the worker keeps its limit, the answer less, and says so
    assert answer["status"] == "ok" and len(answer["stdout"]) == 64_000
    assert any("stdout: the first 64000 of" in note for note in answer["cut"])
    assert any("output" in notice.lower() for notice in answer["notices"])
    assert answer["link"] is not None
    error = structured(failing)["error"]  # the program's own error: an answer, not a tool error
    assert structured(failing)["status"] == "error" and error["line"] == 3 and error["ename"] == "TypeError"
    assert "error (line 3): TypeError:" in failing.content[0].text


DTYPE = "import jax.numpy as jnp\nprint(jnp.ones(2).dtype)  # {tag}\n"
X64 = {"config": {"jax_enable_x64": True}}


def test_an_x64_config_flag_takes_effect_through_the_tools_that_run_code(server: LiveServer, token: str) -> None:
    tag = uuid.uuid4().hex
    code = DTYPE.format(tag=tag)

    async def scenario():
        async with mcp_session(server.http_url, token) as session:
            plain = await session.call_tool("run", {"code": code})
            x64 = await session.call_tool("run", {"code": code, "flags": X64})
            inspected = await session.call_tool("inspect", {"code": JITTED + f"# {tag}\n", "flags": X64})
            compared = await session.call_tool("compare", {"code": code, "runtimes": ["0.4.38", "0.6.2"],
                                                           "flags": X64 | {"fresh": True}})
            return plain, x64, inspected, compared

    plain, x64, inspected, compared = asyncio.run(scenario())
    assert structured(plain)["stdout"] == "float32\n" and structured(plain)["flags"] is None
    answer = structured(x64)  # the same program: the flags are part of the result cache's key
    assert answer["status"] == "ok" and answer["stdout"] == "float64\n" and not answer["cached"]
    assert answer["flags"] == "jax_enable_x64=true" and "flags: jax_enable_x64=true" in x64.content[0].text
    # The link's page opens with the run's flags chosen, as a link the page shares does.
    snippet = server.get_json("/api/snippets/" + answer["link"].rsplit("/", 1)[1])
    assert snippet["settings"]["flags"] == {"config": {"jax_enable_x64": True}, "xla": {}}
    started = next(e for e in snippet["recorded_run"] if e["type"] == "started")
    assert started["flags"]["config"] == {"jax_enable_x64": True}
    double = structured(inspected)["functions"]
    assert double and "f64[4]" in double[0]["jaxpr"] and "f64[4]" in double[0]["hlo"]
    assert [r["stdout"] for r in structured(compared)["runs"]] == ["float64\n", "float64\n"]


def test_a_bad_flag_is_refused_naming_it_and_counted_as_a_refused_run(server: LiveServer, token: str) -> None:
    refused_before = metric_total(server, "jaxplay_runs_rejected_total", reason="bad_flags", kind="run")

    async def scenario():
        async with mcp_session(server.http_url, token) as session:
            return [await session.call_tool("run", arguments) for arguments in (
                {"code": "print(1)", "flags": {"xla": {"xla_dump_to": "/tmp/out"}}},
                {"code": "print(1)", "flags": {"xla": {"xla_backend_optimization_level": 9}}},
                {"code": "print(1)", "runtime": "0.4.38", "flags": {"xla": {"xla_cpu_use_xnnpack": True}}},
                {"code": "print(1)", "flags": {"config": ["jax_enable_x64"]}},
            )]

    dump, out_of_range, unknown_to_runtime, malformed = asyncio.run(scenario())
    assert dump.is_error and "xla_dump_to" in dump.content[0].text and "never accepted" in dump.content[0].text
    assert out_of_range.is_error and "--xla_backend_optimization_level" in out_of_range.content[0].text
    assert "from 0 to 3" in out_of_range.content[0].text
    assert unknown_to_runtime.is_error and "--xla_cpu_use_xnnpack" in unknown_to_runtime.content[0].text
    assert "not known to the XLA of JAX 0.4.38" in unknown_to_runtime.content[0].text
    assert malformed.is_error and "flags.config" in malformed.content[0].text
    assert metric_total(server, "jaxplay_runs_rejected_total", reason="bad_flags", kind="run") == refused_before + 4


def test_an_assistants_runs_are_counted_by_kind_as_a_browsers_are(server: LiveServer, token: str) -> None:
    def runs(kind: str) -> float:
        return metric_total(server, "jaxplay_runs_total", backend="cpu", kind=kind, status="ok")

    before = {kind: runs(kind) for kind in ("run", "profile", "compare")}
    tag = uuid.uuid4().hex
    assert structured(call(server.http_url, token, "run", code=f"print('counted')  # {tag}"))["status"] == "ok"
    assert runs("run") == before["run"] + 1
    profiled = structured(call(server.http_url, token, "run", code=JITTED + f"# {tag}\n",
                               flags={"profile": True}))
    assert profiled["status"] == "ok" and runs("profile") == before["profile"] + 1
    compared = structured(call(server.http_url, token, "compare", code=f"print('compared')  # {tag}",
                               runtimes=["0.4.38", "0.6.2"]))
    assert all(r["status"] == "ok" for r in compared["runs"])
    assert runs("compare") == before["compare"] + 2 and runs("run") == before["run"] + 1


def test_an_assistant_that_hangs_up_mid_run_has_its_run_cancelled(server: LiveServer, token: str) -> None:
    """Its client's place in the queue is freed at once, not when a program nobody waits for ends."""
    def cancelled() -> float:
        return metric_total(server, "jaxplay_runs_total", backend="cpu", kind="run", status="cancelled")

    before = cancelled()

    async def hang_up() -> float:
        call = asyncio.create_task(call_tool(server.http_url, token, "run", {
            "code": f"import time\nprint('waiting')\ntime.sleep(60)  # {uuid.uuid4().hex}", "flags": {"fresh": True}}))
        await asyncio.sleep(4)  # queued or running by now
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        return time.monotonic()

    hung_up_at = asyncio.run(hang_up())
    wait_until(lambda: cancelled() > before, 20, "the run cancelled")
    assert time.monotonic() - hung_up_at < 20  # well before the program's 60 s would have ended


JITTED = """import jax, jax.numpy as jnp
@jax.jit
def double(x):
    return x * 2.0
print(double(jnp.ones(4)))
"""


def test_a_token_nobody_issued_or_one_removed_is_refused(server: LiveServer) -> None:
    data_dir = server.log_path.parent
    token = issue_token(data_dir, "revoked-soon")
    url = server.http_url + "/mcp"
    with httpx2.Client(timeout=30) as http:
        assert http.post(url, json=INITIALIZE, headers=MCP_HEADERS | {"Authorization": f"Bearer {token}"}
                         ).status_code == 200
        missing = http.post(url, json=INITIALIZE, headers=MCP_HEADERS)
        assert missing.status_code == 401 and "needs a token" in missing.json()["error"]["message"]
        assert missing.headers["www-authenticate"] == "Bearer"
        wrong = http.post(url, json=INITIALIZE, headers=MCP_HEADERS | {"Authorization": f"Bearer {token}x"})
        assert wrong.status_code == 401 and "not one this server issued" in wrong.json()["error"]["message"]
        listed = tokens_command(data_dir, "list").stdout
        assert "revoked-soon" in listed and token not in listed
        assert tokens_command(data_dir, "remove", "revoked-soon").returncode == 0
        revoked = http.post(url, json=INITIALIZE, headers=MCP_HEADERS | {"Authorization": f"Bearer {token}"})
        assert revoked.status_code == 401  # at its next request, without a restart
    with pytest.raises(Exception):  # noqa: B017 - the SDK's client cannot open a session either
        call(server.http_url, token, "runtimes")


def test_origin_and_host_are_checked_against_dns_rebinding(server: LiveServer, token: str) -> None:
    url = server.http_url + "/mcp"
    headers = MCP_HEADERS | {"Authorization": f"Bearer {token}"}
    with httpx2.Client(timeout=30) as http:
        other_site = http.post(url, json=INITIALIZE, headers=headers | {"Origin": "http://evil.example"})
        assert other_site.status_code == 403 and "not from this server's own pages" in other_site.text
        listening = http.get(url, headers=headers | {"Origin": "http://evil.example"})  # the transport's stream
        assert listening.status_code == 403 and "other sites may not call /mcp" in listening.text
        rebound = http.post(url, json=INITIALIZE, headers=headers | {"Host": "evil.example"})
        assert rebound.status_code == 400 and "does not answer to the host name" in rebound.text
        own_page = http.post(url, json=INITIALIZE, headers=headers | {"Origin": server.http_url})
        assert own_page.status_code == 200


def test_mcp_and_browser_runs_share_the_result_cache_only_where_the_browser_rules_allow(server: LiveServer) -> None:
    # A new token: one whose compile cache holds nothing yet, as a new browser session's (a run that read its
    # client's own compile cache answers that client alone: the next test).
    token = issue_token(server.log_path.parent, "cache-sharer")
    deterministic = "import jax.numpy as jnp\nprint('cache me', jnp.arange(4).sum())  # mcp-cache-1\n"
    entries = cache_entries(server)
    first = structured(call(server.http_url, token, "run", code=deterministic))
    assert first["status"] == "ok" and not first["cached"]
    wait_until(lambda: cache_entries(server) > entries, 20, "the assistant's run recorded")  # by the writer thread
    # A result answers other people once a second, independent run agreed (server/runs/result_verification.py):
    # a browser's run of the same program is that second run, and then it answers anyone.
    second = run_until_stored(server, deterministic)  # its verdict is written after its done
    assert done_of(second).get("cached") is None and output_text(second) == first["stdout"]
    from_browser = server.run(deterministic)
    assert done_of(from_browser).get("cached") is True and output_text(from_browser) == first["stdout"]

    browser_first = "print('from a browser first')  # mcp-cache-2\n"
    entries = cache_entries(server)
    assert not done_of(server.run(browser_first)).get("cached")
    wait_until(lambda: cache_entries(server) > entries, 20, "the browser's run recorded")
    # The second run, from a new assistant (a run that read its client's own compile cache verifies nothing).
    verifier = issue_token(server.log_path.parent, "cache-verifier")
    entries = cache_entries(server)
    assert structured(call(server.http_url, verifier, "run", code=browser_first))["cached"] is False
    wait_until(lambda: cache_entries(server) > entries, 20, "the verifying run's verdict recorded")
    other = issue_token(server.log_path.parent, "cache-reader")  # another assistant: answered from the cache
    assert structured(call(server.http_url, other, "run", code=browser_first))["cached"] is True
    fresh = structured(call(server.http_url, other, "run", code=browser_first, flags={"fresh": True}))
    assert fresh["cached"] is False and fresh["stdout"] == "from a browser first\n"

    clock = "import time\nprint(time.time())  # mcp-cache-3\n"  # reads the clock: never answered again
    assert not structured(call(server.http_url, token, "run", code=clock))["cached"]
    assert not done_of(server.run(clock)).get("cached")


def test_a_tokens_own_compile_cache_answers_that_token_alone(server: LiveServer, token: str) -> None:
    """A token is a client with a compile cache of its own, as a browser session is: a run that read it (here,
    an entry the token's own run crafted) is cached for that token only, never for a browser."""
    program = HONEST.format(tag=uuid.uuid4().hex)
    assert structured(call(server.http_url, token, "run", code=program, flags={"fresh": True}))["stdout"] == \
        HONEST_OUTPUT
    assert structured(call(server.http_url, token, "run", code=CRAFT, flags={"fresh": True}))["stdout"] == \
        "crafted 1\n"
    poisoned = structured(call(server.http_url, token, "run", code=program, flags={"fresh": True}))
    assert poisoned["stdout"] == POISONED_OUTPUT  # the token hurt itself, as a session may
    assert structured(call(server.http_url, token, "run", code=program))["stdout"] == POISONED_OUTPUT
    for events in (server.run(program), asyncio.run(browser_without_cookie(server, program))):
        assert output_text(events) == HONEST_OUTPUT, events[-2:]


async def browser_without_cookie(server: LiveServer, code: str) -> list[dict]:
    async with websockets.connect(server.ws_url, max_size=None) as ws:
        await ws.send(json.dumps({"type": "run", "id": "plain", "code": code}))
        return await collect(ws, "plain", 120)


def test_a_flood_from_one_token_lets_another_users_run_start_after_at_most_one_of_its_runs(tmp_path: Path) -> None:
    flood = 8
    args = ["--max-runs-per-client", str(flood), "--max-connections-per-client", str(flood + 2), "--slots", "1"]
    with running_server(args) as live:
        token = issue_token(live.log_path.parent, "flooder")

        async def scenario():
            codes = [f"import time\ntime.sleep(0.4)\nprint({i})" for i in range(flood)]
            first = await call_tool(live.http_url, token, "run", {"code": codes[0], "flags": {"fresh": True}})
            flooding = [asyncio.create_task(call_tool(live.http_url, token, "run",
                                                      {"code": code, "flags": {"fresh": True}}))
                        for code in codes[1:]]
            await asyncio.sleep(1.0)  # the flood is queued
            async with websockets.connect(live.ws_url, additional_headers=live.browser_headers()) as other:
                await other.send(json.dumps({"type": "run", "id": "mine", "code": "print(1)", "fresh": True}))
                mine = await collect(other, "mine", 240)
            still_running = not all(task.done() for task in flooding)
            return first, mine, still_running, await asyncio.gather(*flooding)

        first, mine, still_running, flooded = asyncio.run(scenario())
    assert structured(first)["status"] == "ok"
    assert still_running  # the other user's run did not wait for the flood to drain
    assert done_of(mine)["status"] == "ok" and output_text(mine) == "1\n"
    queued = [e for e in mine if e["type"] == "queued"]
    assert queued[0]["position"] == 2, queued  # next but one: one flood run is ahead in the round
    assert all(structured(result)["status"] == "ok" for result in flooded)


SHARDED = """import jax, jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from playground import show_sharding
mesh = Mesh(jax.devices(), ("x",))
x = jax.device_put(jnp.zeros((8, 4)), NamedSharding(mesh, P("x")))
show_sharding(x)
"""
COMPARED = """import jax, jax.numpy as jnp
@jax.jit
def f(x):
    return jnp.tanh(x) @ x.T
print(f(jnp.ones((4, 4))).sum())
"""


def test_an_anonymous_assistant_is_its_networks_one_client_with_cookieless_browsers() -> None:
    with running_server(["--mcp-anonymous", "--max-runs-per-client", "1"]) as live:
        async def scenario():
            async with websockets.connect(live.ws_url) as cookieless:  # its network's address client
                await cookieless.send(json.dumps({"type": "run", "id": "slow", "fresh": True,
                                                  "code": "import time\ntime.sleep(3)\nprint('slow')"}))
                while json.loads(await cookieless.recv()).get("type") != "started":
                    pass
                refused = await call_tool(live.http_url, None, "run", {"code": "print('anonymous')"})
                slow = await collect(cookieless, "slow", 120)
            return refused, slow, await call_tool(live.http_url, None, "run", {"code": "print('anonymous')"})

        refused, slow, later = asyncio.run(scenario())
    assert refused.is_error and "runs waiting or running (the limit is 1" in refused.content[0].text
    assert done_of(slow)["status"] == "ok"
    assert structured(later)["stdout"] == "anonymous\n"


def test_with_a_broker_an_assistants_run_on_one_replica_runs_on_anothers_worker(redis_server, tmp_path: Path) -> None:
    from tests.live.test_broker import start_pair

    a, b = start_pair(redis_server, tmp_path)  # A has no worker of its own
    try:
        token = issue_token(a.log_path.parent, "across-replicas")
        answer = structured(call(a.http_url, token, "run", code="print('via the broker')"))
    finally:
        a.stop()
        b.stop()
    assert answer["status"] == "ok" and answer["stdout"] == "via the broker\n"
    assert answer["link"].startswith(a.http_url + "/s/")


def test_an_assistants_links_and_the_pages_count_against_one_budget_per_network() -> None:
    with running_server(["--snippets-per-address-per-hour", "2"]) as live:
        token = issue_token(live.log_path.parent, "linker")
        shared = structured(call(live.http_url, token, "share", code="print('one')"))
        with httpx2.Client(timeout=30) as http:
            assert http.post(live.http_url + "/api/snippets", json={"code": "print('two')"}).status_code == 201
            third = http.post(live.http_url + "/api/snippets", json={"code": "print('three')"})
        over = structured(call(live.http_url, token, "run", code="print('four')"))
        refused = call(live.http_url, token, "share", code="print('five')")
    assert shared["url"].startswith(live.http_url + "/s/")
    assert third.status_code == 429  # the assistant's link counted against the page's budget
    assert over["stdout"] == "four\n" and over["link"] is None  # the run is answered, without a link
    assert "links in the last hour" in over["link_note"]
    assert refused.is_error and "links in the last hour" in refused.content[0].text
