"""A session's compile cache is code its own runs wrote: how far a crafted entry reaches, and what the host keeps.

The attack (docs/security.md, "What crosses between runs"): a run overwrites
the entry JAX saved for an honest function with another function's compiled
code. JAX loads and executes it in that session's later runs, which then
compute something else. The session hurts itself; the tests prove that it
hurts no one else: not another browser session (cached or fresh, on any
slot), not the trusted shared cache, not whoever opens a link to the program.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets

from jaxplay.sandbox.caches import compile_cache
from jaxplay.server.clients.sessions import SessionKeys
from jaxplay.settings import Settings
from tests.conftest import done_of, output_text
from tests.live_server import LiveServer

HONEST = """
import jax, jax.numpy as jnp
def honest(x):
    return x * 2.0 + 1.0
print(jax.jit(honest)(jnp.arange(4.0)))  # {tag}
"""
HONEST_OUTPUT = "[1. 3. 5. 7.]\n"
CRAFT = """
import os, jax, jax.numpy as jnp
def evil(x):
    return x * 100.0 - 7.0
jax.jit(evil)(jnp.arange(4.0)).block_until_ready()
cache = "/var/cache/jaxplay/jax"
evil_entry = next(n for n in os.listdir(cache) if n.startswith("jit_evil") and n.endswith("-cache"))
crafted = open(os.path.join(cache, evil_entry), "rb").read()
honest = [n for n in os.listdir(cache) if n.startswith("jit_honest") and n.endswith("-cache")]  # its executable
for name in honest:  # the session's own saved entry, seen through the overlay: the write stays in this run's layer
    open(os.path.join(cache, name), "wb").write(crafted)
print("crafted", len(honest))
"""
POISONED_OUTPUT = "[ -7.  93. 193. 293.]\n"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A live server of this file's own, whose compile caches are in a folder of its own: what the host
    keeps is then this server's alone, never that of the servers other tests (other pytest processes,
    other checkouts) run at the same time, which make and drop session folders in a shared one. Its
    shared cache starts as a copy of this host's, so that no fill has to run first."""
    root = tmp_path_factory.mktemp("compile-cache-trust")
    caches = root / "compile-cache"
    host_shared = Settings().compile_cache_dir.expanduser() / "shared"
    if host_shared.is_dir():
        shutil.copytree(host_shared, caches / "shared", symlinks=True, ignore=shutil.ignore_patterns(".lock"))
    server = LiveServer(root / "data", ["--compile-cache-dir", str(caches)])
    server.compile_cache_dir = caches  # type: ignore[attr-defined]
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def cookie(live) -> str:
    with urllib.request.urlopen(live.http_url + "/") as response:
        return response.headers["set-cookie"].split(";")[0]


def run_in(live, session_cookie: str | None, code: str, fresh: bool = True) -> list[dict]:
    async def one() -> list[dict]:
        headers = {"Cookie": session_cookie} if session_cookie else {}
        async with websockets.connect(live.ws_url, max_size=None, additional_headers=headers) as ws:
            run_id = uuid.uuid4().hex[:12]
            await ws.send(json.dumps({"type": "run", "id": run_id, "code": code, "fresh": fresh}))
            events = []
            while True:
                event = json.loads(await asyncio.wait_for(ws.recv(), 120))
                if event.get("id") == run_id:
                    events.append(event)
                    if event["type"] == "done":
                        return events

    return asyncio.run(one())


def sessions_folder(live) -> Path:
    """Where the server's worker keeps its browser sessions' compile caches (``--compile-cache-dir``)."""
    return live.compile_cache_dir.resolve() / "sessions"


def session_entries(live, session_cookie: str) -> Path:
    """The host folder of one browser session's saved entries (named by the server's derived name)."""
    session_id = session_cookie.split("=", 1)[1].split(".")[0]
    name = SessionKeys.load_or_create(live.log_path.parent).derived("compile-cache", session_id)
    return sessions_folder(live) / name / "entries"


def poisoned_session(live) -> tuple[str, str]:
    """A session whose compile cache holds a crafted entry for ``honest``; (its cookie, the program)."""
    a = cookie(live)
    program = HONEST.format(tag=uuid.uuid4().hex)
    first = run_in(live, a, program)
    assert output_text(first) == HONEST_OUTPUT, first[-3:]
    crafted = run_in(live, a, CRAFT)
    assert output_text(crafted) == "crafted 1\n", crafted[-3:]
    return a, program


@pytest.mark.attack("compile cache")
def test_a_crafted_session_entry_never_reaches_another_session_through_the_result_cache(live):
    a, program = poisoned_session(live)
    own_runs = [run_in(live, a, program) for _ in range(3)]
    for own in own_runs:  # every slot: the session poisoned itself (as one may poison one's own notebook)
        assert output_text(own) == POISONED_OUTPUT, own[-2:]
    b = cookie(live)
    cached = run_in(live, b, program, fresh=False)
    assert output_text(cached) == HONEST_OUTPUT, cached[-2:]
    for _ in range(3):  # and fresh, on every slot
        fresh = run_in(live, b, program)
        assert output_text(fresh) == HONEST_OUTPUT, fresh[-2:]
    assert output_text(run_in(live, None, program, fresh=False)) == HONEST_OUTPUT  # nor a cookie-less socket
    assert all(done_of(own).get("read_session_cache") is True for own in own_runs)  # what kept them apart


@pytest.mark.attack("compile cache")
def test_a_crafted_entry_follows_no_link_and_never_lands_in_the_shared_cache(live):
    shared = live.compile_cache_dir.resolve() / "shared"
    before = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in shared.rglob("*") if p.is_file()}
    a, program = poisoned_session(live)
    body = json.dumps({"code": program, "backend": "cpu", "settings": {"inspect": True}}).encode()
    created = urllib.request.urlopen(urllib.request.Request(
        live.http_url + "/api/snippets", data=body, headers={"content-type": "application/json", "Cookie": a}))
    snippet_id = json.load(created)["id"]
    shared_code = live.get_json(f"/api/snippets/{snippet_id}")["code"]  # what the link holds: code, never a cache
    assert shared_code == program
    b = cookie(live)
    for fresh in (False, True):
        assert output_text(run_in(live, b, shared_code, fresh=fresh)) == HONEST_OUTPUT
    after = {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in shared.rglob("*") if p.is_file()}
    assert {p: v for p, v in after.items() if p in before} == before  # the trusted fill's entries, untouched
    crafted = {p.read_bytes() for p in session_entries(live, a).iterdir() if p.name.startswith("jit_honest")}
    assert crafted and not any(p.read_bytes() in crafted for p in after)


COMPILE_SOMETHING_NEW = """
import jax, jax.numpy as jnp
print(float(jax.jit(lambda x: jnp.sin(x) * {k})(jnp.ones(3)).sum()))
"""


@pytest.mark.attack("resource exhaustion")
def test_a_connection_without_a_session_cookie_leaves_no_host_folder(live):
    before = set(sessions_folder(live).iterdir())
    for _ in range(3):
        events = run_in(live, None, COMPILE_SOMETHING_NEW.format(k=uuid.uuid4().int % 997 + 3))
        assert done_of(events)["status"] == "ok", events[-2:]
    assert set(sessions_folder(live).iterdir()) == before


LEAVE_FILES = """
import os
cache = "/var/cache/jaxplay/jax"
for i in range({count}):
    open(f"{{cache}}/jit_many{{i:05d}}-cache", "wb").write(b"x")
with open(f"{{cache}}/jit_sparse-cache", "wb") as f:
    f.truncate(200 << 20)  # nothing in the run's memory; a dense copy on the host
os.symlink("/etc/ld.so.cache", f"{{cache}}/jit_link-cache")
os.mkfifo(f"{{cache}}/jit_fifo-cache")
try:  # swap the layer the init copies from for a link to a host folder
    os.rename("/var/cache/jaxplay/run/upper", "/var/cache/jaxplay/run/moved")
    os.symlink("/etc", "/var/cache/jaxplay/run/upper")
    print("swapped")
except OSError as exc:
    print("no swap", exc.errno)
"""


@pytest.mark.attack("host files")
def test_what_a_run_leaves_on_the_host_is_bounded_and_only_regular_files_it_wrote(live):
    from jaxplay.sandbox.caches import mounts

    a = cookie(live)
    events = run_in(live, a, LEAVE_FILES.format(count=2000))
    assert done_of(events)["status"] == "ok", events[-2:]
    saved = list(session_entries(live, a).iterdir())
    host_file = Path("/etc/ld.so.cache").read_bytes()
    for path in saved:  # regular files the run wrote, nothing it only pointed at
        assert path.is_file() and not path.is_symlink() and path.name.startswith("jit_many"), path
        assert path.read_bytes() != host_file
    assert len(saved) <= mounts.SAVE_BUDGET_FILES
    assert sum(max(mounts.BLOCK_BYTES, p.stat().st_blocks * 512) for p in saved) <= mounts.SAVE_BUDGET_BYTES
    assert output_text(events).startswith("no swap"), output_text(events)  # its layer is out of its reach
    notices = [e["message"] for e in events if e["type"] == "notice"]
    assert any("were not kept in your session's compile cache" in n and "512 files" in n for n in notices), notices


CRAFT_LOWERED = """
import json, os, jax, jax.numpy as jnp
def evil(x):
    return x * 100.0 - 7.0
jax.jit(evil)(jnp.arange(4.0)).block_until_ready()  # its module and executable, in this session's cache
cache = "/var/cache/jaxplay/jax"
names = os.listdir(cache)
magic, header, body = open(os.path.join(cache, next(
    n for n in names if n.startswith("jit_evil") and n.endswith("-lowered"))), "rb").read().split(b"\\n", 2)
crafted = json.loads(header)
honest = [n for n in names if n.startswith("jit_honest") and n.endswith("-lowered")]
for name in honest:  # the honest lowering's key, the evil function's module: the write stays in this run's layer
    crafted["key"] = json.loads(open(os.path.join(cache, name), "rb").read().split(b"\\n", 2)[1])["key"]
    open(os.path.join(cache, name), "wb").write(b"\\n".join([magic, json.dumps(crafted).encode(), body]))
print("crafted", len(honest))
"""


@pytest.mark.attack("compile cache")
def test_a_crafted_lowered_module_poisons_its_own_session_and_no_other(live):
    """A session's lowered modules are code its runs wrote, as its executables are: one crafted to hand
    the honest function another function's module changes that session's results, and nobody else's."""
    shared = (Settings().compile_cache_dir.expanduser().resolve() / "shared" /
              compile_cache.environment_name(Settings(), "cpu"))
    deadline = time.monotonic() + 300
    while not (shared / compile_cache.FILLED_STAMP).exists() and time.monotonic() < deadline:
        time.sleep(2)  # the fill runs at worker start, at the lowest priority
    shared_before = {p: p.read_bytes() for p in shared.glob("*-lowered")}
    assert shared_before, "the trusted fill keeps the gallery's lowered modules in the shared cache"
    a = cookie(live)
    program = HONEST.format(tag=uuid.uuid4().hex)
    assert output_text(run_in(live, a, program)) == HONEST_OUTPUT
    crafted = run_in(live, a, CRAFT_LOWERED)
    assert output_text(crafted) == "crafted 1\n", crafted[-3:]
    own = run_in(live, a, program)
    assert output_text(own) == POISONED_OUTPUT, own[-3:]  # the session poisoned itself
    (compiled,) = [e for e in own if e["type"] == "compiled"]
    assert compiled["lowered_module_cached"] and "jit_evil" in compiled["stablehlo"]
    assert done_of(own).get("read_session_cache") is True  # so its result is never another session's
    b = cookie(live)
    assert output_text(run_in(live, b, program, fresh=False)) == HONEST_OUTPUT  # not through the result cache
    for _ in range(3):  # nor on any slot
        assert output_text(run_in(live, b, program)) == HONEST_OUTPUT
    assert output_text(run_in(live, None, program)) == HONEST_OUTPUT
    saved = [p for p in session_entries(live, a).iterdir() if p.name.startswith("jit_honest") and
             p.name.endswith("-lowered")]
    assert saved and all(b"jit_evil" in p.read_bytes() for p in saved)  # the crafted entry: A's folder alone
    assert {p: p.read_bytes() for p in shared.glob("*-lowered")} == shared_before
