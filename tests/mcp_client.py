"""The MCP SDK's own client over Streamable HTTP, against a real server's /mcp, and tokens issued as an
operator issues them (``jaxplay tokens add``, the CLI, beside the running server)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.live_server import PROJECT_ROOT


def tokens_command(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jaxplay.cli", "tokens", *args, "--data-dir", str(data_dir),
                           "--log-level", "warning"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)


def issue_token(data_dir: Path, name: str) -> str:
    """A new token, as the last line ``jaxplay tokens add NAME`` prints."""
    done = tokens_command(data_dir, "add", name)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


@contextlib.asynccontextmanager
async def mcp_session(http_url: str, token: str | None = None, timeout_s: float = 240.0,
                      **headers: str) -> AsyncIterator[ClientSession]:
    """An initialized session with ``http_url``/mcp, sending ``Authorization: Bearer <token>`` when given."""
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx2.AsyncClient(headers=headers, timeout=timeout_s) as http, \
            streamable_http_client(f"{http_url}/mcp", http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def call_tool(http_url: str, token: str | None, tool: str, arguments: dict[str, Any]) -> Any:
    async with mcp_session(http_url, token) as session:
        return await session.call_tool(tool, arguments)


def call(http_url: str, token: str | None, tool: str, **arguments: Any) -> Any:
    """One tool call in a session of its own: the ``CallToolResult``. On a thread of its own, so it works
    beside Playwright's sync API too (which keeps an event loop running in the test's thread)."""
    with ThreadPoolExecutor(max_workers=1) as thread:
        return thread.submit(asyncio.run, call_tool(http_url, token, tool, arguments)).result()
