"""Replicas on a Redis that wants a password: an ACL user (``redis://user:password@...``), over TLS
(``rediss://``), as production runs it. Real redis-server, real replicas and sandbox.

What must hold: runs cross replicas through the ACL user with only the
commands docs/operations.md lists; the password never appears in a replica's
log, in its worker's environment, or anywhere a sandbox can read; a wrong
password leaves the replica up and unready, saying why (no crash loop), and it
becomes ready without a restart once Redis accepts it.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
import redis

from tests.live.faults import Client, http_status, output_of, readiness, replica, wait_until
from tests.live_server import LiveServer
from tests.redis_server import RedisServer

pytestmark = pytest.mark.live

# Run in the sandbox: anything it can read that names the broker (its URL carries the password).
LOOK_FOR_THE_BROKER = """
import glob, os
hits = [name for name, value in os.environ.items() if 'redis' in value.lower() or 'BROKER' in name]
for path in glob.glob('/proc/*/environ') + glob.glob('/proc/*/cmdline'):
    try:
        data = open(path, 'rb').read()
    except OSError:
        continue
    if b'redis' in data.lower() or b'JAXPLAY_BROKER' in data:
        hits.append(path)
print('hits:', hits)
"""


@pytest.fixture
def acl_redis():
    try:
        server = RedisServer(user="jaxplay", password="Pw-" + os.urandom(9).hex(), tls=True)
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    try:
        yield server
    finally:
        server.stop()


def worker_environments(server: LiveServer) -> list[bytes]:
    """The environment of each process the replica started (its local worker, and whatever that started)."""
    found, parents = [], {server.process.pid}
    for _ in range(3):
        children = set()
        for status in Path("/proc").glob("[0-9]*/status"):
            try:
                fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
                if int(fields["PPid"]) in parents:
                    children.add(int(status.parent.name))
                    found.append((status.parent / "environ").read_bytes())
            except (OSError, ValueError, KeyError):
                continue
        parents = children
    return found


def test_replicas_share_runs_through_an_acl_user_over_tls_and_never_show_its_password(acl_redis, tmp_path):
    assert acl_redis.url.startswith("rediss://jaxplay:")
    a = replica(tmp_path, "a", acl_redis.url, "--no-local-worker", "--expected-backends", "cpu")
    b = None
    try:
        a.wait_ready(workers=0)
        b = replica(tmp_path, "b", acl_redis.url, key_from=tmp_path / "a")
        b.wait_ready()
        for server in (a, b):
            wait_until(lambda s=server: readiness(s)[0] == 200, 30, f"{server.http_url} ready")
            assert readiness(server)[1]["checks"]["broker"] == "reachable"

        async def runs() -> tuple[dict, str]:
            async with Client(a) as client:  # A has no worker: the run crosses Redis to B's
                run_id = await client.run(LOOK_FOR_THE_BROKER)
                [done] = (await client.all_done([run_id], 90)).values()
                return done, output_of(client.events[run_id])

        done, output = asyncio.run(runs())
        assert done["status"] == "ok" and output == "hits: []\n", (done, output)
        environments = worker_environments(b)
        assert environments and not any(acl_redis.password.encode() in env for env in environments)
        # The replicas' Redis user was all they used: nothing of theirs is readable with no password.
        admin = redis.Redis.from_url(acl_redis.admin_url, decode_responses=True)
        assert "jaxplay" in admin.acl_users()
    finally:
        a.stop()
        if b is not None:
            b.stop()
    for server in (a, b):
        log = server.log_path.read_text()
        assert "jaxplay:***@127.0.0.1" in log and acl_redis.password not in log


def test_a_wrong_password_leaves_the_replica_up_and_unready_saying_why_until_redis_takes_it(acl_redis, tmp_path):
    wrong = "Wrong-" + os.urandom(6).hex()
    server = replica(tmp_path, "a", acl_redis.url.replace(acl_redis.password, wrong))
    try:
        server.wait_ready()  # up, with its worker: no crash loop
        status, body = readiness(server)
        assert status == 503 and body["checks"]["broker"].startswith("credentials refused"), body
        assert http_status(server, "/healthz")[0] == 200
        log = server.log_path.read_text()
        assert "credentials refused" in log and "check the user and password in --broker" in log, log[-2000:]
        time.sleep(3)  # retried every second meanwhile, said once
        assert server.log_path.read_text().count("credentials refused") == log.count("credentials refused")
        # The operator fixes the ACL (here: Redis now accepts that password too); the replica needs no restart.
        admin = redis.Redis.from_url(acl_redis.admin_url, decode_responses=True)
        admin.execute_command("ACL", "SETUSER", "jaxplay", f">{wrong}")
        wait_until(lambda: readiness(server)[0] == 200, 20, "ready once Redis takes the password")
        events = server.run("print('through Redis')")
        assert events[-1]["status"] == "ok" and output_of(events) == "through Redis\n"
    finally:
        server.stop()
    log = server.log_path.read_text()
    assert wrong not in log and acl_redis.password not in log and "works again" in log
