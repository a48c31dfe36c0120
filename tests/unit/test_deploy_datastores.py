"""Who may reach the bundled datastores, and the bundled Redis as it would run in the cluster.

The NetworkPolicies are checked against the rendered pods: Redis and PostgreSQL admit only the server pods
(and, with KEDA, KEDA's operator to Redis), on their own port, and connect nowhere. The Redis container's own
start script is then run, with the rendered Secret's values, against Debian's real ``redis-server``: the
default user is off, the servers' broker-url logs in and may do what the broker does and no more, KEDA's user
may read the queue's length and nothing else, and maxmemory sits under the container's memory limit with
``noeviction``.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from redis.exceptions import AuthenticationError, NoPermissionError

from jaxplay.server.runs.broker_keys import connect, events_key, queue_key
from jaxplay.server.runs.brokered_scheduler import BrokeredScheduler
from jaxplay.settings import Settings
from tests.deploy_rendering import BUNDLING, OVERLAYS, named, pod_templates, quantity_bytes, selects
from tests.live_server import free_port
from tests.redis_server import MISSING

SERVER_LABELS = {"app.kubernetes.io/name": "jaxplay-server"}
# What KEDA's Redis-list scaler runs for a list's length (kedacore/keda, pkg/scalers/redis_scaler.go).
KEDA_LIST_LENGTH = """
local listType = redis.call('type', KEYS[1]).ok
if listType == 'list' or listType == 'none' then return redis.call('llen', KEYS[1]) end
return redis.error_reply('ERR unsupported key type: ' .. listType)
"""


def policies_selecting(docs: list[dict], labels: dict[str, str]) -> list[dict]:
    return [p for p in named(docs, "NetworkPolicy").values() if selects(p["spec"]["podSelector"], labels)]


@pytest.mark.parametrize("overlay", BUNDLING)
@pytest.mark.parametrize("store, port", [("jaxplay-redis", 6379), ("jaxplay-postgres", 5432)])
def test_the_datastores_admit_only_the_servers_on_their_own_port(rendered, overlay, store, port):
    docs = rendered[overlay]
    templates = pod_templates(docs)
    template = templates[store]
    assert {"containerPort": port} in [{"containerPort": p["containerPort"]} for p in
                                       template["spec"]["containers"][0]["ports"]]
    policies = policies_selecting(docs, template["metadata"]["labels"])
    assert policies and any("Ingress" in p["spec"]["policyTypes"] for p in policies)
    # Nothing it connects to: its own policy denies every egress.
    assert any("Egress" in p["spec"]["policyTypes"] and p["spec"]["egress"] == [] for p in policies)
    admitted = []
    for policy in policies:
        for rule in policy["spec"].get("ingress", []):
            assert [p["port"] for p in rule["ports"]] == [port] and rule["from"], policy["metadata"]["name"]
            admitted += rule["from"]
    same_namespace = [peer["podSelector"] for peer in admitted if "namespaceSelector" not in peer]
    assert same_namespace == [{"matchLabels": SERVER_LABELS}]
    # Of the pods of this overlay, the server's and only they are admitted; never a worker's.
    for name, other in templates.items():
        let_in = any(selects(s, other["metadata"]["labels"]) for s in same_namespace)
        assert let_in == (name == "jaxplay-server"), f"{overlay}: {name} may reach {store}: {let_in}"
    others = [peer for peer in admitted if "namespaceSelector" in peer]
    if store == "jaxplay-redis" and overlay == "keda":
        assert others == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "keda"}},
                           "podSelector": {"matchLabels": {"app.kubernetes.io/name": "keda-operator"}}}]
    else:
        assert others == []


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_workers_still_reach_only_the_servers_worker_listener(rendered, overlay):
    docs = rendered[overlay]
    for name, template in pod_templates(docs).items():
        if not name.startswith("jaxplay-worker-"):
            continue
        [policy] = policies_selecting(docs, template["metadata"]["labels"])
        assert policy["spec"]["ingress"] == []
        to_server = [rule for rule in policy["spec"]["egress"]
                     if any(peer.get("podSelector") == {"matchLabels": SERVER_LABELS} for peer in rule["to"])]
        assert [rule["ports"] for rule in to_server] == [[{"protocol": "TCP", "port": 8001}]]


def redis_container(docs: list[dict]) -> dict:
    return named(docs, "Deployment")["jaxplay-redis"]["spec"]["template"]["spec"]["containers"][0]


def secret_values(docs: list[dict]) -> dict[str, str]:
    [secret] = named(docs, "Secret").values()
    return {key: base64.b64decode(value).decode() for key, value in secret["data"].items()}


@pytest.mark.parametrize("overlay", BUNDLING)
def test_redis_is_bounded_under_its_memory_limit_and_locked_with_the_secrets_passwords(rendered, overlay):
    docs = rendered[overlay]
    container = redis_container(docs)
    script = container["args"][0]
    words = script.replace("\\\n", " ").split()
    maxmemory = quantity_bytes(words[words.index("--maxmemory") + 1])
    limit = quantity_bytes(container["resources"]["limits"]["memory"])
    # What maxmemory leaves out (fragmentation, client buffers, Redis itself) must fit under the limit.
    assert maxmemory <= 0.8 * limit, (maxmemory, limit)
    assert container["resources"]["requests"]["memory"] == container["resources"]["limits"]["memory"]
    assert words[words.index("--maxmemory-policy") + 1] == "noeviction"
    env = {e["name"]: e["valueFrom"]["secretKeyRef"]["key"] for e in container["env"] if "valueFrom" in e}
    assert env == {"REDIS_PASSWORD": "redis-password", "REDIS_KEDA_PASSWORD": "redis-keda-password"}
    assert "user default off" in script and '--save ""' in script


@pytest.fixture(scope="module")
def bundled_redis(rendered, tmp_path_factory) -> Iterator[tuple[int, dict[str, str], dict]]:
    """The dev overlay's Redis container script, run on this host with its Secret's values."""
    if shutil.which("redis-server") is None:
        pytest.skip(MISSING)
    docs = rendered["dev"]
    container, values = redis_container(docs), secret_values(docs)
    run_dir = tmp_path_factory.mktemp("redis-run")
    env = {**os.environ, "REDIS_PASSWORD": values["redis-password"],
           "REDIS_KEDA_PASSWORD": values["redis-keda-password"], "REDIS_ACL_FILE": str(run_dir / "users.acl")}
    port = free_port()
    command = [*container["command"], *container["args"], "--port", str(port), "--bind", "127.0.0.1",
               "--dir", str(run_dir)]
    process = subprocess.Popen(command, env=env, cwd=run_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while True:
            assert process.poll() is None, process.stdout.read().decode() if process.stdout else ""
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the bundled Redis's script did not start redis-server"
                time.sleep(0.05)
        yield port, values, {**container, "env_values": env}
    finally:
        process.terminate()
        process.wait(10)


def here(url: str, port: int) -> str:
    """``url`` (redis://USER:PASSWORD@jaxplay-redis:6379/0) pointed at the Redis on this host."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{parts.username}:{parts.password}@127.0.0.1:{port}"))


def test_the_bundled_redis_refuses_anyone_without_a_password(bundled_redis):
    port, _, _ = bundled_redis
    with socket.create_connection(("127.0.0.1", port), timeout=5) as anonymous:  # any pod, no password
        anonymous.sendall(b"RPUSH jaxplay:queue:cpu forged\r\n")
        assert anonymous.recv(200).startswith(b"-NOAUTH")
    with pytest.raises(AuthenticationError):
        redis.Redis(port=port, username="default", password="").ping()


def test_the_servers_broker_url_does_what_the_broker_does_and_no_more(bundled_redis):
    port, values, _ = bundled_redis

    async def as_the_server() -> tuple[dict, list[str]]:
        client = connect(here(values["broker-url"], port))  # the broker's own client and options
        try:
            assert await client.ping()
            await client.rpush(queue_key("cpu"), "{}")
            await client.xadd(events_key("replica"), {"event": "{}"})
            await client.hset("jaxplay:session:s", "run", "{}")
            await client.publish("jaxplay:cancels", "key")
            memory = await client.info("memory")  # what /metrics reports
            refused = []
            for command in (("FLUSHALL",), ("CONFIG", "GET", "maxmemory"), ("KEYS", "*"), ("SET", "other", "1"),
                            ("ACL", "LIST"), ("SHUTDOWN",), ("CLIENT", "KILL", "ID", "1")):
                try:
                    await client.execute_command(*command)
                except NoPermissionError:
                    refused.append(command[0])
            return memory, refused
        finally:
            await client.aclose()

    memory, refused = asyncio.run(as_the_server())
    assert refused == ["FLUSHALL", "CONFIG", "KEYS", "SET", "ACL", "SHUTDOWN", "CLIENT"]
    assert memory["maxmemory"] == 384 << 20 and memory["maxmemory_policy"] == "noeviction"


def test_keda_reads_the_queues_length_and_nothing_else(bundled_redis, rendered):
    port, values, _ = bundled_redis
    auth = named(rendered["keda"], "TriggerAuthentication")["jaxplay-redis-keda"]
    given = {ref["parameter"]: values[ref["key"]] for ref in auth["spec"]["secretTargetRef"]}
    keda = redis.Redis(port=port, username=given["username"], password=given["password"], decode_responses=True)
    server = redis.Redis.from_url(here(values["broker-url"], port))
    server.delete(queue_key("cpu"))
    server.rpush(queue_key("cpu"), "a", "b", "c")
    assert keda.ping() and keda.eval(KEDA_LIST_LENGTH, 1, queue_key("cpu")) == 3
    with pytest.raises(NoPermissionError):
        keda.rpush(queue_key("cpu"), "a forged job")
    with pytest.raises(NoPermissionError):
        keda.lpop(queue_key("cpu"))
    with pytest.raises(NoPermissionError):
        keda.eval(KEDA_LIST_LENGTH, 1, events_key("replica"))  # another key than the queues
    with pytest.raises(NoPermissionError):
        keda.publish("jaxplay:cancels", "key")
    assert server.llen(queue_key("cpu")) == 3


def test_the_readiness_probe_logs_in(bundled_redis):
    port, _, container = bundled_redis
    probe = container["readinessProbe"]["exec"]["command"]
    probe = [*probe[:-1], probe[-1].replace("redis-cli ", f"redis-cli -p {port} ")]
    env = container["env_values"]
    assert subprocess.run(probe, env=env, timeout=10).returncode == 0
    wrong = {**env, "REDIS_PASSWORD": "not-the-password"}
    assert subprocess.run(probe, env=wrong, timeout=10, capture_output=True).returncode != 0


def test_the_script_refuses_a_password_an_acl_line_cannot_hold(rendered, tmp_path):
    if shutil.which("redis-server") is None:
        pytest.skip(MISSING)
    container = redis_container(rendered["dev"])
    env = {**os.environ, "REDIS_PASSWORD": "two words", "REDIS_KEDA_PASSWORD": "fine",
           "REDIS_ACL_FILE": str(tmp_path / "users.acl")}
    result = subprocess.run([*container["command"], *container["args"], "--port", str(free_port())], env=env,
                            capture_output=True, text=True, timeout=10)
    assert result.returncode == 1 and "without spaces" in result.stderr
    assert not Path(tmp_path / "users.acl").exists()


def test_a_replica_brokers_as_the_acl_user_and_never_logs_its_password(bundled_redis, caplog, tmp_path):
    """The whole broker (heartbeats, the event reader, the cancel listener, the metrics' INFO) under the ACL."""
    port, values, _ = bundled_redis
    settings = Settings(data_dir=tmp_path, local_workers=0, broker=here(values["broker-url"], port))

    async def replica() -> tuple[str, tuple[int, int] | None]:
        scheduler = BrokeredScheduler(settings)
        await scheduler.broker.start()
        try:
            await asyncio.sleep(2.5)  # two heartbeats
            return await scheduler.broker.probe(), await scheduler.broker_memory()
        finally:
            await scheduler.broker.stop()

    caplog.set_level(logging.DEBUG)
    reachable, memory = asyncio.run(replica())
    assert reachable == "reachable" and memory is not None and memory[1] == 384 << 20
    assert any(r.getMessage().startswith("broker: replica") for r in caplog.records)
    assert "NOPERM" not in caplog.text and "no permissions" not in caplog.text, caplog.text
    assert values["redis-password"] not in caplog.text
    # A Redis it cannot reach at start: the replica starts anyway, unready (no crash loop), and says why, without
    # the password.
    unreachable = settings.replace(broker=here(values["broker-url"], free_port()))

    async def unreachable_replica() -> str:
        scheduler = BrokeredScheduler(unreachable)
        await scheduler.broker.start()
        try:
            return await scheduler.broker.probe()
        finally:
            await scheduler.broker.stop()

    caplog.clear()
    assert asyncio.run(unreachable_replica()).startswith("unreachable")
    assert "cannot use Redis at redis://jaxplay:***@" in caplog.text and values["redis-password"] not in caplog.text
