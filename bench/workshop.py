"""A workshop on a real server: one room followed by many, bursts of runs, and flooding clients.

Measures, in one run on this machine (real server, worker and sandbox; real websockets clients, all in
this one process, so the clients' own work shares the CPU with the server). Every attendee is a browser
behind the same address (127.0.0.1, as a classroom behind one NAT): it opens the room's link, which starts
its session (the cookie), then connects with it.
- followers: N attendees open the room link and join; the server process's memory before and with them;
- edit latency: presenter ``room_edit`` sent -> ``room_edit`` received by each follower (all pairs);
- broadcast latency: the presenter's own ``done`` received -> each follower's relayed ``done`` received;
- attendees run: all N press Run on a program of their own at once (in the room: its attendee timeout),
  send -> done, all ok and none rejected;
- identical burst: M of them press Run on the same code at once, send -> done;
- distinct burst: M of them each run a different small program at once (not cached): send -> done,
  and the fairness of the waits (send -> started): max / mean;
- flood: one browser queues F runs; another browser's wait (send -> started) then, against the same run on
  an idle server, and against one run's duration;
- cookie-less flood (a server with the default limits): 30 connections without the session cookie each
  send 4 runs of 2 s (120 in all); another browser's print(1), send -> done.

Targets: edit p95 <= 250 ms, broadcast p95 <= 1 s, identical burst p95 <= 1 s, distinct burst and the
attendees' runs all ok and none rejected, flood adds at most one run's duration, the other browser's
print(1) under the cookie-less flood done within 5 s.
Usage: python bench/workshop.py [--followers 200] [--burst 100] [--flood 40]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import websockets

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.stats import percentile  # noqa: E402
from tests.live_server import LiveServer, running_server  # noqa: E402

EDITS = 40
EDIT_GAP_S = 0.1
PRESENTER_RUNS = 5
FLOOD_CODE = "import time\ntime.sleep(0.5)\nprint({i})"


def ms(seconds: list[float]) -> list[float]:
    return [s * 1000 for s in seconds]


def line(name: str, samples_ms: list[float], target: str = "") -> str:
    return (f"{name:<40} n={len(samples_ms):<6} p50={percentile(samples_ms, 0.5):8.1f} ms  "
            f"p95={percentile(samples_ms, 0.95):8.1f} ms  max={max(samples_ms):8.1f} ms  {target}")


def verdict(ok: bool) -> str:
    return "[met]" if ok else "[MISSED]"


def rss_mib(pid: int) -> float:
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith("VmRSS:"):
            return int(row.split()[1]) / 1024
    return float("nan")


def attendee_cookie(server: LiveServer, room: str) -> str:
    """What an attendee's browser gets when it opens the room link: its session cookie."""
    with urllib.request.urlopen(f"{server.http_url}/r/{room}", timeout=30) as response:
        return response.headers["set-cookie"].split(";")[0]


def create_room(server: LiveServer) -> dict[str, Any]:
    request = urllib.request.Request(server.http_url + "/api/rooms", data=b'{"program": "print(1)"}',
                                     headers={"content-type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


async def recv_until(ws: Any, predicate: Any, timeout: float = 120.0) -> dict[str, Any]:
    async with asyncio.timeout(timeout):
        while True:
            event = json.loads(await ws.recv())
            if predicate(event):
                return event


class Follower:
    """One attendee's socket; records when each edit version and each relayed done arrived."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.edits: dict[int, float] = {}
        self.run_done: dict[str, float] = {}

    async def listen(self) -> None:
        try:
            async for frame in self.ws:
                event = json.loads(frame)
                now = time.perf_counter()
                if event["type"] == "room_edit":
                    self.edits[event["version"]] = now
                elif event["type"] == "room_run" and event["event"]["type"] == "done":
                    self.run_done[event["event"]["id"]] = now
        except websockets.ConnectionClosed:
            pass


async def room_phase(server: LiveServer, followers_count: int) -> dict[str, Any]:
    room = create_room(server)
    presenter = await websockets.connect(server.ws_url, max_size=None, additional_headers=server.browser_headers())
    await presenter.send(json.dumps({"type": "room_join", "room": room["room"], "secret": room["secret"]}))
    await recv_until(presenter, lambda e: e["type"] == "room_state")
    rss_before = rss_mib(server.process.pid)
    followers, cookies = [], []
    for _ in range(followers_count):
        cookies.append(await asyncio.to_thread(attendee_cookie, server, room["room"]))
        ws = await websockets.connect(server.ws_url, max_size=None, additional_headers={"cookie": cookies[-1]})
        await ws.send(json.dumps({"type": "room_join", "room": room["room"]}))
        await recv_until(ws, lambda e: e["type"] == "room_state")
        followers.append(Follower(ws))
    listeners = [asyncio.create_task(f.listen()) for f in followers]
    await asyncio.sleep(1.0)
    rss_with = rss_mib(server.process.pid)

    sent: dict[int, float] = {}
    version = 0
    for i in range(EDITS):
        version += 1
        sent[version] = time.perf_counter()
        code = f"x = {i}\nprint(x * 2)"
        await presenter.send(json.dumps({"type": "room_edit", "code": code, "selection": [len(code), len(code)]}))
        await asyncio.sleep(EDIT_GAP_S)
    await asyncio.sleep(2.0)
    # Versions count from the room's creation; this presenter's edits are the last EDITS of them.
    edit_latency, missing = [], 0
    for follower in followers:
        versions = sorted(follower.edits)[-EDITS:]
        if len(versions) < EDITS:
            missing += EDITS - len(versions)
        for k, v in enumerate(versions):
            edit_latency.append(follower.edits[v] - sent[k + 1])

    broadcast = []
    for r in range(PRESENTER_RUNS):
        run_id = f"p{r}"
        code = f"import jax.numpy as jnp\nprint('slide {r}', jnp.arange({r + 3}).sum())  # {uuid.uuid4().hex}"
        await presenter.send(json.dumps({"type": "run", "id": run_id, "code": code, "fresh": True}))
        await recv_until(presenter, lambda e, rid=run_id: e.get("id") == rid and e["type"] == "done")
        own_done = time.perf_counter()
        await asyncio.sleep(1.5)
        for follower in followers:
            if run_id in follower.run_done:
                # Negative when a follower's copy was read before the presenter's own (same event loop).
                broadcast.append(follower.run_done[run_id] - own_done)
            else:
                missing += 1
    for task in listeners:
        task.cancel()
    # Everyone in the room presses Run on a program of their own at once.
    tag = uuid.uuid4().hex[:8]
    attendee_runs = await asyncio.gather(*(run_on(f.ws, f"a{i}", f"print('attendee', {i}, '{tag}')")
                                           for i, f in enumerate(followers)))
    for follower in followers:
        await follower.ws.close()
    await presenter.close()
    return {"edit": ms(edit_latency), "broadcast": ms(broadcast), "missing": missing,
            "rss_before": rss_before, "rss_with": rss_with, "attendee_runs": attendee_runs, "cookies": cookies}


async def run_on(ws: Any, run_id: str, code: str, fresh: bool = False) -> dict[str, float | str]:
    """Send one run on ``ws`` and read it through its done: status, send -> done, send -> started."""
    start = time.perf_counter()
    await ws.send(json.dumps({"type": "run", "id": run_id, "code": code, **({"fresh": True} if fresh else {})}))
    started = None
    while True:
        event = json.loads(await ws.recv())
        if event.get("id") != run_id:
            continue
        if event["type"] == "started":
            started = time.perf_counter()
        if event["type"] == "done":
            end = time.perf_counter()
            return {"status": event["status"], "total": end - start, "wait": (started or end) - start}


async def burst(server: LiveServer, codes: list[str], cookies: list[str]) -> list[dict[str, float | str]]:
    """Each code from its own browser (one of ``cookies``, the room's attendees), all at once."""
    sockets = [await websockets.connect(server.ws_url, max_size=None, additional_headers={"cookie": cookie})
               for cookie, _ in zip(cookies, codes, strict=False)]
    try:
        return await asyncio.gather(*(run_on(ws, f"b{i}", code) for i, (ws, code) in enumerate(zip(sockets, codes,
                                                                                                  strict=True))))
    finally:
        for ws in sockets:
            await ws.close()


async def other_client_wait(server: LiveServer, tag: str) -> float:
    async with websockets.connect(server.ws_url, additional_headers=server.browser_headers()) as ws:
        start = time.perf_counter()
        await ws.send(json.dumps({"type": "run", "id": "other", "fresh": True, "code": f"print('other {tag}')"}))
        await recv_until(ws, lambda e: e.get("id") == "other" and e["type"] == "started")
        waited = time.perf_counter() - start
        await recv_until(ws, lambda e: e.get("id") == "other" and e["type"] == "done")
        return waited


async def flood_phase(server: LiveServer, flood: int) -> dict[str, float]:
    idle = [await other_client_wait(server, f"idle {i}") for i in range(3)]
    async with websockets.connect(server.ws_url, additional_headers=server.browser_headers()) as flooder:
        ids = [f"f{i}" for i in range(flood)]
        started: dict[str, float] = {}
        durations: list[float] = []
        queue_depth: list[int] = []

        async def read_flood() -> None:
            pending = set(ids)
            while pending:
                event = json.loads(await flooder.recv())
                if event["type"] == "started":
                    started[event["id"]] = time.perf_counter()
                if event["type"] == "done" and event["id"] in pending:
                    pending.discard(event["id"])
                    if event["id"] in started:
                        durations.append(time.perf_counter() - started[event["id"]])

        reader = asyncio.create_task(read_flood())
        for i, run_id in enumerate(ids):
            await flooder.send(json.dumps({"type": "run", "id": run_id, "fresh": True,
                                           "code": FLOOD_CODE.format(i=i)}))
        while len(started) < 2:  # the flood holds the slots; the rest of it waits in the queue
            await asyncio.sleep(0.05)
        flooded = []
        for i in range(3):
            queue_depth.append(flood - len(started))
            flooded.append(await other_client_wait(server, f"flooded {i}"))
        async with asyncio.timeout(600):
            await reader
    return {"idle": sum(idle) / len(idle), "flooded": sum(flooded) / len(flooded), "flooded_max": max(flooded),
            "run": sum(durations) / max(len(durations), 1), "queued": min(queue_depth)}


async def cookieless_flood_phase(server: LiveServer, connections: int = 30, runs_each: int = 4) -> dict[str, Any]:
    """A script's flood without the session cookie: 30 connections x 4 runs of 2 s; another browser's print(1)."""
    flood, refused = [], 0
    for _ in range(connections):
        ws = await websockets.connect(server.ws_url, max_queue=None)
        try:
            await asyncio.wait_for(ws.recv(), 0.3)  # only a refused connection is told something at once
            refused += 1
            await ws.close()
        except TimeoutError:
            flood.append(ws)
        except websockets.ConnectionClosed:
            refused += 1
    outcomes: list[str] = []

    async def read(ws: Any) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for frame in ws:
                event = json.loads(frame)
                if event["type"] == "done":
                    outcomes.append(event["status"])

    readers = [asyncio.create_task(read(ws)) for ws in flood]
    for c, ws in enumerate(flood):
        for r in range(runs_each):
            await ws.send(json.dumps({"type": "run", "id": f"f{c}-{r}", "fresh": True,
                                      "code": f"import time\ntime.sleep(2)\nprint({c}, {r})"}))
    await asyncio.sleep(1.0)
    async with websockets.connect(server.ws_url, additional_headers=server.browser_headers()) as browser:
        mine = await run_on(browser, "mine", f"print(1)  # {uuid.uuid4().hex}", fresh=True)
    deadline = time.monotonic() + 120
    while len(outcomes) < len(flood) * runs_each and time.monotonic() < deadline:  # the accepted flood drains
        await asyncio.sleep(0.2)
    await asyncio.gather(*(ws.close() for ws in flood))
    for task in readers:
        task.cancel()
    return {"mine": mine, "refused_connections": refused, "accepted": outcomes.count("ok"),
            "rejected": outcomes.count("rejected"), "attempted": connections * runs_each}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--followers", type=int, default=200)
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument("--flood", type=int, default=40)
    args = parser.parse_args()
    # The flooding client gets a limit that lets it queue --flood runs (the defaults would refuse it sooner).
    limits = ["--max-runs-per-connection", str(args.flood), "--max-runs-per-client", str(args.flood)]
    with running_server(limits) as server:
        room = asyncio.run(room_phase(server, args.followers))
        cookies = room["cookies"]
        same_code = f"total = 0\nfor i in range(2_000_000):\n    total += i % 7\nprint('same', total)  # {uuid.uuid4().hex}"
        identical = asyncio.run(burst(server, [same_code] * args.burst, cookies))
        tag = uuid.uuid4().hex[:8]
        distinct = asyncio.run(burst(server, [f"print({i} * 2, '{tag}')" for i in range(args.burst)], cookies))
        flood = asyncio.run(flood_phase(server, args.flood))
    with running_server() as server:  # the limits as shipped
        cookieless = asyncio.run(cookieless_flood_phase(server))

    print(f"server memory: {room['rss_before']:.1f} MiB with the presenter alone, "
          f"{room['rss_with']:.1f} MiB with {args.followers} followers "
          f"(+{(room['rss_with'] - room['rss_before']) * 1024 / args.followers:.0f} KiB each)")
    print(line(f"edit -> {args.followers} followers", room["edit"],
               f"target p95 <= 250 ms {verdict(percentile(room['edit'], 0.95) <= 250)}"))
    print(line("presenter done -> followers' done", room["broadcast"],
               f"target p95 <= 1000 ms {verdict(percentile(room['broadcast'], 0.95) <= 1000)}"))
    print(f"{'':<40} messages a follower never got: {room['missing']}")
    totals = ms([float(r["total"]) for r in room["attendee_runs"]])
    ok = sum(r["status"] == "ok" for r in room["attendee_runs"])
    rejected = sum(r["status"] == "rejected" for r in room["attendee_runs"])
    print(line(f"{args.followers} attendees (one address) run", totals,
               f"ok {ok}/{args.followers}, rejected {rejected} {verdict(ok == args.followers)}"))
    totals = ms([float(r["total"]) for r in identical])
    ok = sum(r["status"] == "ok" for r in identical)
    print(line(f"{args.burst} identical runs, send -> done", totals,
               f"ok {ok}/{args.burst}; target p95 <= 1000 ms {verdict(percentile(totals, 0.95) <= 1000)}"))
    totals = ms([float(r["total"]) for r in distinct])
    waits = ms([float(r["wait"]) for r in distinct])
    ok = sum(r["status"] == "ok" for r in distinct)
    rejected = sum(r["status"] == "rejected" for r in distinct)
    fairness = max(waits) / (sum(waits) / len(waits))
    print(line(f"{args.burst} distinct runs, send -> done", totals, f"ok {ok}/{args.burst}, rejected {rejected} "
                                                                    f"{verdict(ok == args.burst)}"))
    print(line(f"{args.burst} distinct runs, send -> started", waits, f"max/mean wait = {fairness:.2f}"))
    extra = flood["flooded"] - flood["idle"]
    print(f"flood of {args.flood} runs from one client (at least {flood['queued']:.0f} still queued when the other "
          f"client ran): another client's wait {flood['flooded'] * 1000:.0f} ms "
          f"(max {flood['flooded_max'] * 1000:.0f} ms) vs {flood['idle'] * 1000:.0f} ms idle: "
          f"+{extra * 1000:.0f} ms, one run takes {flood['run'] * 1000:.0f} ms "
          f"target extra <= one run {verdict(extra <= flood['run'])}")
    mine = cookieless["mine"]
    print(f"cookie-less flood: {cookieless['attempted']} runs of 2 s from 30 connections; "
          f"{cookieless['refused_connections']} connections refused, {cookieless['accepted']} runs ran, "
          f"{cookieless['rejected']} rejected; another browser's print(1) {mine['status']} in "
          f"{float(mine['total']) * 1000:.0f} ms (started after {float(mine['wait']) * 1000:.0f} ms) "
          f"target <= 5000 ms {verdict(mine['status'] == 'ok' and float(mine['total']) <= 5.0)}")


if __name__ == "__main__":
    main()
