"""A hostile program inside a brokered run, against the broker's Redis: the queue, the claims and every other
run's events live there, so a run that could connect could read others' output, forge events or steal jobs.

What must hold: the sandbox has no network at all, so Redis cannot be reached from
a run, by any address of the host's loopback, even a Redis with no password.
"""

from __future__ import annotations

import json

import pytest

from tests.live.faults import output_of, readiness, replica, wait_until
from tests.redis_server import RedisServer

pytestmark = pytest.mark.live

# Run in the sandbox: connect to the broker's port every way the loopback offers, and say what happened.
REACH_REDIS = """
import json, socket
found = {}
for host in ('127.0.0.1', '::1', 'localhost', '0.0.0.0'):
    try:
        with socket.create_connection((host, PORT), timeout=2) as s:
            s.sendall(b'KEYS *\\r\\n')
            found[host] = 'answered: ' + s.recv(200).decode(errors='replace')
    except OSError as exc:
        found[host] = f'{type(exc).__name__} {exc.errno}'
print(json.dumps(found))
"""


def test_a_run_cannot_reach_the_brokers_redis(redis_server: RedisServer, tmp_path):
    server = replica(tmp_path, "a", redis_server.url)
    try:
        server.wait_ready()
        wait_until(lambda: readiness(server)[0] == 200, 30, "ready")
        events = server.run(REACH_REDIS.replace("PORT", str(redis_server.port)))
        assert events[-1]["status"] == "ok", events[-1]
        found = json.loads(output_of(events))
        assert found.keys() == {"127.0.0.1", "::1", "localhost", "0.0.0.0"}, found
        assert not any(outcome.startswith("answered") for outcome in found.values()), found
    finally:
        server.stop()
