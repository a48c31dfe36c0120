"""Nothing a run does is visible to any later run, and no secret is reachable from inside.

Each test plants as a hostile program would (read-only folders, files held
open, processes that ignore signals) in every writable place and namespace,
then proves that the next runs, on every slot, see nothing of it. The
secrets test puts a marker in the server's and the worker's environment and
searches everything a run can read for it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from tests import host_processes
from tests.conftest import done_of, output_text
from tests.live_server import LiveServer


@pytest.fixture(scope="session")
def live(live_on_runtime: LiveServer) -> LiveServer:
    """Every test here runs on the worker's own JAX and on the newest runtime (tests/conftest.py)."""
    return live_on_runtime

HOSTILE_PLANT = r"""
import os, signal, subprocess, sys, ctypes
marker = "{marker}"
planted = []
for place in ["/tmp", "/dev/shm", "/dev", "/run", "/var/tmp", "/var/cache/jaxplay/jax", os.path.expanduser("~")]:
    try:
        folder = os.path.join(place, marker)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "jax_plugins.py"), "w") as f:
            f.write("print('PLANTED CODE RAN')")
        os.chmod(folder, 0o500)  # a read-only folder survived the old cleanup
        planted.append(place)
    except OSError:
        pass
held = open("/tmp/" + marker + "-held", "w")  # held open by a process that ignores signals
libc = ctypes.CDLL(None, use_errno=True)
shm_id = libc.shmget(0x4A41, 4096, 0o1666)  # SysV shared memory, mode 0666 | IPC_CREAT
sem_id = libc.semget(0x4A42, 1, 0o1666)
subprocess.Popen([sys.executable, "-c", "import signal, time\n"  # the marker in its command line
                  "for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP): signal.signal(s, signal.SIG_IGN)\n"
                  "time.sleep(300)", "{marker}"], start_new_session=True)
print("planted", planted, shm_id >= 0, sem_id >= 0)
"""

LOOK = r"""
import os, ctypes
marker = "{marker}"
found = []
for root, dirs, files in os.walk("/", onerror=lambda e: None):
    if root.startswith(("/proc", "/sys", "/usr")):
        dirs[:] = []
        continue
    if any(marker in name for name in dirs + files):
        found.append(root)
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        if marker in open(f"/proc/{{pid}}/cmdline").read():
            found.append("process " + pid)
    except OSError:
        pass
libc = ctypes.CDLL(None, use_errno=True)
if libc.shmget(0x4A41, 0, 0) >= 0:
    found.append("shm")
if libc.semget(0x4A42, 0, 0) >= 0:
    found.append("sem")
try:
    import jax_plugins
    found.append("module")
except ImportError:
    pass
print("FOUND", found)
"""


def run(live, code: str, **fields) -> str:
    events = live.run(code, **fields)
    assert done_of(events)["status"] == "ok", events[-3:]
    return output_text(events) + output_text(events, "stderr")


@pytest.mark.attack("state between runs")
def test_nothing_a_run_plants_is_seen_by_the_next_runs(live):
    marker = f"jaxplay-plant-{time.time_ns()}"
    out = run(live, HOSTILE_PLANT.format(marker=marker))
    assert "planted ['/tmp', '/dev/shm'" in out, out
    for _ in range(4):  # every slot, and the spares made while the planting run executed
        seen = run(live, LOOK.format(marker=marker))
        assert "FOUND []" in seen and "PLANTED CODE RAN" not in seen, seen
    host = host_processes.matching(marker)
    assert host == []


@pytest.mark.attack("state between runs")
def test_sys_path_holds_no_writable_folder_and_no_current_directory(live):
    out = run(live, """
import os, sys
print([p for p in sys.path if p in ("", ".") or (os.path.isdir(p) and os.access(p, os.W_OK))])
print(sys.flags.no_user_site, sys.flags.safe_path)
""")
    assert out.splitlines() == ["[]", "1 True"]


@pytest.mark.attack("state between runs")
def test_the_only_writable_places_are_the_runs_own(live):
    out = run(live, """
import os
writable = []
for root, dirs, files in os.walk("/", onerror=lambda e: None):
    if root.startswith(("/proc", "/sys")):
        dirs[:] = []
        continue
    if os.access(root, os.W_OK):
        try:
            path = os.path.join(root, ".probe")
            open(path, "w").close()
            os.unlink(path)
            writable.append(root)
            dirs[:] = []
        except OSError:
            pass
print(sorted(writable))
""")
    # each of them a tmpfs of this run's own mount namespace; the cache only through its overlay (whose
    # layer, which the init copies from after the run, is out of the run's reach)
    assert out.strip() == "['/dev/shm', '/tmp', '/var/cache/jaxplay/jax']", out


SEARCH = r"""
import os
marker = "{marker}".encode()
hits = []
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    if int(pid) == os.getpid() or open(f"/proc/{{pid}}/comm").read().strip() == "jaxplay-holder":
        continue  # this program holds the marker itself (and its holder shares its address space)
    for name in ("environ", "cmdline"):
        try:
            if marker in open(f"/proc/{{pid}}/{{name}}", "rb").read():
                hits.append(f"/proc/{{pid}}/{{name}}")
        except OSError:
            pass
    try:
        maps = open(f"/proc/{{pid}}/maps").read().splitlines()
        mem = open(f"/proc/{{pid}}/mem", "rb")
        for line in maps:
            start, end = (int(x, 16) for x in line.split()[0].split("-"))
            if "r" not in line.split()[1] or end - start > 1 << 26:
                continue
            try:
                mem.seek(start)
                if marker in mem.read(end - start):
                    hits.append(f"memory of {{pid}}")
                    break
            except (OSError, ValueError, OverflowError):
                pass
    except OSError:
        pass
for root, dirs, files in os.walk("/", onerror=lambda e: None):
    if root.startswith(("/proc", "/sys", "/dev", "/usr")) or "site-packages" in root or "/lib/python3" in root:
        dirs[:] = []  # the host's read-only installs: no marker was ever written there
        continue
    for name in files:
        path = os.path.join(root, name)
        try:
            if os.path.getsize(path) < 1 << 22 and marker in open(path, "rb").read():
                hits.append(path)
        except OSError:
            pass
print("HITS", hits)
"""


@pytest.mark.timeout(600)
@pytest.mark.attack("keys and privileges")
def test_no_secret_of_the_server_or_worker_is_reachable_from_a_run():
    marker = f"jaxplay-secret-{time.time_ns()}"
    with tempfile.TemporaryDirectory() as data_dir:
        env = {"JAXPLAY_WORKER_TOKEN": marker + "-token", "SOME_API_KEY": marker}
        server = LiveServer(Path(data_dir), env=env)
        try:
            server.wait_ready()
            worker_env = {**os.environ, "OTHER_SECRET": marker}
            worker = subprocess.Popen([sys.executable, "-m", "jaxplay.cli", "worker", "--server", server.worker_url,
                                       "--token", marker + "-token", "--name", "remote", "--slots", "1"],
                                      env=worker_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      cwd=Path(__file__).resolve().parents[2])
            try:
                server.wait_ready(workers=2)
                for _ in range(4):  # local slots and the remote worker's
                    out = run(server, SEARCH.format(marker=marker))
                    assert "HITS []" in out, out
            finally:
                worker.terminate()
                worker.wait(10)
        finally:
            server.stop()


# Searches this run's own readable memory (heap, anonymous maps, stack, writable data) for a secret
# it knows only by its first bytes and its hash, so the searching program holds no copy to find.
SEARCH_OWN_MEMORY = r"""
import hashlib
PREFIX, DIGEST, LENGTH = {prefix!r}, {digest!r}, {length}
hits, scanned = [], 0
mem = open("/proc/self/mem", "rb", buffering=0)
for line in open("/proc/self/maps").read().splitlines():
    fields = line.split()
    start, end = (int(x, 16) for x in fields[0].split("-"))
    path = fields[5] if len(fields) > 5 else ""
    if not fields[1].startswith("r") or path in ("[vvar]", "[vsyscall]", "[vvar_vclock]"):
        continue
    if path.startswith("/") and "w" not in fields[1]:
        continue  # a file's read-only pages hold what the file holds, never a run's data
    at = start
    while at < end:
        size = min(end - at, 64 << 20)
        try:
            mem.seek(at)
            chunk = mem.read(size + LENGTH if at + size < end else size)
        except (OSError, ValueError, OverflowError):
            break
        scanned += len(chunk)
        i = chunk.find(PREFIX)
        while i >= 0:
            if hashlib.sha256(chunk[i:i + LENGTH]).hexdigest() == DIGEST:
                hits.append(path or "anonymous memory")
            i = chunk.find(PREFIX, i + 1)
        at += size
print("HITS", sorted(set(hits)), "scanned", scanned >> 20, "MiB")
"""


@pytest.mark.attack("state between runs")
def test_a_runs_code_is_in_no_later_runs_memory(live):
    """A key pasted into one run's code must not be in the memory of any later run's process, on any
    slot (the spares forked while it ran, and those forked after, included)."""
    secret = f"sk-live-{uuid.uuid4().hex}{uuid.uuid4().hex}"
    planted = run(live, f'API_KEY = "{secret}"\nprint("planted", len(API_KEY))\n')
    assert planted.strip() == f"planted {len(secret)}"
    search = SEARCH_OWN_MEMORY.format(prefix=secret[:12].encode(), digest=hashlib.sha256(secret.encode()).hexdigest(),
                                      length=len(secret))
    for _ in range(6):  # every slot, more than once
        out = run(live, search, fresh=True)
        assert out.startswith("HITS [] scanned"), out
        assert int(out.split()[-2]) > 50, out  # it did read the process's memory


STOP_OWN_GROUP = """
import os, signal
print("stopping", flush=True)
os.kill(0, signal.{name})
print("after", flush=True)
"""


def _zygotes(live) -> set[int]:
    """The server's zygotes (not their forks, which share their command line)."""
    forks = {proc.pid: proc.parent for proc in host_processes.all_processes()
             if "-m jaxplay.sandbox.engine.zygote" in proc.cmdline}
    return {pid for pid, parent in forks.items()
            if parent not in forks and host_processes.is_descendant(pid, live.process.pid)}


@pytest.mark.attack("signals")
def test_a_run_that_stops_its_process_group_times_out_and_the_slot_lives(live):
    zygotes = _zygotes(live)
    assert zygotes
    events = live.run(STOP_OWN_GROUP.format(name="SIGSTOP"), timeout_s=3)
    done = done_of(events)
    assert done["status"] == "timeout", done
    assert "time limit of 3 s" in done["message"]
    assert output_text(events) == "stopping\n"
    for name in ("SIGTERM", "SIGINT", "SIGHUP", "SIGTSTP"):  # what each does to the run is the run's business
        done = done_of(live.run(STOP_OWN_GROUP.format(name=name), timeout_s=3))
        assert "sandbox ended unexpectedly" not in done.get("message", ""), (name, done)
    for _ in range(3):
        assert run(live, "print('still here')").strip() == "still here"
    assert _zygotes(live) == zygotes  # no sandbox was restarted


@pytest.mark.attack("signals")
def test_the_run_leads_its_own_session_and_process_group(live):
    out = run(live, "import os\nprint(os.getsid(0) == os.getpid() == os.getpgrp(), os.getpgid(1) != os.getpgrp())")
    assert out.strip() == "True True"
