"""The result cache through the real server, worker and sandbox."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import pytest
import websockets

from tests.conftest import collect, done_of, output_text

pytestmark = pytest.mark.live

JAX_PROGRAM = """
import jax, jax.numpy as jnp
f = jax.jit(lambda x: jnp.sin(x) * 2)
print(f(jnp.arange(3.0)))
jnp.ones((2, 2))
"""


def unique(code: str) -> str:
    return f"# {uuid.uuid4().hex}\n{code}"


def without_ids(events: list[dict]) -> list[dict]:
    return [{k: v for k, v in e.items() if k != "id"} for e in events]


async def timed_runs(live, code: str, count: int, **fields) -> list[tuple[float, list[dict]]]:
    """``count`` runs of ``code`` on one connection of one browser session (a first result answers its own
    session at once: tests/security/test_result_cache_trust.py has other sessions); (ms from send to done,
    events) for each."""
    results = []
    headers = await asyncio.to_thread(live.browser_headers)
    async with websockets.connect(live.ws_url, max_size=None, additional_headers=headers) as ws:
        for i in range(count):
            run_id = f"t{i}"
            start = time.perf_counter()
            await ws.send(json.dumps({"type": "run", "id": run_id, "code": code, **fields}))
            events = await collect(ws, run_id, 90)
            results.append(((time.perf_counter() - start) * 1000, events))
            await asyncio.sleep(0.3)  # the first run's result is written after its done
    return results


def test_an_identical_run_is_answered_from_the_cache_quickly_with_the_same_events(live):
    code = unique(JAX_PROGRAM)
    (live_ms, first), *cached_runs = asyncio.run(timed_runs(live, code, 4))
    assert done_of(first)["status"] == "ok" and "cached" not in done_of(first)
    for cached_ms, events in cached_runs:
        done = done_of(events)
        assert done["cached"] is True and done["cached_at"].endswith("Z")
        assert done["elapsed_ms"] == done_of(first)["elapsed_ms"]
        # The same events as the recorded run, minus its place in the queue.
        assert without_ids(events[:-1]) == without_ids([e for e in first[:-1] if e["type"] != "queued"])
        assert any(e["type"] == "compiled" for e in events) and output_text(events) == output_text(first)
        assert cached_ms < live_ms
    # bench/sharing.py holds the 20 ms target; this guards only against answers that run again.
    best = min(ms for ms, _ in cached_runs)
    assert best < 500, f"cached answers took {[round(ms, 1) for ms, _ in cached_runs]} ms"


def test_fresh_bypasses_the_cache(live):
    code = unique("print(sum(range(10)))")
    runs = asyncio.run(timed_runs(live, code, 2))
    assert done_of(runs[1][1]).get("cached") is True
    events = live.run(code, fresh=True)
    assert "cached" not in done_of(events) and events[0]["type"] == "queued"
    assert output_text(events) == "45\n"


def test_runs_that_read_the_clock_or_os_randomness_are_never_cached(live):
    for body in ("import time\nprint(time.time() > 0)",
                 "import numpy as np\nprint(np.random.rand() < 1)",
                 "import os\nprint(len(os.urandom(4)))",
                 # The zygote's matplotlib imported timeit before the clock was wrapped: it must count all the same.
                 "import timeit\nprint(timeit.timeit('sum(range(100))', number=100) > 0)",
                 "import time\nprint(time.perf_counter_ns() > 0)",
                 "import os\nprint(os.times().elapsed > 0)",
                 "from datetime import datetime\nprint(datetime.now().year > 2000)"):
        code = unique(body)
        runs = asyncio.run(timed_runs(live, code, 2))
        for _, events in runs:
            assert done_of(events)["status"] == "ok" and "cached" not in done_of(events)
        assert any(e["type"] == "nondeterministic" for e in runs[0][1])


def test_seeded_randomness_is_cached(live):
    code = unique("import numpy as np\nnp.random.seed(0)\nprint(np.random.rand())\n"
                  "import jax\nprint(jax.random.uniform(jax.random.key(0)))")
    runs = asyncio.run(timed_runs(live, code, 2))
    assert done_of(runs[1][1]).get("cached") is True
    assert output_text(runs[0][1]) == output_text(runs[1][1])


def test_failed_runs_are_not_cached(live):
    code = unique("print('before')\nraise ValueError('nope')")
    runs = asyncio.run(timed_runs(live, code, 2))
    assert [done_of(events)["status"] for _, events in runs] == ["error", "error"]
    assert all("cached" not in done_of(events) for _, events in runs)


def test_changing_a_run_option_misses_the_cache(live):
    code = unique("print('options')")
    runs = asyncio.run(timed_runs(live, code, 2))
    assert done_of(runs[1][1]).get("cached") is True
    events = live.run(code, inspect=False)
    assert "cached" not in done_of(events)
