"""Profiles, rooflines and pass pipelines through the real server, worker and bubblewrap sandbox."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets

from tests.live_server import collect, done_of, output_text, running_server

pytestmark = pytest.mark.live

PROGRAM = """
import jax
import jax.numpy as jnp

@jax.jit
def step(w, x):
    return w - 0.1 * jnp.tanh(x @ w)

x = jnp.ones((64, 64))
w = jnp.ones(64)
for _ in range(5):
    w = step(w, x)
print("w0", float(w[0]) > 0)
"""


def of_type(events: list[dict], kind: str) -> list[dict]:
    return [e for e in events if e["type"] == kind]


def request(live, message: dict, timeout: float = 120.0) -> list[dict]:
    async def send() -> list[dict]:
        async with websockets.connect(live.ws_url, max_size=None) as ws:
            await ws.send(json.dumps(message))
            return await collect(ws, message["id"], timeout)
    return asyncio.run(send())


def test_backends_report_the_device_peak_the_worker_measured(live):
    (cpu,) = [b for b in live.get_json("/api/backends")["backends"] if b["name"] == "cpu"]
    peak = cpu["device_peak"]
    assert peak["flops_per_s"] > 1e8 and peak["bytes_per_s"] > 1e7
    assert "matmul" in peak["how"] and peak["measured_at"]


def test_every_run_gets_its_roofline_and_equation_counts(live):
    events = live.run(PROGRAM, fresh=True)
    assert done_of(events)["status"] == "ok", output_text(events, "stderr")
    (compiled,) = of_type(events, "compiled")
    assert compiled["eqn_counts"]["lines"][0]["line"] == 7
    (roofline,) = of_type(events, "roofline")
    (row,) = roofline["functions"]
    assert row["key"] == compiled["key"] and row["timed_calls"] == 4
    assert roofline["peak"]["flops_per_s"] > 0 and row["bound"] in ("memory", "compute")
    assert not of_type(events, "profile") and not of_type(events, "nondeterministic")


def test_a_profiled_run_sends_its_timeline_and_is_never_replayed_from_the_cache(live):
    first = live.run(PROGRAM, profile=True)
    assert done_of(first)["status"] == "ok", output_text(first, "stderr")
    (profile,) = of_type(first, "profile")
    assert profile["label"] == "the whole run" and profile["slices"]
    ops = [s for s in profile["slices"] if profile["kinds"][s[5]] == "op" and s[6] >= 0]
    assert ops and profile["links"][ops[0][6]][0] == "step"
    second = live.run(PROGRAM, profile=True)
    assert not done_of(second).get("cached") and of_type(second, "profile")


def test_passes_request_runs_the_program_again_and_answers_with_the_pipeline_only(live):
    events = request(live, {"type": "passes", "id": "p1", "code": PROGRAM, "key": "1.1", "fn": "step"})
    assert {e["type"] for e in events} <= {"queued", "started", "passes", "error", "notice", "done"}
    assert done_of(events)["status"] == "ok"
    (passes,) = of_type(events, "passes")
    assert "error" not in passes, passes
    assert passes["module"] == "jit_step" and passes["compile_ms"] > 0 and passes["dump_files"] > 10
    assert any(p["changed"] and p["dump"] for p in passes["passes"])
    assert passes["dumps"][0]["text"].startswith("HloModule jit_step")


def test_a_passes_request_names_what_to_change(live):
    events = request(live, {"type": "passes", "id": "p2", "code": PROGRAM, "key": "first", "fn": "step"})
    done = done_of(events)
    assert done["status"] == "rejected" and "'key'" in done["message"]
    missing = request(live, {"type": "passes", "id": "p3", "code": PROGRAM, "key": "1.9", "fn": "step"})
    (answer,) = of_type(missing, "passes")
    assert "did not compile step" in answer["error"]


BIG_MODULE = """
import jax
import jax.numpy as jnp

@jax.jit
def big(x):
    for _ in range(100):  # about 400 operations: its per-pass dumps take seconds
        x = jnp.tanh(x @ x.T) * 0.5 + jnp.sin(x)
    return x

print(big(jnp.ones((32, 32)))[0, 0])
"""


def test_a_passes_requests_own_work_stops_at_its_limit():
    """The dump of a large module is answered with an error naming the bound once its own work passes
    --passes-work-limit-s: it does not hold the slot until the run's deadline."""
    with running_server(["--passes-work-limit-s", "0.3"]) as server:
        events = request(server, {"type": "passes", "id": "big", "code": BIG_MODULE, "key": "1.1", "fn": "big"})
    (answer,) = of_type(events, "passes")
    assert "took over 0.3 s" in answer["error"], answer
    assert done_of(events)["status"] == "ok" and done_of(events)["elapsed_ms"] < 20_000


HOSTILE = r"""
import json, os
from jaxplay.sandbox.output import events  # the run's own event pipe, which its code can write to
from playground import profile
import jax.numpy as jnp
for i in range(4):
    with profile(f"p{i}"):
        jnp.ones(4).block_until_ready()
big = json.dumps({"type": "passes", "key": "1.1", "fn": "f", "header": "x" * (9 << 20)}) + "\n"
for _ in range(2):
    os.write(events._fd, big.encode())
fake = json.dumps({"type": "profile", "label": "fake", "line": None, "notices": [], "names": ["x" * (5 << 20)]})
for _ in range(5):
    os.write(events._fd, (fake + "\n").encode())
print("done")
"""


@pytest.mark.attack("performance events past their caps")
def test_a_hostile_program_cannot_pass_the_caps_with_these_features(live):
    events = live.run(HOSTILE, timeout=180)
    assert done_of(events)["status"] == "ok", output_text(events, "stderr")
    profiles = of_type(events, "profile")
    real = [p for p in profiles if p["label"].startswith("p")]
    assert len(real) == 3  # at most three profiles a run
    assert "more than 3 profiles" in output_text(events, "stderr")
    passes_bytes = sum(len(json.dumps(e)) for e in of_type(events, "passes"))
    profile_bytes = sum(len(json.dumps(e)) for e in profiles)
    assert passes_bytes <= 16 << 20 and profile_bytes <= 24 << 20
    notices = " ".join(e["message"] for e in of_type(events, "notice"))
    assert "more 'passes' data than a run may send" in notices
    assert "more 'profile' data than a run may send" in notices
