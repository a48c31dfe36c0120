"""The command line that starts a zygote inside a bubblewrap sandbox.

What the sandbox is: every namespace unshared (no network at all, loopback
included; its own pids, IPC, UTS, cgroup and user namespace), a read-only
root made of /usr, the interpreter, our own packages and the distributions user
code imports (sandbox/isolation/exposed_paths.py), a private size-capped
/tmp, a non-root uid inside and out, no capabilities, a cleared environment,
and ``--die-with-parent`` so the worker's death ends it.

Run as root, an unprivileged user namespace would map the sandbox's uid back
to host root, so the worker first drops to ``SANDBOX_UID`` with setpriv. That
uid may be unable to reach the project (e.g. under /root): a private mount
namespace, made while still root, binds each needed folder under a
world-readable tmpfs, and bwrap binds it from there to its usual path, so
paths inside the sandbox are the same as outside.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

import jaxplay
from jaxplay.sandbox.isolation.exposed_paths import exposed_paths
from jaxplay.sandbox.isolation.gpu import ACCELERATOR_SYSFS
from jaxplay.sandbox.runtimes import launch

SANDBOX_UID = 65534  # nobody: owns nothing on the host
INSIDE_UID = 1000
STAGING = "/mnt"  # covered by a tmpfs in the private mount namespace only
TMP_SIZE_BYTES = 512 << 20
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives")
IMPORT_ROOT = jaxplay.IMPORT_ROOT  # the sandbox's PYTHONPATH: our packages are bound at the same paths inside


# (bwrap flag, host source or None, path inside): e.g. ("--ro-bind", "/var/cache/x", "/var/cache/jaxplay/shared")
Bind = tuple[str, str | None, str]

# The whole environment of the processes that start the sandbox: nothing of the worker's.
LAUNCH_ENVIRONMENT = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}


def zygote_command(control_fd: int, isolated: bool, interpreter: str | None = None) -> list[str]:
    """The zygote's command line. ``-s -P``: no user site-packages, and neither the current
    directory (/tmp, writable) nor any other writable folder on ``sys.path``. ``interpreter``:
    a JAX runtime's Python (sandbox/runtimes/), which may be another Python version and loads
    jaxplay alone (sandbox/runtimes/launch.py), else this one, with ``IMPORT_ROOT`` on its path."""
    arguments = [str(control_fd), *(["--isolated"] if isolated else [])]
    if interpreter:
        return launch.command(interpreter, "jaxplay.sandbox.engine.zygote", *arguments)
    return [sys.executable, *launch.FLAGS, "-m", "jaxplay.sandbox.engine.zygote", *arguments]


def exposing_folder(path: Path) -> Path | None:
    """The folder the sandbox exposes that contains ``path``, if any."""
    resolved = path.expanduser().resolve()
    for exposed in exposed_paths():
        if resolved == exposed or resolved.is_relative_to(exposed):
            return exposed
    return None


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces here."""


def require_bwrap() -> str:
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed: install it (Debian: apt-get install bubblewrap) "
            "or, for development only, start with --sandbox none."
        )
    return path


def bwrap_args(inner: list[str], env: dict[str, str], sources: dict[Path, str],
               devices: list[str] | tuple[str, ...] = (), extra: list[Bind] | tuple[Bind, ...] = ()) -> list[str]:
    """bwrap's arguments; ``sources`` maps each exposed path to where bwrap reads it;
    ``devices`` are device nodes (its seat's GPU) added to the minimal /dev; ``extra``
    are further binds (the compile caches), their sources already staged."""
    args = [
        require_bwrap(), "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
        "--uid", str(INSIDE_UID), "--gid", str(INSIDE_UID), "--hostname", "playground",
        "--ro-bind", "/usr", "/usr",
    ]
    for name in ("bin", "sbin", "lib", "lib64", "lib32"):
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            args += ["--ro-bind", str(host), str(host)]
    for path in ETC_FILES:
        args += ["--ro-bind-try", path, path]
    # /tmp first: the project may live under /tmp, and its bind must sit on top of the tmpfs.
    args += ["--size", str(TMP_SIZE_BYTES), "--tmpfs", "/tmp"]
    for path, source in sources.items():
        args += ["--ro-bind", source, str(path)]
    # The root itself is bwrap's tmpfs: remount it read-only once every mount point exists.
    args += ["--proc", "/proc", "--dev", "/dev"]
    for node in devices:
        args += ["--dev-bind", node, node]
    if devices:
        for path in ACCELERATOR_SYSFS:
            args += ["--ro-bind-try", path, path]
    for flag, source, target in extra:
        args += [flag, source, target] if source else [flag, target]
    args += ["--remount-ro", "/", "--chdir", "/tmp", "--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args + ["--", *inner]


def sandbox_command(inner: list[str], env: dict[str, str], cgroup_procs: list[Path],
                    devices: list[str] | tuple[str, ...] = (), extra: list[Bind] | tuple[Bind, ...] = (),
                    paths: list[Path] | None = None) -> list[str]:
    """The full command: as root, stage paths and drop privileges first; else bwrap directly.

    Start it with ``LAUNCH_ENVIRONMENT`` only: bwrap's own init (pid 1 of the sandbox)
    keeps the environment it was started with for the sandbox's whole life. ``paths``: what a
    JAX runtime's sandbox exposes (computed by its own interpreter); by default this interpreter's.
    """
    paths = exposed_paths() if paths is None else paths
    if os.geteuid() != 0:
        return bwrap_args(inner, env, {p: str(p) for p in paths}, devices, extra)
    # Stage each source's folder once (hundreds of entries share a few folders, and the
    # whole script is one argument, capped at 128 KiB); bwrap then binds only the entries.
    # Sources are resolved here, as root: bwrap, already unprivileged, could not follow a
    # symlink (the venv's python) into a folder it cannot enter.
    sources = {p: p.resolve() for p in [*paths, *(Path(source) for _, source, _ in extra if source)]}
    folders = {f: f"{STAGING}/jaxplay/{i}" for i, f in enumerate(sorted({s.parent for s in sources.values()}))}
    staged = {p: f"{folders[s.parent]}/{s.name}" for p, s in sources.items()}
    extra = [(flag, staged[Path(source)] if source else None, target) for flag, source, target in extra]
    script = [f"mount -t tmpfs -o mode=755,size=1m jaxplay {STAGING}"]
    for folder, target in folders.items():
        # --rbind: an exposed entry may itself be a mount point below its folder.
        script += [f"mkdir -p {target}", f"mount --rbind {shlex.quote(str(folder))} {target}"]
    for procs in cgroup_procs:
        script.append(f"echo $$ > {shlex.quote(str(procs))}")
    drop = ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--inh-caps=-all"]
    exposed = {p: staged[p] for p in paths}
    script.append("exec " + shlex.join(drop + bwrap_args(inner, env, exposed, devices, extra)))
    return ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", " && ".join(script)]
