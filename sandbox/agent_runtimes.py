"""The JAX runtimes a worker offers: its own JAX, and those ``--runtimes`` lists (sandbox/runtimes/).

At start each listed runtime is checked once: its interpreter lists what its
sandbox must expose, one sandbox starts and probes it (the versions and libraries
it reports go into the hello), and the sandbox stops again, so a runtime holds
no memory until its first run. A runtime that is missing, failed to install or
fails its probe is offered with its ``problem``: the others serve runs. The
default runtime (``--default-runtime``: the newest offered unless told) starts
on every seat at once and stays warm (``warm_default``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from jaxplay import worker_protocol as wp
from jaxplay.sandbox.engine.runtime_pool import RuntimePool, SandboxFactory
from jaxplay.sandbox.engine.warm_sandbox import WarmSandbox
from jaxplay.sandbox.engine.zygote_link import SandboxRuntime
from jaxplay.sandbox.isolation import exposed_paths
from jaxplay.sandbox.runtimes import store
from jaxplay.settings import Settings

log = logging.getLogger("jaxplay.worker")

Probe = Callable[[WarmSandbox], Awaitable[dict[str, Any]]]
PoolSandboxFactory = Callable[[str, SandboxRuntime], SandboxFactory]


def entry(name: str, description: dict[str, Any], default: bool, problem: str | None = None) -> wp.WorkerRuntime:
    """One runtime as the hello lists it, from its probe's ``description``."""
    return wp.WorkerRuntime(name=name, jax_version=str(description.get("jax_version") or name),
                            jaxlib_version=str(description.get("jaxlib_version") or ""), default=default,
                            libraries=dict(description.get("libraries") or {}), problem=problem)


async def start_offered(settings: Settings, own_version: str, make_sandboxes: PoolSandboxFactory,
                        probe: Probe) -> tuple[dict[str, RuntimePool], list[wp.WorkerRuntime]]:
    """Pools for the listed runtimes that work, and every listed runtime's hello entry."""
    wanted = [r for r in store.offered(settings) if r.name != own_version]
    checked = await asyncio.gather(*(_check(settings, runtime, make_sandboxes, probe) for runtime in wanted))
    pools = {pool.name: pool for pool, _ in checked if pool is not None}
    return pools, [listed for _, listed in checked]


async def _check(settings: Settings, runtime: store.Runtime, make_sandboxes: PoolSandboxFactory,
                 probe: Probe) -> tuple[RuntimePool | None, wp.WorkerRuntime]:
    if runtime.problem:
        log.warning("JAX %s is not offered: %s", runtime.name, runtime.problem)
        return None, entry(runtime.name, {}, False, runtime.problem)
    try:
        roots = exposed_paths.root_requirements()
        paths = await asyncio.to_thread(store.exposed_paths_of, runtime, roots)
        sandbox_runtime = SandboxRuntime(runtime.interpreter, paths)
        pool = RuntimePool(runtime.name, make_sandboxes(runtime.name, sandbox_runtime), stays_warm=False,
                           idle_s=settings.runtime_idle_s, runtime=sandbox_runtime)
        first_start, pool.on_first_start = pool.on_first_start, None  # the probe's start is not a first use
        try:
            description = await probe(await pool.sandbox_for(0))
        finally:
            await pool.close()
            pool.starts = 0
            pool.on_first_start = first_start
    except Exception as exc:  # one runtime's failure must leave the others serving
        problem = f"it failed to start: {exc}"
        log.warning("JAX %s is not offered: %s", runtime.name, problem)
        return None, entry(runtime.name, {}, False, problem)
    if description.get("jax_version") != runtime.name:
        problem = f"its environment runs JAX {description.get('jax_version')}, not {runtime.name}"
        return None, entry(runtime.name, description, False, problem)
    log.info("JAX %s offered (idle until its first run)", runtime.name)
    return pool, entry(runtime.name, description, False)


def default_of(wanted: str, own_version: str, pools: dict[str, RuntimePool]) -> str:
    """The runtime a run that names none gets (``--default-runtime``): the newest offered that works,
    the worker's own, or the version named if it works here (else the newest, saying why)."""
    if wanted == "own":
        return own_version
    if wanted not in ("newest", "") and wanted not in pools:
        log.warning("--default-runtime %s is not a runtime this worker can run: runs that name none get the "
                    "newest offered instead", wanted)
    if wanted in pools:
        return wanted
    return max(pools, key=store.version_key)


async def warm_default(pools: dict[str, RuntimePool], own: RuntimePool, default: str, seats: int,
                       worker: str) -> str:
    """The default runtime is what a new visitor's run gets: warm on every seat, never stopped for being
    idle. When that is another runtime than the worker's own JAX, the own one becomes a runtime like the
    others, stopped when idle; the default's sandboxes start now, on every seat. Returns the default in
    force: the worker's own JAX where the other could not start."""
    pool = pools[default]
    if pool is own:
        return default
    own.stays_warm, pool.stays_warm = False, True
    try:
        await pool.start(list(range(seats)))
    except Exception as exc:  # its probe passed a moment ago: say so, and fall back to the own JAX
        log.warning("JAX %s could not start on every seat (%s): runs that name no runtime get JAX %s",
                    pool.name, exc, own.name)
        await pool.close()
        own.stays_warm, pool.stays_warm = True, False
        return own.name
    log.info("worker %s: runs that name no runtime get JAX %s (--default-runtime)", worker, pool.name)
    return default


def marked_default(entries: list[wp.WorkerRuntime], default: str) -> list[wp.WorkerRuntime]:
    """The hello's entries with ``default`` set on the runtime a run that names none gets, and on no other."""
    return [dataclasses.replace(e, default=e.name == default) for e in entries]


async def sweep_idle(pools: dict[str, RuntimePool], every_s: float) -> None:
    """Forever: stop the sandboxes of runtimes idle for their ``idle_s``."""
    while True:
        await asyncio.sleep(every_s)
        for pool in list(pools.values()):
            try:
                await pool.stop_if_idle()
            except Exception:
                log.exception("stopping idle runtime %s failed", pool.name)
