"""The resource ``jaxplay://sandbox``: what a program may do here, read from this server's own settings
and its workers' word (their libraries and JAX versions), so it never disagrees with what runs."""

from __future__ import annotations

from jaxplay import run_flags
from jaxplay.server.runs.scheduler import Scheduler

SANDBOX_RULES_URI = "jaxplay://sandbox"


def sandbox_rules(scheduler: Scheduler) -> str:
    settings = scheduler.settings
    lines = [
        "# What a program may do on this JAX Playground",
        "",
        "- Each run is a fresh Python process in a sandbox (bubblewrap: no network, a read-only system, its own "
        "/tmp that is gone when it ends). Nothing can be installed while it runs; `pip` and downloads fail.",
        f"- A run may take {settings.run_timeout_s:g} s of wall-clock time (flags.timeout_s may ask for less) and "
        f"{settings.memory_limit_mb} MiB of memory.",
        f"- A program may be {settings.max_code_bytes} bytes. Its stdout and stderr are kept up to "
        f"{settings.output_limit_bytes} bytes in all, each IR artifact (jaxpr, HLO) up to "
        f"{settings.artifact_limit_bytes} bytes; the tools answer less and say what they cut.",
        f"- One client (a token, or a network without one) may have {settings.max_runs_per_client} runs waiting "
        "or running; the queue serves networks, then clients, in turn, as it serves browsers.",
        "- The final bare expression is the run's value (as in a notebook). `from playground import display, "
        "timeit, show_sharding, profile` adds rich output, timings, sharding layouts and profiles.",
        "- A run that reads the clock or OS randomness is never answered from the result cache; flags.fresh "
        "runs it again anyway.",
        f"- CPU runs see {settings.cpu_devices} virtual devices, enough to try a sharding.",
        "- A run may set JAX options and XLA flags from the list below (flags.config, flags.xla); anything else, "
        "or a flag the runtime's XLA does not know, is refused naming it. A program's own os.environ or "
        "jax.config changes apply as in any Python process.",
        "",
        "## Backends, JAX versions and libraries",
    ]
    for backend in scheduler.backends():
        versions = ", ".join(r["name"] + (" (default)" if r["default"] else "") for r in backend["runtimes"]
                             if r["workers"]) or "none connected yet"
        lines.append(f"- {backend['name']}: {backend['device_count']} x {backend['device_kind']}; JAX {versions}")
        libraries = ", ".join(f"{name} {version}" for name, version in sorted(backend["libraries"].items()))
        if libraries:
            lines.append(f"  - importable: {libraries}")
    return "\n".join(lines + flags_lines()) + "\n"


def flags_lines() -> list[str]:
    """The allow-list (jaxplay/run_flags.py, as GET /api/flags lists it), one line per option."""
    lines = ["", "## Flags a run may set", "",
             'As `flags: {"config": {name: value}, "xla": {name: value}}`, e.g. '
             '`{"config": {"jax_enable_x64": true}, "xla": {"xla_backend_optimization_level": 1}}`.']
    for title, specs in (("JAX options (flags.config)", run_flags.CONFIG_SPECS),
                         ("XLA flags (flags.xla)", run_flags.XLA_SPECS)):
        lines += ["", f"### {title}"]
        for spec in specs.values():
            where = [spec.runtimes_text()] if spec.since or spec.until else []
            where += [f"only on {', '.join(spec.backends)}"] if spec.backends else []
            lines.append(f"- `{spec.name}`: {spec.allowed()}; {spec.help}" + (f" ({'; '.join(where)})" if where
                                                                               else ""))
    return lines
