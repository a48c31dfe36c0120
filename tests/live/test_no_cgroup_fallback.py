"""Hosts without a writable cgroup (as GPU hosts often are): the rlimit fallback keeps JAX working.

The old fallback, an address-space limit, broke CUDA's start-up and XLA's
thread creation on many-core hosts. ``--cgroups off`` forces the fallback
here, and a compile that starts threads on every device must still work,
while a run that asks for far too much memory still ends as a clear error.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.conftest import done_of, output_text
from tests.live_server import LiveServer

pytestmark = pytest.mark.live


@pytest.fixture(scope="module")
def no_cgroup():
    with tempfile.TemporaryDirectory() as data_dir:
        server = LiveServer(Path(data_dir), ["--cgroups", "off", "--slots", "1"])
        try:
            server.wait_ready()
            yield server
        finally:
            server.stop()


def test_a_multithreaded_compile_works_under_the_fallback_limits(no_cgroup):
    events = no_cgroup.run("""
import resource, threading
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
print("data limit set:", resource.getrlimit(resource.RLIMIT_DATA)[0] != resource.RLIM_INFINITY)
print("address space unlimited:", resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY)
mesh = jax.make_mesh((8,), ("x",))
x = jax.device_put(jnp.ones((8192, 512), jnp.bfloat16), NamedSharding(mesh, P("x")))
w = jnp.ones((512, 1024), jnp.bfloat16)
y = jax.jit(lambda a, b: jnp.tanh(a @ b).astype(jnp.float32).sum())(x, w)
print(float(y) > 0, threading.active_count() >= 1)
""")
    assert done_of(events)["status"] == "ok", events[-3:]
    assert output_text(events).splitlines() == ["data limit set: True", "address space unlimited: True", "True True"]


def test_too_much_memory_is_a_clear_error_under_the_fallback(no_cgroup):
    events = no_cgroup.run("import numpy as np\nx = np.ones((64, 1024, 1024, 1024), np.uint8)\nprint(x.sum())")
    done = done_of(events)
    assert done["status"] == "error", events[-3:]
    error = next(e for e in events if e["type"] == "error")
    assert error["ename"] == "MemoryError" and "limit" in error["message"]
    assert output_text(no_cgroup.run("print('next run fine')")).strip() == "next run fine"
