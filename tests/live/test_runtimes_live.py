"""JAX runtimes on the real path: one server offering its own JAX and the runtimes ``make test`` installs.

The capture layer (Inspect's stages, source lines, sharding, treescope values,
timeit, the determinism capture) is run on every offered runtime through the
real worker and sandbox; unknown and failed runtimes are refused by name;
the result cache never answers one runtime's run with another's.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest
import websockets

from jaxplay.sandbox.runtimes import store
from tests.live_server import LiveServer, collect, done_of, output_text
from tests.runtimes_server import NOT_INSTALLABLE, TEST_RUNTIMES, runtimes_dir, runtimes_server

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.live

CAPTURE_PROGRAM = """
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
from playground import display, show_sharding, timeit
print("jax", jax.__version__)

@jax.jit
def f(x, y):
    return jnp.sin(x) @ y

f(jnp.ones((4, 4)), jnp.ones((4, 2)))
f(jnp.ones((3, 4)), jnp.ones((4, 2)))
mesh = jax.make_mesh((4, 2), ("x", "y"))
a = jax.device_put(jnp.ones((8, 4)), NamedSharding(mesh, P("x", "y")))
show_sharding(a)
g = jax.jit(lambda v: (v * 2).sum(axis=0))
g(a)
timeit(lambda: f(jnp.ones((4, 4)), jnp.ones((4, 2))).block_until_ready(), number=2)
display({"w": jnp.ones(3)})
"""


@pytest.fixture(scope="module")
def server() -> Iterator[LiveServer]:
    with runtimes_server(["--runtime-idle-s", "4"]) as live:
        yield live


def every_runtime() -> list[str | None]:
    """None (the default, the newest offered), the worker's own JAX by name, and each test runtime."""
    return list(dict.fromkeys([None, metadata.version("jax"), *TEST_RUNTIMES]))


@pytest.mark.parametrize("runtime", every_runtime(), ids=lambda r: r or "default")
def test_the_capture_layer_works_on_every_offered_runtime(server: LiveServer, runtime: str | None) -> None:
    fields = {"runtime": runtime} if runtime else {}
    events = server.run(CAPTURE_PROGRAM, timeout=180, **fields)
    done = done_of(events)
    assert done["status"] == "ok", (done, output_text(events, "stderr"))
    started = next(e for e in events if e["type"] == "started")
    if runtime:
        assert started["runtime"] == runtime and started["jax_version"] == runtime
        assert output_text(events).startswith(f"jax {runtime}\n")
    compiled = [e for e in events if e["type"] == "compiled" and e["fn"] == "f"]
    assert [c["signature"] for c in compiled] == ["x: f32[4,4], y: f32[4,2]", "x: f32[3,4], y: f32[4,2]"]
    assert compiled[0]["outputs"] == "f32[4,2]"
    reason = compiled[1]["cache_miss_reason"]  # in each JAX's own words
    assert "at x" in reason and "f32[3,4]" in reason and "f32[4,4]" in reason, reason
    for first in compiled[:1]:
        assert "sin" in first["jaxpr"] and "stablehlo.sine" in first["stablehlo"] and "sine" in first["hlo"]
        assert not first.get("capture_errors"), first.get("capture_errors")
        for artifact in ("jaxpr", "stablehlo", "hlo"):  # every view links its lines to line 9, `return ...`
            assert any(source == 9 for _, _, source in first["source_lines"][artifact]), artifact
        assert first["cost"]["flops"] > 0 and first["memory"]["output_size_in_bytes"] == 32
    sharding = next(e for e in events if e["type"] == "sharding")
    assert sharding["mesh"]["axis_sizes"] == [4, 2] and len(sharding["shards"]) == 8
    assert sharding["typeof"].startswith("float32[8")
    (sharded,) = [e for e in events if e["type"] == "compiled" and e["fn"] == "<lambda>"]
    assert sharded["num_devices"] == 8 and sharded["in_shardings"][0]["mesh"]["axis_sizes"] == [4, 2]
    assert sharded["out_shardings"] and "collectives" in sharded
    timing = next(e for e in events if e["type"] == "timing")
    assert timing["median_ms"] > 0
    assert any(e["type"] == "nondeterministic" and e["kind"] == "time" for e in events)
    assert any(e["type"] == "display" and e["mime"] == "text/html" and "treescope" in e["data"] for e in events)
    # Nothing degraded silently: a view that had to show less said so in a notice.
    notices = [e["message"] for e in events if e["type"] == "notice"]
    assert all("needs JAX >=" in n or "Inspect cannot follow" in n for n in notices), notices
    assert output_text(events, "stderr") == ""  # no capture noise: JAX's explanations went to Inspect


VIEWS_PROGRAM = """
import jax
import jax.numpy as jnp

@jax.jit
def step(w, x):
    return w - 0.1 * jnp.tanh(x @ w)

x = jnp.ones((64, 64))
w = jnp.ones(64)
for _ in range(5):
    w = step(w, x)
print(float(w[0]) > 0)
"""


def passes_of(server: LiveServer, code: str, runtime: str | None) -> list[dict]:
    """The events of a ``passes`` request (the page's "XLA passes" button) for ``step``'s first compilation."""
    async def send() -> list[dict]:
        async with websockets.connect(server.ws_url, max_size=None) as ws:
            await ws.send(json.dumps({"type": "passes", "id": "passes", "code": code, "key": "1.1", "fn": "step",
                                      **({"runtime": runtime} if runtime else {})}))
            return await collect(ws, "passes", 180)
    return asyncio.run(send())


@pytest.mark.parametrize("runtime", every_runtime(), ids=lambda r: r or "default")
def test_phases_passes_profile_roofline_equations_and_hints_work_on_every_offered_runtime(
        server: LiveServer, runtime: str | None) -> None:
    fields = {"runtime": runtime} if runtime else {}
    events = server.run(VIEWS_PROGRAM, timeout=180, profile=True, **fields)
    assert done_of(events)["status"] == "ok", output_text(events, "stderr")
    (compiled,) = [e for e in events if e["type"] == "compiled" and e["fn"] == "step"]
    phases = compiled["phases_ms"]
    assert phases["trace"] > 0 and phases["lower"] > 0 and phases["execute"] >= 0, phases
    assert phases["compile"] > 0 or compiled["persistent_cache_hit"], compiled
    assert compiled["eqn_counts"]["lines"][0]["line"] == 7  # `return w - 0.1 * jnp.tanh(x @ w)`
    (roofline,) = [e for e in events if e["type"] == "roofline"]
    (row,) = roofline["functions"]
    assert row["fn"] == "step" and row["bound"] in ("memory", "compute"), row
    (profile,) = [e for e in events if e["type"] == "profile"]
    ops = [s for s in profile["slices"] if profile["kinds"][s[5]] == "op"]
    # jaxlib 0.6.2's CPU client traces no operations: the profile says so instead of showing none silently.
    assert ops or any("records no XLA operations" in n for n in profile["notices"]), profile["notices"]
    passes = passes_of(server, VIEWS_PROGRAM, runtime)
    assert done_of(passes)["status"] == "ok"
    (answer,) = [e for e in passes if e["type"] == "passes"]
    assert "error" not in answer and answer["module"] == "jit_step" and answer["dump_files"] > 10, (
        answer.get("error"), answer.get("notices"))
    error = next(e for e in server.run("import jax.numpy as jnp\njnp.ones((2, 3)) + jnp.ones(4)\n", **fields)
                 if e["type"] == "error")
    assert "broadcast" in error["hint"] and "(2, 3)" in error["hint"], error


DONATING = "import jax, jax.numpy as jnp\nf = jax.jit(lambda b: b + 1, donate_argnums=0)\nprint(f(jnp.zeros(6)))\n"
PLAIN_MEMORY = """
import json, jax, jax.numpy as jnp
f = jax.jit(lambda b: b + 1, donate_argnums=0)
stats = f.lower(jnp.zeros(6)).compile().memory_analysis()
print(json.dumps({name: int(getattr(stats, name)) for name in FIELDS}))
"""
MEMORY_FIELDS = ("alias_size_in_bytes", "argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes")


def interpreter_of(server: LiveServer, runtime: str | None) -> str:
    """The Python of ``runtime`` (None: the default the server gives a run that names none)."""
    name = runtime or offered(server)[0]
    if name == metadata.version("jax"):
        return sys.executable  # the worker's own JAX
    return str(store.folder_for(runtimes_dir(), name) / "bin" / "python")


@pytest.mark.parametrize("runtime", every_runtime(), ids=lambda r: r or "default")
def test_inspects_memory_for_a_donated_argument_is_what_plain_python_reads(server: LiveServer,
                                                                           runtime: str | None) -> None:
    """JAX 0.4.38 reloads executables from its persistent cache without their aliases: Inspect's compile,
    which loads what the program's own call just stored, read alias_size_in_bytes 0 where plain Python
    reads the 24 donated bytes."""
    fields = {"runtime": runtime} if runtime else {}
    (compiled,) = [e for e in server.run(DONATING, fresh=True, **fields) if e["type"] == "compiled"]
    plain = subprocess.run([interpreter_of(server, runtime), "-c", f"FIELDS = {MEMORY_FIELDS!r}\n{PLAIN_MEMORY}"],
                           capture_output=True, text=True, timeout=120,
                           env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu", "HOME": "/tmp"})
    assert plain.returncode == 0, plain.stderr
    expected = json.loads(plain.stdout)
    assert expected["alias_size_in_bytes"] == 24
    assert {name: compiled["memory"][name] for name in MEMORY_FIELDS} == expected


@pytest.mark.parametrize("runtime", every_runtime(), ids=lambda r: r or "default")
def test_a_run_over_its_memory_limit_is_told_the_limit_on_every_offered_runtime(server: LiveServer,
                                                                                 runtime: str | None) -> None:
    fields = {"runtime": runtime} if runtime else {}
    code = "import numpy as np\nblocks = [np.ones(256 * 2**20 // 8) for _ in range(12)]\nprint('unreachable')"
    events = server.run(code, **fields)
    error = next(e for e in events if e["type"] == "error")
    assert done_of(events)["status"] == "error" and error["ename"] == "MemoryError", events[-3:]
    assert "limit of 1 GiB" in error["message"], error
    assert "unreachable" not in output_text(events)


CALLBACK_PROGRAM = """
import jax
import jax.numpy as jnp

@jax.jit
def noisy(x):
    jax.debug.print("x sums to {s}", s=x.sum())
    return x * 2

print(noisy(jnp.arange(4.0)))
"""


def runs_in_one_session(server: LiveServer, code: str, times: int, **fields: object) -> list[list[dict]]:
    """``code`` run ``times`` times by one browser session (its compile cache kept between them), never
    answered from the result cache."""
    async def send() -> list[list[dict]]:
        async with websockets.connect(server.ws_url, max_size=None, additional_headers=server.browser_headers()) as ws:
            found = []
            for index in range(times):
                await ws.send(json.dumps({"type": "run", "id": f"again{index}", "code": code, "fresh": True,
                                          **fields}))
                found.append(await collect(ws, f"again{index}", 180))
            return found
    return asyncio.run(send())


@pytest.mark.parametrize("runtime", every_runtime(), ids=lambda r: r or "default")
def test_a_jitted_function_with_a_host_callback_is_loaded_from_the_cache_on_jax_0_11_and_newer(
        server: LiveServer, runtime: str | None) -> None:
    """JAX 0.11 keeps executables that call back to Python in its persistent cache; 0.10.2 refused to, so
    such a function compiled again in every run."""
    fields = {"runtime": runtime} if runtime else {}
    first, again = runs_in_one_session(server, CALLBACK_PROGRAM, 2, **fields)
    version = next(e for e in first if e["type"] == "started")["jax_version"]
    for events in (first, again):
        assert done_of(events)["status"] == "ok" and output_text(events) == "x sums to 6.0\n[0. 2. 4. 6.]\n"
    (compiled,) = [e for e in again if e["type"] == "compiled" and e["fn"] == "noisy"]
    keeps_callbacks = store.version_key(version) >= (0, 11)
    assert compiled["persistent_cache_hit"] is keeps_callbacks, (version, compiled["phases_ms"])


def offered(server: LiveServer) -> list[str]:
    """The runtimes the server's worker runs programs on, newest first: its own JAX among them."""
    (cpu,) = server.get_json("/api/backends")["backends"]
    return [r["name"] for r in cpu["runtimes"] if not r["problem"]]


def test_backends_list_each_runtime_with_its_versions_and_the_failed_one_with_its_reason(server: LiveServer) -> None:
    (cpu,) = server.get_json("/api/backends")["backends"]
    by_name = {r["name"]: r for r in cpu["runtimes"]}
    # What a run that names none gets: the newest JAX offered, which the backend's own fields describe.
    newest = max(offered(server), key=lambda v: tuple(int(p) for p in v.split(".")))
    assert by_name[cpu["jax_version"]]["default"] is True and cpu["jax_version"] == newest
    assert [r["name"] for r in cpu["runtimes"] if r["default"]] == [newest]
    for version in TEST_RUNTIMES:
        assert by_name[version]["jax_version"] == version and by_name[version]["problem"] is None
        assert by_name[version]["libraries"]["flax"] and by_name[version]["workers"] == 1
    assert "older than the oldest jaxlib" in by_name[NOT_INSTALLABLE]["problem"]
    try:
        urllib.request.urlopen(server.http_url + "/readyz", timeout=10)
        ready = server.get_json("/readyz")
    except urllib.error.HTTPError as exc:
        ready = json.loads(exc.read())
    assert ready["ready"] is True  # the other runtimes serve
    assert NOT_INSTALLABLE in ready["failed_runtimes"]["cpu"]


@pytest.mark.parametrize("runtime", ["9.9.9", NOT_INSTALLABLE])
def test_a_run_on_a_runtime_not_offered_is_rejected_naming_the_offered_ones(server: LiveServer, runtime: str) -> None:
    done = done_of(server.run("print(1)", runtime=runtime))
    assert done["status"] == "rejected"
    assert f"JAX {runtime}" in done["message"] and all(v in done["message"] for v in TEST_RUNTIMES)


def test_the_result_cache_never_answers_one_runtime_with_another_runtimes_run(server: LiveServer) -> None:
    code = "import jax\nprint(jax.__version__)"
    every = offered(server)  # the worker's own JAX is one of them, named like any other
    assert output_text(server.run(code)) == f"{every[0]}\n"  # none named: the newest
    versions = set()
    for runtime in every:
        events = server.run(code, runtime=runtime)
        assert output_text(events) == f"{runtime}\n"
        for _ in range(20):  # the run is stored after its done reached us: give the write a moment under load
            again = server.run(code, runtime=runtime)
            if done_of(again).get("cached"):
                break
            time.sleep(0.25)
        assert done_of(again).get("cached") is True and output_text(again) == f"{runtime}\n"
        versions.add(output_text(events))
    assert len(versions) == len(every)


def test_an_idle_runtime_stops_its_sandboxes_and_starts_them_again_at_its_next_run(server: LiveServer) -> None:
    runtime = TEST_RUNTIMES[0]
    log = server.log_path
    assert output_text(server.run("print(2)", runtime=runtime)) == "2\n"
    stops_before = log.read_text().count(f"runtime {runtime}: idle for")  # it was just used: none is due
    for _ in range(120):  # --runtime-idle-s 4: the sweep stops it within a few seconds
        if log.read_text().count(f"runtime {runtime}: idle for") > stops_before:
            break
        time.sleep(0.5)
    assert log.read_text().count(f"runtime {runtime}: idle for") > stops_before
    started_before = log.read_text().count(f"runtime {runtime}: slot")
    assert output_text(server.run("print(3)", runtime=runtime)) == "3\n"
    assert log.read_text().count(f"runtime {runtime}: slot") > started_before


def test_the_editors_api_index_is_made_for_each_runtime_from_its_own_python(server: LiveServer) -> None:
    # Made at the first request, by each runtime's Python importing JAX and every library: seconds.
    old = server.get_json(f"/api/api-index/{TEST_RUNTIMES[0]}", timeout=120)
    default = server.get_json(f"/api/api-index/{server.get_json('/api/backends')['backends'][0]['jax_version']}",
                              timeout=120)
    assert old["jax_version"] == TEST_RUNTIMES[0] and "typeof" not in old["modules"]["jax"]
    assert "typeof" in default["modules"]["jax"]
    assert old["versions"]["flax"] != default["versions"]["flax"]


@pytest.mark.parametrize("runtime", every_runtime(), ids=lambda r: r or "default")
def test_every_runtime_loads_what_the_shared_cache_holds(server: LiveServer, runtime: str | None) -> None:
    """The trusted fill compiles the gallery into each runtime's shared cache, which runs read read-only:
    JAX before 0.5 stamped each entry it read and, refused, compiled everything again (a re-run of the
    default example took 3x the default JAX's time)."""
    program = (ROOT / "frontend" / "src" / "examples" / "default.py").read_text().replace("time.sleep(", "(lambda *_: 0)(")
    extra = {"runtime": runtime} if runtime else {}
    for _ in range(40):  # a runtime fills its shared cache at its first use, in the background
        compiled = [e for e in server.run(program, fresh=True, **extra) if e["type"] == "compiled"]
        if compiled and all(e["persistent_cache_hit"] for e in compiled):
            break
        time.sleep(2)
    assert compiled and all(e["persistent_cache_hit"] for e in compiled), [
        (e["fn"], e["persistent_cache_hit"]) for e in compiled]
