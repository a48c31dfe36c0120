"""The worker's compile caches on the host: per-environment shared folders, session caps, idle sessions."""

from __future__ import annotations

import os
import time

from jaxplay.sandbox.caches import mounts
from jaxplay.sandbox.caches.compile_cache import CompileCaches, environment_name
from jaxplay.settings import Settings


def caches(tmp_path, **changes) -> CompileCaches:
    settings = Settings(compile_cache_dir=tmp_path / "cc", **changes)
    result = CompileCaches(settings, "cpu", None)
    result.prepare()
    return result


def test_the_shared_cache_is_per_environment_and_bound_read_only(tmp_path):
    a = caches(tmp_path)
    assert a.shared.name == environment_name(Settings(), "cpu")
    assert environment_name(Settings(cpu_devices=4), "cpu") != environment_name(Settings(), "cpu")
    assert environment_name(Settings(), "gpu") != environment_name(Settings(), "cpu")
    binds = a.bwrap_binds()
    assert ("--ro-bind", str(a.shared), mounts.SHARED) in binds
    assert oct(a.sessions.stat().st_mode & 0o777) == "0o700"


def test_a_session_over_its_cap_loses_its_oldest_entries(tmp_path):
    c = caches(tmp_path, compile_cache_session_mb=1)
    entries = c.sessions / ("a" * 32) / mounts.ENTRIES
    entries.mkdir(parents=True)
    now = time.time()
    for i in range(6):
        path = entries / f"jit_f{i}-cache"
        path.write_bytes(os.urandom(300 << 10))
        os.utime(path, (now - 100 + i, now - 100 + i))
    c.after_run("a" * 32)
    left = sorted(p.name for p in entries.iterdir())
    assert left == ["jit_f3-cache", "jit_f4-cache", "jit_f5-cache"]  # newest kept, under 1 MiB
    c.after_run("../../etc")  # not a session name: nothing happens, nothing raises


def test_idle_sessions_are_dropped(tmp_path):
    c = caches(tmp_path, compile_cache_idle_s=60)
    old, fresh = c.sessions / ("b" * 32), c.sessions / ("c" * 32)
    for session in (old, fresh):
        (session / mounts.ENTRIES).mkdir(parents=True)
    past = time.time() - 3600
    for path in (old, old / mounts.ENTRIES):
        os.utime(path, (past, past))
    c.drop_idle_sessions()
    assert not old.exists() and fresh.exists()
