"""The key of a lowered module: everything JAX reads when it lowers a traced program to MLIR.

``lowered_modules`` stores the module JAX lowered under this key, so that the
next run asking for the same lowering loads it instead of lowering again. A
key that leaves out anything the lowering depends on would hand a run another
program's module, so the key is built to err the other way: what it cannot
describe exactly makes the lowering ``Uncacheable`` and JAX lowers it as usual.

What goes in, for one call of ``pxla._cached_lowering_to_hlo`` (``key``; its
arguments differ between JAX versions, and each is written by
``KeyWriter.value``, sandbox/caches/key_writer.py, which says what it refuses):

- the traced program, equation by equation: the primitive and every parameter
  (nested programs included), the abstract values, literals and constants by
  their bytes, effects, each equation's context (compute type, mesh, XLA
  metadata), the debug info (function, argument and result names);
- each equation's source location, as JAX writes it into the module (the user
  frames of its traceback and its name stack), and the stack the lowering is
  called from, except for an eager operation (and a call of one of JAX's own
  jitted functions, ``jnp.cos(x)``, outside Inspect and ``lower()``): JAX's
  persistent cache ignores locations unless a program's IR is shown, and
  nobody is shown such a module;
- the shardings (their meshes with device ids), layouts, donations, devices;
- here: the backend (platform and version), JAX's and jaxlib's versions
  (``environment``), every JAX configuration value (thread-local ones as they
  are in effect, ``configuration``) and ``XLA_FLAGS``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from jaxplay.sandbox.caches import installed_code, key_writer
from jaxplay.sandbox.caches.key_writer import KeyWriter, Uncacheable

KEY_VERSION = "2"
# Configuration that does not change what a program lowers to: the cache's own settings (its folder
# differs between the trusted fill and a run), logging, and Inspect's explanations.
CONFIG_NOT_IN_KEY = ("jax_compilation_cache", "jax_persistent_cache", "jax_explain_cache_misses",
                     "jax_log_compiles", "jax_logging_level", "jax_debug_log_modules", "jax_raise_persistent_cache")
# Whether Inspect is capturing a call on this thread (jit_capture): its modules are shown, locations and all.
SHOWN: list[Callable[[], bool]] = []
DISPATCH = "_pjit_call_impl_python"  # in the stack of a jitted call's lowering, not of ``jit(f).lower()``


def key(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, str]:
    """The entry's key, and the key of the lowering within this process (all but its caller)."""
    from jax._src.lib import xla_client

    writer = KeyWriter(locations=not (installed_code.eager_operation(args[0]) or _unshown_jax_call(args[0])))
    if not isinstance(args[0], writer.jaxpr_types):
        raise Uncacheable("not a traced program")
    backends = [arg for arg in args if isinstance(arg, xla_client.Client)]
    if len(backends) != 1:
        raise Uncacheable("no backend")
    writer.put(*environment(backends[0]))
    writer.put("configuration", configuration())
    for index, value in enumerate(args):
        writer.put("argument", index)
        if value is not backends[0]:
            writer.value(value)
    for name in sorted(kwargs):
        writer.put("argument", name)
        writer.value(kwargs[name])
    within = writer.hexdigest()
    if not writer.locations:
        return within, within
    from jax._src import source_info_util

    # Where it is lowered from: operations lowering rules make are located there.
    caller = KeyWriter(locations=True)
    caller.put("lowered", within)
    caller.location(source_info_util.current())
    return caller.hexdigest(), within


def _unshown_jax_call(program: Any) -> bool:
    """A call of one of JAX's own jitted functions (``jnp.cos(x)`` outside any jit, JAX 0.5 on) that
    Inspect does not capture and no ``lower()`` asked for: like an eager operation, nobody is shown its
    module, and JAX's persistent cache ignores its locations too, so it is keyed without them."""
    if not installed_code.jax_function(program) or any(shown() for shown in SHOWN):
        return False
    frame = sys._getframe(3)  # key, lowered_modules._lower, then JAX
    for _ in range(8):
        if frame is None:
            return False
        if frame.f_code.co_name == DISPATCH:
            return True
        frame = frame.f_back
    return False


_config_holders: list[tuple[str, Any]] = []
_last_configuration: tuple[tuple[Any, ...], str] | None = None


def configuration() -> str:
    """Every JAX configuration value in effect on this thread, but those that do not change lowering."""
    global _last_configuration
    import jax

    if not _config_holders:
        _config_holders.extend((name, holder) for name, holder in sorted(jax.config._value_holders.items())
                               if not name.startswith(CONFIG_NOT_IN_KEY))
    values = []
    for _, holder in _config_holders:
        try:
            values.append(holder.value)
        except Exception:  # noqa: BLE001 - a holder that cannot say: keyed by its name alone
            values.append("<unknown>")
    current = tuple(values)
    if _last_configuration is not None and _last_configuration[0] == current:
        return _last_configuration[1]
    text = repr([(name, value) for (name, _), value in zip(_config_holders, current, strict=True)])
    if " at 0x" in text:
        raise Uncacheable("a configuration value known only by its address")
    _last_configuration = (current, text)
    return text


def environment(backend: Any) -> tuple[str, ...]:
    import jax
    import jaxlib

    return (KEY_VERSION, jax.__version__, jaxlib.__version__, backend.platform,
            getattr(backend, "platform_version", ""), os.environ.get("XLA_FLAGS", ""),
            os.environ.get("LIBTPU_INIT_ARGS", ""))


def prepare() -> None:
    """What every key needs and no run changes, done once before any run exists (in the zygote, whose
    forks inherit it): where installed code lives, what the key writer reads of JAX, which lowering
    rules JAX registered are installed code, the configuration's holders. Starts no backend."""
    from jax._src.interpreters import mlir

    installed_code.installed_roots()
    key_writer.prepare()
    rules = list(mlir._lowerings.values())
    for table in mlir._platform_specific_lowerings.values():
        rules += table.values()
    for entry in rules:
        installed_code.rule_is_installed(getattr(entry, "rule", entry))
    configuration()
