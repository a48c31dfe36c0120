"""Hostile programs stay inside the sandbox: no network, no writes, no leftovers, no secrets."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests import host_processes
from tests.conftest import done_of, output_text
from tests.live_server import LiveServer


@pytest.fixture(scope="session")
def live(live_on_runtime: LiveServer) -> LiveServer:
    """Every test here runs on the worker's own JAX and on the newest runtime (tests/conftest.py)."""
    return live_on_runtime


# Host paths that exist here and that no run may see (the sandbox exposes only /usr and the Python install).
HOST_SECRETS = [p for p in ["/etc/shadow", "/etc/passwd", "/root/.bashrc", "/root/.ssh", "/home", "/var/log", "/run",
                            "/sys/fs/cgroup"] if os.path.exists(p)]


def run_ok(live, code: str) -> str:
    events = live.run(code)
    assert done_of(events)["status"] == "ok", events[-3:]
    return output_text(events)


@pytest.mark.attack("network")
def test_no_network_not_even_loopback(live):
    code = f"""
import socket
for host, port in [("127.0.0.1", {live.port}), ("8.8.8.8", 53), ("::1", {live.port})]:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect((host, port))
        print("CONNECTED", host)
    except OSError as exc:
        print("blocked", host, type(exc).__name__)
print(sorted(name for _, name in socket.if_nameindex()))
"""
    out = run_ok(live, code)
    assert "CONNECTED" not in out and out.count("blocked") == 3
    assert out.strip().splitlines()[-1] == "['lo']"


@pytest.mark.attack("network")
def test_cannot_reach_the_server_over_http(live):
    out = run_ok(live, f"""
import urllib.request
try:
    urllib.request.urlopen("{live.http_url}/healthz", timeout=2)
    print("REACHED")
except Exception as exc:
    print("blocked", type(exc).__name__)
""")
    assert out.startswith("blocked")


@pytest.mark.attack("host files")
def test_root_filesystem_is_read_only_and_host_files_are_hidden(live):
    project = Path(__file__).resolve().parents[2]
    out = run_ok(live, f"""
import os
for path in ["{project}/pwned", "/usr/pwned", "/etc/pwned", "/pwned"]:
    try:
        open(path, "w").write("x")
        print("WROTE", path)
    except OSError as exc:
        print("denied", path, exc.errno)
for path in {HOST_SECRETS!r}:
    print("exists" if os.path.exists(path) else "absent", path)
""")
    assert "WROTE" not in out
    for hidden in HOST_SECRETS:
        assert f"absent {hidden}" in out
    assert not (project / "pwned").exists()


@pytest.mark.attack("host files")
def test_of_the_python_install_only_its_standard_library_and_shared_libraries_are_seen(live):
    """The run's Python may be another install than the worker's (pyenv's 3.13 for JAX 0.12): of it the
    sandbox shows the standard library and its shared libraries, read-only; not its site-packages, not
    its build files, not the other versions beside it."""
    out = run_ok(live, """
import os, sys, sysconfig
base, stdlib = sys.base_prefix, sysconfig.get_paths()["stdlib"]
print(base.startswith("/usr/"))
print(sorted(os.listdir(os.path.dirname(base))) == [os.path.basename(base)])
print(sorted(os.listdir(os.path.join(base, "lib"))))
print(os.path.exists(os.path.join(stdlib, "site-packages")), os.path.isfile(os.path.join(stdlib, "os.py")))
for path in (os.path.join(stdlib, "pwned.py"), os.path.join(base, "lib", "pwned")):
    try:
        open(path, "w").write("x")
        print("WROTE", path)
    except OSError as exc:
        print("denied", exc.errno)
""")
    lines = out.splitlines()
    under_usr, alone, lib, stdlib_shown = lines[:4]
    assert lines[4:] == ["denied 30", "denied 30"], lines  # EROFS: the install is read-only
    assert stdlib_shown == "False True"
    if under_usr == "True":
        return  # a Debian Python: /usr is bound whole, read-only
    assert alone == "True"
    assert all(name.startswith("lib") and ".so" in name or name.startswith("python3.") for name in eval(lib)), lib


@pytest.mark.attack("keys and privileges")
def test_runs_as_an_unprivileged_user_with_a_clean_environment(live):
    out = run_ok(live, """
import os
print(os.getuid(), os.geteuid())
print(open("/proc/self/uid_map").read().split())
print(sorted(k for k in os.environ if "TOKEN" in k or k.startswith("JAXPLAY")))
print(open("/proc/self/status").read().split("CapEff:")[1].split()[0])
""")
    uid_line, map_line, env_line, caps = out.strip().splitlines()
    assert uid_line == "1000 1000"
    assert eval(map_line)[0] == "1000"
    # Seen from the host, every sandboxed process runs as an unprivileged uid, never as root.
    zygotes = [proc for proc in host_processes.matching("jaxplay.sandbox.engine.zygote")
               if host_processes.is_descendant(proc.pid, live.process.pid)]  # this server's, not another's
    assert zygotes
    assert [proc for proc in zygotes if proc.real_uid == 0] == []
    assert env_line == "[]"
    assert int(caps, 16) == 0


@pytest.mark.attack("processes")
def test_host_processes_are_invisible(live):
    out = run_ok(live, "import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    pids = eval(out)
    assert len(pids) <= 3, pids  # bwrap's init, the zygote, this run: nothing of the host's


@pytest.mark.attack("state between runs")
def test_tmp_is_private_and_emptied_between_runs(live):
    marker = f"marker-{time.time_ns()}"
    # every slot gets the marker attempt; none may see another run's file afterwards
    for _ in range(4):
        run_ok(live, f"open('/tmp/{marker}', 'w').write('secret')")
        out = run_ok(live, f"import os; print(os.path.exists('/tmp/{marker}'))")
        assert out.strip() == "False"
    assert not Path("/tmp", marker).exists()


@pytest.mark.attack("processes")
def test_processes_left_behind_are_killed_when_the_run_ends(live):
    tag = f"jaxplay-orphan-{time.time_ns()}"
    run_ok(live, f"""
import subprocess
subprocess.Popen([__import__("sys").executable, "-c", "import time; time.sleep(300)", "{tag}"], start_new_session=True)
pid = __import__("os").fork()
if pid == 0:
    import time
    time.sleep(300)
print("spawned")
""")
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        alive = host_processes.matching(tag)
        if not alive:
            break
        time.sleep(0.1)
    assert not alive



@pytest.mark.attack("resource exhaustion")
def test_fork_bomb_is_contained(live):
    events = live.run("""
import os
children = 0
try:
    for _ in range(100000):
        if os.fork() == 0:
            import time
            time.sleep(30)
            os._exit(0)
        children += 1
except OSError as exc:
    print("fork refused after", children, type(exc).__name__)
""", timeout_s=10)
    done = done_of(events)
    # refused forks (pids limit), the memory cap or the deadline: any of them ends it, cleanly
    assert done["status"] in ("ok", "timeout", "error"), done
    if done["status"] == "ok":
        assert "fork refused" in output_text(events)
    if done["status"] == "error":
        assert next(e for e in events if e["type"] == "error")["ename"] == "MemoryError"
    # the server still serves runs afterwards
    assert run_ok(live, "print(2 + 2)").strip() == "4"


@pytest.mark.attack("processes")
def test_the_zygote_cannot_be_traced_or_read(live):
    out = run_ok(live, """
import os
zygote = os.getppid()
try:
    open(f"/proc/{zygote}/mem", "rb").read(1)
    print("READ")
except OSError as exc:
    print("denied", exc.errno)
""")
    assert out.startswith("denied")
    assert os.getuid() == 0 or True  # host uid does not matter for this check


@pytest.mark.attack("processes")
def test_a_run_cannot_signal_anything_outside_its_own_pid_namespace(live):
    """The zygote and the sandbox's init live outside the run's pid namespace; its own init ignores it."""
    out = run_ok(live, """
import os, signal
visible = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())
names = [open(f'/proc/{pid}/comm').read().strip() for pid in visible if pid not in (1, os.getpid())]
for pid in visible:
    if pid != os.getpid():
        os.kill(pid, signal.SIGKILL)
print(len(visible), visible[:2] == [1, 2], names, os.getppid())
""")
    assert out.strip() == "3 True ['jaxplay-holder'] 1"  # its init, itself, and the holder of its address space
    for _ in range(3):
        assert run_ok(live, "print('alive')").strip() == "alive"


KERNEL_SURFACE = r"""
import ctypes, errno, os, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    result = getattr(libc, name)(*args)
    return "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]
def raw(number, *args):
    result = libc.syscall(number, *args)
    return "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]
x86 = os.uname().machine == "x86_64"
print("unshare user", call("unshare", 0x10000000))
print("unshare mount", call("unshare", 0x00020000))
print("clone newuser", raw(56 if x86 else 220, 0x10000000 | 17, 0, 0, 0, 0))
print("io_uring_setup", raw(425, 8, ctypes.create_string_buffer(120)))
print("keyctl", raw(250 if x86 else 219, 0, 0, 0, 0, 0))
print("bpf", raw(321 if x86 else 280, 0, 0, 0))
print("userfaultfd", raw(323 if x86 else 282, 0))
print("ptrace traceme", raw(101 if x86 else 117, 0, 0, 0, 0))
print("x32 getpid", raw(0x40000000 | 39) if x86 else "EPERM")
# What programs do still works: threads, a child process, fork.
seen = []
thread = threading.Thread(target=lambda: seen.append(1)); thread.start(); thread.join()
print("thread", seen == [1])
print("subprocess", subprocess.run(["/bin/echo", "hi"], capture_output=True, text=True).stdout.strip())
pid = os.fork()
if pid == 0:
    os._exit(7)
print("fork", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


@pytest.mark.attack("keys and privileges")
def test_kernel_calls_no_program_needs_are_refused(live):
    """A kernel bug behind io_uring, bpf, keyctl, userfaultfd or nested namespaces is out of reach."""
    text = output_text(live.run(KERNEL_SURFACE))
    for call in ("unshare user", "unshare mount", "clone newuser", "io_uring_setup", "keyctl", "bpf", "userfaultfd",
                 "ptrace traceme", "x32 getpid"):
        assert f"{call} EPERM" in text, text
    assert "thread True" in text and "subprocess hi" in text and "fork 7" in text, text


OPEN_FILES = """
import os, time
time.sleep(0.2)  # the zygote forks the next spare while this run executes
for fd in sorted(os.listdir('/proc/self/fd'), key=int):
    try:
        print(fd, os.readlink(f'/proc/self/fd/{fd}'))
    except OSError:
        pass  # listdir's own descriptor, closed already
"""


@pytest.mark.attack("keys and privileges")
def test_a_run_holds_only_its_own_pipes(live):
    """No socket of the sandbox's plumbing (the worker's, the zygote's, another run's init) reaches a run."""
    for _ in range(4):  # every slot, and runs on spares made while an earlier run held its socket
        out = output_text(live.run(OPEN_FILES, fresh=True))
        targets = dict(line.split(" ", 1) for line in out.strip().splitlines())
        assert targets.pop("0") == "/dev/null"
        assert all(target.startswith("pipe:") for target in targets.values()), targets
        assert len(targets) == 3, targets  # stdout, stderr, events


OTHER_PROCESSES_FILES = """
import os
own = {os.readlink(f"/proc/self/fd/{fd}") for fd in ("1", "2")}
found = []
for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue  # the init: not ours to look into
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("pipe:") and target not in own:
            found.append((open(f"/proc/{pid}/comm").read().strip(), fd, target))
print("FOREIGN PIPES", found)
"""


@pytest.mark.attack("keys and privileges")
def test_no_process_a_run_can_look_into_holds_a_pipe_of_the_worker(live):
    """The run's helpers (its address-space holder) hold none of the sandbox's plumbing: reopening a pipe
    through /proc/PID/fd would let the run write into the worker's log."""
    for _ in range(2):
        out = output_text(live.run(OTHER_PROCESSES_FILES, fresh=True))
        assert out.strip().startswith("FOREIGN PIPES"), out
        found = eval(out.strip().split(" ", 2)[2])
        assert not [entry for entry in found if entry[0] == "jaxplay-holder"], found
