"""The sandbox command line: what is shared with the sandbox and what is not."""

from __future__ import annotations

import os

from jaxplay.sandbox.isolation import bwrap


def test_namespaces_read_only_root_and_private_tmp():
    args = bwrap.bwrap_args(["python"], {"A": "1"}, {})
    joined = " ".join(args)
    for flag in ("--unshare-all", "--die-with-parent", "--new-session", "--cap-drop ALL", "--clearenv",
                 "--tmpfs /tmp", "--remount-ro /", "--setenv A 1"):
        assert flag in joined
    assert "--share-net" not in args
    assert args.index("--remount-ro") > args.index("--tmpfs")
    assert args[-2:] == ["--", "python"]


def test_exposed_paths_are_not_nested_and_skip_usr():
    paths = bwrap.exposed_paths()
    assert bwrap.IMPORT_ROOT / "sandbox" in paths
    for p in paths:
        assert not any(p != q and p.is_relative_to(q) for q in paths)
        assert p.parts[:2] != ("/", "usr")


def test_root_drops_privileges_before_bwrap():
    command = bwrap.sandbox_command(["python"], {}, [])
    if os.geteuid() == 0:
        script = command[-1]
        assert command[:2] == ["unshare", "--mount"]
        assert f"setpriv --reuid={bwrap.SANDBOX_UID}" in script and script.index("setpriv") < script.index("bwrap")
    else:
        assert command[0].endswith("bwrap")
