"""The worker's compile caches on the host: per-environment shared folders, session caps, idle sessions."""

from __future__ import annotations

import os
import time

import pytest

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


def _saving(tmp_path, upper_files) -> tuple[mounts.SessionCache, object]:
    """A run's upper layer holding ``upper_files`` (name -> writer), and the session folder it saves into."""
    upper, sessions = tmp_path / "upper", tmp_path / "sessions"
    upper.mkdir()
    sessions.mkdir()
    for name, make in upper_files.items():
        make(upper / name)
    cache = mounts.SessionCache(os.open(sessions, mounts.DIRECTORY), "d" * 32, os.open(upper, mounts.DIRECTORY))
    return cache, sessions / ("d" * 32) / mounts.ENTRIES


@pytest.mark.attack("host files")
def test_the_save_copies_regular_files_only_and_never_follows_a_link(tmp_path):
    secret = tmp_path / "host-secret"
    secret.write_text("a host file the run did not write")
    cache, saved = _saving(tmp_path, {
        "jit_real-cache": lambda p: p.write_bytes(b"compiled"),
        "jit_link-cache": lambda p: p.symlink_to(secret),
        "jit_fifo-cache": lambda p: os.mkfifo(p),  # opening it must not block the init
        "jit_folder-cache": lambda p: p.mkdir(),
        "not an entry name": lambda p: p.write_bytes(b"x"),
    })
    assert cache.save() == 0
    assert sorted(p.name for p in saved.iterdir()) == ["jit_real-cache"]
    assert (saved / "jit_real-cache").read_bytes() == b"compiled"


@pytest.mark.attack("resource exhaustion")
def test_one_runs_save_counts_files_and_what_they_cost_the_host(tmp_path):
    def sparse(path):
        with open(path, "wb") as f:
            f.truncate(100 << 20)  # costs the run nothing; a dense copy would cost the host 100 MiB

    files = {f"jit_tiny{i:04d}-cache": (lambda p: p.write_bytes(b"x")) for i in range(mounts.SAVE_BUDGET_FILES + 88)}
    cache, saved = _saving(tmp_path, {"jit_aaa_sparse-cache": sparse, **files})
    left_out = cache.save()
    kept = list(saved.iterdir())
    assert len(kept) == mounts.SAVE_BUDGET_FILES and left_out == 89  # the sparse one and the 88 over the count
    assert sum(mounts.host_cost(p.stat().st_size) for p in kept) <= mounts.SAVE_BUDGET_BYTES
    assert not (saved / "jit_aaa_sparse-cache").exists()


def test_a_session_folder_is_made_only_when_there_is_something_to_keep(tmp_path):
    cache, saved = _saving(tmp_path, {})
    assert cache.save() == 0
    assert not saved.parent.exists()


@pytest.mark.attack("resource exhaustion")
def test_a_session_is_capped_by_files_and_allocated_blocks(tmp_path):
    c = caches(tmp_path, compile_cache_session_mb=1, compile_cache_session_files=100)
    entries = c.sessions / ("e" * 32) / mounts.ENTRIES
    entries.mkdir(parents=True)
    for i in range(1000):  # empty files: no bytes, yet an inode and a block each on most file systems
        (entries / f"jit_e{i:04d}-cache").touch()
    c.after_run("e" * 32)
    assert len(list(entries.iterdir())) == 100
    for i in range(10):  # 10 x 200 KiB of real blocks: over 1 MiB
        (entries / f"jit_big{i}-cache").write_bytes(os.urandom(200 << 10))
    c.cap_session(entries)
    assert sum(max(mounts.BLOCK_BYTES, p.stat().st_blocks * 512) for p in entries.iterdir()) <= 1 << 20


@pytest.mark.attack("resource exhaustion")
def test_all_sessions_together_are_capped_least_recently_used_first(tmp_path):
    c = caches(tmp_path, compile_cache_total_mb=1)
    now = time.time()
    for index, name in enumerate(("1" * 32, "2" * 32, "3" * 32)):
        entries = c.sessions / name / mounts.ENTRIES
        entries.mkdir(parents=True)
        path = entries / "jit_f-cache"
        path.write_bytes(os.urandom(400 << 10))
        os.utime(path, (now - 100 + index, now - 100 + index))
    c.cap_all_sessions()
    assert sorted(p.name for p in c.sessions.iterdir()) == ["2" * 32, "3" * 32]  # the oldest went


@pytest.mark.attack("compile cache")
def test_a_crafted_entry_does_not_outlive_its_sessions_idle_expiry(tmp_path):
    """How far a crafted entry reaches: it lives in its session's folder alone, which idle expiry removes
    whole; a later run of that session then reads no saved entries at all."""
    c = caches(tmp_path, compile_cache_idle_s=60)
    session = "f" * 32
    entries = c.sessions / session / mounts.ENTRIES
    entries.mkdir(parents=True)
    (entries / "jit_honest-cache").write_bytes(b"an executable that computes something else")
    assert c.session_has_entries(session)
    past = time.time() - 3600
    for path in (entries / "jit_honest-cache", entries, entries.parent):
        os.utime(path, (past, past))
    c.drop_idle_sessions()
    assert not c.session_has_entries(session) and not entries.parent.exists()
    assert not c.session_has_entries("../../etc")


@pytest.mark.attack("resource exhaustion")
def test_the_total_is_held_after_every_run_not_only_at_the_sweep(tmp_path):
    c = caches(tmp_path, compile_cache_total_mb=1)
    c.after_run(None)  # the first call sweeps; later ones within a minute do not
    for name in ("4" * 32, "5" * 32, "6" * 32):  # each run of a new session saves 400 KiB
        entries = c.sessions / name / mounts.ENTRIES
        entries.mkdir(parents=True)
        (entries / "jit_f-cache").write_bytes(os.urandom(400 << 10))
        c.after_run(name)
        time.sleep(0.01)
    assert sorted(p.name for p in c.sessions.iterdir()) == ["5" * 32, "6" * 32]
