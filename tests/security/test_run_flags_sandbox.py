"""The sandbox checks a run's flags once more before XLA or JAX sees them: a job that reached a worker with a
flag off the allow-list (past the server's check) never runs, and what a run puts in XLA_FLAGS is exactly the
allowed flags."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from jaxplay import worker_protocol as wp
from jaxplay.run_flags import FlagSetting, RunFlags, validate
from jaxplay.sandbox.engine.warm_sandbox import WarmSandbox
from jaxplay.settings import Settings

pytestmark = pytest.mark.live

PROGRAM = """
import os, jax
print(repr(os.environ.get("XLA_FLAGS")))
print(jax.config.jax_enable_x64, os.path.exists("/tmp/dumped"))
print(jax.jit(lambda x: x / 2.0)(1.0))
print(os.path.exists("/tmp/dumped"))
"""


async def _runs(flag_sets: list[RunFlags]) -> list[tuple[Any, list[dict[str, Any]]]]:
    settings = dataclasses.replace(Settings.from_env(), cgroups="off")
    sandbox = WarmSandbox(0, settings, "flags-door")
    results = []
    try:
        await asyncio.wait_for(sandbox.start(), 60)
        for i, flags in enumerate(flag_sets):
            events: list[dict[str, Any]] = []
            result = await sandbox.run(f"f{i}", PROGRAM, 60.0, wp.JobOptions(flags=flags), events.append)
            results.append((result, events))
    finally:
        await sandbox.close()
    return results


def test_the_sandbox_refuses_flags_off_the_list_and_sets_exactly_the_allowed_ones() -> None:
    smuggled = [
        RunFlags(xla=(FlagSetting("xla_dump_to", "/tmp/dumped"),)),
        RunFlags(xla=(FlagSetting("xla_disable_hlo_passes", "algsimp --xla_dump_to=/tmp/dumped"),)),
        RunFlags(xla=(FlagSetting("xla_cpu_enable_fast_math", "true\n--xla_dump_to=/tmp/dumped"),)),
        RunFlags(config=(FlagSetting("jax_compilation_cache_dir", "/tmp/dumped"),)),
    ]
    allowed = validate({"config": {"jax_enable_x64": True}, "xla": {"xla_disable_hlo_passes": "algsimp"}})
    results = asyncio.run(_runs([*smuggled, allowed]))
    for (result, events), flags in zip(results[:-1], smuggled, strict=True):
        assert str(result.status) == "error", (flags, result, events)
        errors = [e for e in events if e.get("type") == "error"]
        assert errors and errors[0]["ename"] == "FlagError", events
        named = (flags.xla or flags.config)[0].name
        assert named in errors[0]["message"], errors[0]
        assert not [e for e in events if e.get("type") == "stdout"], events  # the program never ran
    result, events = results[-1]
    assert str(result.status) == "ok", (result, events)
    lines = "".join(e["text"] for e in events if e.get("type") == "stdout").splitlines()
    assert lines[0].endswith("--xla_disable_hlo_passes=algsimp'") and "dump" not in lines[0], lines
    assert lines[1:] == ["True False", "0.5", "False"], lines
