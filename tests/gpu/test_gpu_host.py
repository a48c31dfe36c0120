"""On a GPU host only (skipped elsewhere, with the reason): the real device, honest timings,
a clear out-of-memory error, recovery after a timeout, and a sandbox that sees only its own GPU."""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from jaxplay.sandbox.isolation import gpu
from tests.conftest import done_of, output_text
from tests.live_server import LiveServer

pytestmark = [pytest.mark.gpu, pytest.mark.live,
              pytest.mark.skipif(not gpu.nvidia_gpus(), reason="no NVIDIA GPU on this host (/dev/nvidia0 absent)")]

MATMUL = """
import jax, jax.numpy as jnp
from playground import timeit
x = jnp.ones((8192, 8192), jnp.bfloat16)
f = jax.jit(lambda a: a @ a)
timeit(lambda: f(x).block_until_ready(), label="matmul")
"""
BARE = """
import time, statistics, jax, jax.numpy as jnp
x = jnp.ones((8192, 8192), jnp.bfloat16)
f = jax.jit(lambda a: a @ a)
f(x).block_until_ready()
samples = []
for _ in range(50):
    t = time.perf_counter(); f(x).block_until_ready(); samples.append(time.perf_counter() - t)
print(statistics.median(samples) * 1e3)
"""


@pytest.fixture(scope="module")
def gpu_server():
    with tempfile.TemporaryDirectory() as data_dir:
        server = LiveServer(Path(data_dir), ["--memory-limit-mb", "16384"])
        try:
            server.wait_ready()
            yield server
        finally:
            server.stop()


def test_the_worker_offers_the_real_gpu(gpu_server):
    backends = gpu_server.get_json("/api/backends")["backends"]
    assert [b["name"] for b in backends if b["workers"]] == ["gpu"]
    assert backends[0]["device_memory_bytes"] > 1 << 30
    out = output_text(gpu_server.run("import jax; print(jax.devices()[0].platform, jax.device_count())"))
    assert out.split()[0] == "gpu" and out.split()[1] == "1"


def test_a_matmuls_time_is_within_10_percent_of_a_bare_timing(gpu_server):
    events = gpu_server.run(MATMUL, timeout=180)
    timing = next(e for e in events if e["type"] == "timing")
    bare = float(subprocess.run([sys.executable, "-c", BARE], capture_output=True, text=True, check=True,
                                env={"PATH": "/usr/bin:/bin", "CUDA_VISIBLE_DEVICES": "0"}).stdout)
    assert abs(timing["median_ms"] - bare) / bare <= 0.10, (timing["median_ms"], bare)


def test_too_much_gpu_memory_is_a_clear_error(gpu_server):
    events = gpu_server.run("import jax.numpy as jnp\nx = jnp.ones((200 << 30,), jnp.uint8)\nprint(x[0])", timeout=120)
    assert done_of(events)["status"] == "error"
    error = next(e for e in events if e["type"] == "error")
    assert error["ename"] == "MemoryError" and error["message"].startswith("Out of GPU memory: this run asked for")


def test_the_gpu_is_usable_after_a_run_that_timed_out(gpu_server):
    events = gpu_server.run("import jax.numpy as jnp\nx = jnp.ones((1 << 28,))\nwhile True: x = x + 1", timeout_s=3)
    assert done_of(events)["status"] == "timeout"
    samples = []
    for _ in range(5):
        events = gpu_server.run("import jax.numpy as jnp\nprint(float(jnp.ones(3).sum()))")
        assert output_text(events).strip() == "3.0"
        samples.append(done_of(events)["elapsed_ms"])
    assert statistics.median(samples) < 5000


def test_a_sandbox_sees_only_its_own_gpu_and_no_network(gpu_server):
    out = output_text(gpu_server.run("""
import os, socket
print(sorted(n for n in os.listdir('/dev') if n.startswith('nvidia') and n[6:].isdigit()))
print(sorted(name for _, name in socket.if_nameindex()))
"""))
    nodes, interfaces = out.strip().splitlines()
    assert len(eval(nodes)) == 1 and eval(interfaces) == ["lo"]
