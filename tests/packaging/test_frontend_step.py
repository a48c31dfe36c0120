"""``make frontend`` (the step ``make run`` runs): builds only when the sources are newer
and Node is usable; otherwise serves the assets already built and says so, and with
neither it stops with what to install. Run on a copy of the sources (never the
checkout's build), with no Node or with a Node that is too old."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.live_server import PROJECT_ROOT

FRONTEND_FILES = ("package.json", "package-lock.json", "vite.config.ts", "tsconfig.json")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the Makefile, scripts and page sources, with a build older than the sources."""
    shutil.copy(PROJECT_ROOT / "Makefile", tmp_path / "Makefile")
    shutil.copytree(PROJECT_ROOT / "scripts", tmp_path / "scripts")
    (tmp_path / "jaxplay").mkdir()
    shutil.copy(PROJECT_ROOT / "jaxplay" / "__init__.py", tmp_path / "jaxplay" / "__init__.py")
    frontend = tmp_path / "frontend"
    shutil.copytree(PROJECT_ROOT / "frontend" / "src", frontend / "src")
    for name in FRONTEND_FILES:
        shutil.copy(PROJECT_ROOT / "frontend" / name, frontend / name)
    return tmp_path


def build(project: Path) -> Path:
    """A build made earlier: its manifest (what the step checks) and the files it names."""
    dist = project / "frontend" / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "assets" / "app-00000000.js").write_text("// built earlier\n")
    (dist / "assets" / "app-00000000.css").write_text("/* built earlier */\n")
    manifest = dist / "manifest.json"
    manifest.write_text('{"src/main.ts": {"file": "assets/app-00000000.js", "isEntry": true}}\n')
    return manifest


def make_frontend(project: Path, node: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "--no-print-directory", "frontend", f"NODE={node}"], cwd=project,
                          capture_output=True, text=True, timeout=60, env={**os.environ, "PATH": "/usr/bin:/bin"})


def make_sources_newer(project: Path, built: Path) -> None:
    past = 1_000_000_000  # 2001: older than any source, whatever times the copy kept
    os.utime(built, (past, past))


def too_old_node(project: Path) -> str:
    node = project / "old-node"
    node.write_text("#!/bin/sh\necho 18.20.4\n")  # what Debian 12's nodejs answers to -p process.versions.node
    node.chmod(0o755)
    return str(node)


def test_no_node_and_built_assets_skip_the_build_and_say_so(project: Path):
    built = build(project)
    make_sources_newer(project, built)
    result = make_frontend(project, "/nonexistent/node")
    assert result.returncode == 0, result.stderr
    assert "Node.js is not installed" in result.stdout
    assert "serving the assets already built" in result.stdout
    assert built.read_text().startswith('{"src/main.ts"')
    assert not (project / "frontend" / "node_modules").exists()


def test_a_node_older_than_the_floor_is_named_and_not_used(project: Path):
    built = build(project)
    make_sources_newer(project, built)
    result = make_frontend(project, too_old_node(project))
    assert result.returncode == 0, result.stderr
    assert "Node.js 18.20.4 is too old for Vite 8 (needs ^20.19 or >=22.12)" in result.stdout
    assert built.read_text().startswith('{"src/main.ts"')


def test_up_to_date_assets_need_no_node(project: Path):
    built = build(project)
    future = time.time() + 3600
    os.utime(built, (future, future))
    result = make_frontend(project, "/nonexistent/node")
    assert result.returncode == 0 and "frontend: up to date" in result.stdout


def test_no_node_and_no_build_stops_with_what_to_install(project: Path):
    result = make_frontend(project, too_old_node(project))
    assert result.returncode != 0
    assert "frontend/dist is not built" in result.stderr and "To build it, install Node.js 22 LTS (or 20.19+)" in result.stderr
