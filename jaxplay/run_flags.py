"""The JAX options and XLA flags a run may set: the allow-list, its validator and the run's typed flags.

Shared by the server (which validates a run's flags before it is queued,
``validate`` on a plain dict, as the page or any other client sends it) and
the worker (which validates them again before the sandbox uses them). A flag
is accepted only when it is on the allow-list, its value is of its kind and
in its range, and the runtime's XLA knows it; anything else is refused with
a message naming the flag and what is allowed. Nothing that names a path, a
file, a dump folder or an endpoint is on the list, and no value can carry
one: values are booleans, bounded integers, closed sets of words, or pass
names of ``[A-Za-z0-9_-]``.

Which runtime's XLA knows which flag was read from each jaxlib (a process
started with ``XLA_FLAGS=--<flag>=<value>`` aborts with "Unknown flag" when
its XLA lacks it): jaxlib 0.4.38, 0.6.2, 0.10.2 and 0.12.0.1.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["bool", "int", "choice", "pass_names"]
Version = tuple[int, ...]

MAX_SETTINGS = 32
MAX_PASS_NAMES = 32
MAX_PASS_NAME_CHARS = 64
PASS_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
DECIMAL = re.compile(r"-?[0-9]{1,6}")


class FlagError(ValueError):
    """A flag refused: ``flag`` names it ("" when the whole value is malformed)."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(message)
        self.flag = flag


@dataclass(frozen=True)
class FlagSpec:
    """One allow-listed option: its kind and range, and where it means something."""
    name: str
    kind: Kind
    help: str
    low: int = 0
    high: int = 0
    choices: tuple[str, ...] = ()
    since: Version = ()  # the first jaxlib whose XLA knows it (): every offered one
    until: Version | None = None  # the first jaxlib whose XLA no longer knows it
    backends: tuple[str, ...] = ()  # () every backend; else the only ones it acts on

    def allowed(self) -> str:
        """What values it takes, in words."""
        if self.kind == "bool":
            return "true or false"
        if self.kind == "int":
            return f"an integer from {self.low} to {self.high}"
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        return (f"up to {MAX_PASS_NAMES} pass names separated by commas, each of letters, digits, '_' and '-' "
                "(e.g. algsimp,cse)")

    def known_to(self, version: Version) -> bool:
        return version >= self.since and (self.until is None or version < self.until)

    def runtimes_text(self) -> str:
        first = f"JAX {'.'.join(map(str, self.since))} or later" if self.since else "every JAX"
        return first + (f" before {'.'.join(map(str, self.until))}" if self.until else "")


def _bool(name: str, help: str, **more: Any) -> FlagSpec:
    return FlagSpec(name, "bool", help, **more)


CONFIG_SPECS: dict[str, FlagSpec] = {spec.name: spec for spec in (
    _bool("jax_enable_x64", "64-bit floats and integers by default"),
    FlagSpec("jax_default_matmul_precision", "choice", "precision of matrix products and convolutions",
             choices=("default", "high", "highest", "bfloat16", "tensorfloat32", "float32")),
    FlagSpec("jax_numpy_rank_promotion", "choice", "what happens when arrays of different ranks broadcast",
             choices=("allow", "warn", "raise")),
    FlagSpec("jax_numpy_dtype_promotion", "choice", "implicit dtype promotion rules",
             choices=("standard", "strict")),
    _bool("jax_disable_jit", "run jitted functions op by op, without compiling them"),
    _bool("jax_debug_nans", "raise where a computation produces a NaN"),
    _bool("jax_debug_infs", "raise where a computation produces an infinity"),
    FlagSpec("jax_default_prng_impl", "choice", "the default random number generator",
             choices=("threefry2x32", "rbg", "unsafe_rbg")),
    _bool("jax_enable_checks", "JAX's internal consistency checks"),
    _bool("jax_log_compiles", "log each compilation"),
    _bool("jax_explain_cache_misses", "say why a function was traced again"),
    _bool("jax_threefry_partitionable", "a threefry whose random bits do not depend on sharding"),
    _bool("jax_softmax_custom_jvp", "softmax with its own derivative rule"),
    _bool("jax_check_tracer_leaks", "raise when a tracer escapes its transformation"),
    _bool("jax_debug_key_reuse", "raise when a random key is used twice"),
    FlagSpec("jax_traceback_filtering", "choice", "which frames a traceback keeps",
             choices=("auto", "off", "tracebackhide", "remove_frames", "quiet_remove_frames")),
)}

XLA_SPECS: dict[str, FlagSpec] = {spec.name: spec for spec in (
    FlagSpec("xla_disable_hlo_passes", "pass_names", "HLO passes XLA skips (names as the pass list shows them)"),
    FlagSpec("xla_backend_optimization_level", "int", "the backend's optimization level", low=0, high=3),
    _bool("xla_cpu_enable_fast_math", "CPU: let LLVM reassociate and assume no NaN or infinity"),
    _bool("xla_cpu_fast_math_honor_nans", "CPU fast math: keep NaN semantics"),
    _bool("xla_cpu_fast_math_honor_infs", "CPU fast math: keep infinity semantics"),
    _bool("xla_cpu_fast_math_honor_division", "CPU fast math: keep exact division"),
    _bool("xla_cpu_fast_math_honor_functions", "CPU fast math: keep exact math functions"),
    _bool("xla_cpu_enable_fast_min_max", "CPU: min and max that may ignore NaN"),
    _bool("xla_cpu_multi_thread_eigen", "CPU: Eigen's matrix products on several threads"),
    FlagSpec("xla_cpu_prefer_vector_width", "choice", "CPU: the vector width LLVM prefers, in bits",
             choices=("128", "256", "512")),
    FlagSpec("xla_cpu_max_isa", "choice", "CPU: the newest instruction set the code may use",
             choices=("SSE4_2", "AVX", "AVX2", "AVX512")),
    FlagSpec("xla_cpu_parallel_codegen_split_count", "int", "CPU: LLVM modules compiled in parallel", low=1, high=32),
    _bool("xla_cpu_strict_dot_conv_math", "CPU: exact dot and convolution arithmetic"),
    _bool("xla_cpu_enable_concurrency_optimized_scheduler", "CPU: schedule for concurrency rather than memory"),
    _bool("xla_cpu_copy_insertion_use_region_analysis", "CPU: region analysis in copy insertion"),
    _bool("xla_cpu_use_xnnpack", "CPU: XNNPACK kernels", since=(0, 6)),
    _bool("xla_cpu_use_fusion_emitters", "CPU: the fusion emitters", since=(0, 6), until=(0, 12)),
    _bool("xla_llvm_disable_expensive_passes", "skip LLVM's expensive optimization passes"),
    _bool("xla_allow_excess_precision", "compute in higher precision than asked"),
    FlagSpec("xla_gpu_autotune_level", "int", "GPU: how hard XLA autotunes kernels (0 off)", low=0, high=4,
             backends=("gpu", "cuda", "rocm")),
    _bool("xla_gpu_enable_fast_min_max", "GPU: min and max that may ignore NaN", backends=("gpu", "cuda", "rocm")),
)}

# Words in a flag's name that say it reads or writes somewhere: named in the refusal, never accepted.
PLACE_WORDS = re.compile(r"(?:^|_)(?:dump|path|paths|dir|directory|file|files|filename|url|endpoint|address|socket|"
                         r"port|prefix)(?:_|$)")


@dataclass(frozen=True)
class FlagSetting:
    """One option as a run carries it: its canonical text ("true", "2", "highest", "algsimp,cse")."""
    name: str
    value: str


@dataclass(frozen=True)
class RunFlags:
    """A run's JAX options and XLA flags, each list sorted by name: equal flags have equal forms."""
    config: tuple[FlagSetting, ...] = ()
    xla: tuple[FlagSetting, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.config or self.xla)

    def plain(self) -> dict[str, dict[str, bool | int | str]]:
        """As a client sends them: ``{"config": {name: value}, "xla": {name: value}}``, values typed."""
        return {"config": {s.name: typed_value(CONFIG_SPECS[s.name], s.value) for s in self.config},
                "xla": {s.name: typed_value(XLA_SPECS[s.name], s.value) for s in self.xla}}

    def canonical(self) -> str:
        """The stable text caches key on ("" without flags)."""
        if not self:
            return ""
        return json.dumps({"config": [[s.name, s.value] for s in self.config],
                           "xla": [[s.name, s.value] for s in self.xla]}, separators=(",", ":"))

    def digest(self) -> str:
        """16 hex digits of the canonical form ("" without flags)."""
        return hashlib.sha256(self.canonical().encode()).hexdigest()[:16] if self else ""

    def xla_flags_text(self) -> str:
        """The run's part of ``XLA_FLAGS``: one ``--name=value`` per flag, no other text."""
        return " ".join(f"--{s.name}={s.value}" for s in self.xla)

    def config_values(self) -> dict[str, bool | int | str]:
        return {s.name: typed_value(CONFIG_SPECS[s.name], s.value) for s in self.config}

    def summary(self) -> str:
        """One line for people: ``jax_enable_x64=true --xla_disable_hlo_passes=algsimp``."""
        return " ".join([f"{s.name}={s.value}" for s in self.config] + [f"--{s.name}={s.value}" for s in self.xla])


NO_FLAGS = RunFlags()


def typed_value(spec: FlagSpec, text: str) -> bool | int | str:
    if spec.kind == "bool":
        return text == "true"
    if spec.kind == "int":
        return int(text)
    return text


def _canonical_value(spec: FlagSpec, value: Any, where: str) -> str:
    """``value`` as its canonical text, or FlagError naming the flag and what it takes."""
    wrong = FlagError(spec.name, f"{where} must be {spec.allowed()}; got {_shown(value)}.")
    if spec.kind == "bool":
        if isinstance(value, bool):
            return "true" if value else "false"
        if value in ("true", "false"):
            return value
        raise wrong
    if spec.kind == "int":
        if isinstance(value, str) and DECIMAL.fullmatch(value):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not spec.low <= value <= spec.high:
            raise wrong
        return str(value)
    if spec.kind == "choice":
        if isinstance(value, int) and not isinstance(value, bool) and str(value) in spec.choices:
            return str(value)
        if isinstance(value, str) and value in spec.choices:
            return value
        raise wrong
    names = value if isinstance(value, list | tuple) else value.split(",") if isinstance(value, str) else None
    if not names or len(names) > MAX_PASS_NAMES or not all(isinstance(n, str) and PASS_NAME.fullmatch(n)
                                                           for n in names):
        raise wrong
    return ",".join(sorted(set(names)))


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _spec_of(specs: dict[str, FlagSpec], name: Any, what: str) -> FlagSpec:
    if not isinstance(name, str) or not name:
        raise FlagError("", f"Each {what} must be named by a non-empty string; got {_shown(name)}.")
    bare = name.removeprefix("--") if what == "XLA flag" else name
    spec = specs.get(bare)
    if spec is not None:
        return spec
    shown = _shown(name)
    if PLACE_WORDS.search(bare.lower()):
        raise FlagError(name, f"The {what} {shown} names a place to read or write (a path, file, dump folder or "
                              "endpoint); such flags are never accepted.")
    raise FlagError(name, f"Unknown {what} {shown}. Allowed: {', '.join(sorted(specs))}.")


def _settings(raw: Any, specs: dict[str, FlagSpec], what: str, field: str) -> tuple[FlagSetting, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise FlagError("", f"Field 'flags.{field}' must be an object of {what} names to values.")
    settings: dict[str, FlagSetting] = {}
    for name, value in raw.items():
        spec = _spec_of(specs, name, what)
        if spec.name in settings:
            raise FlagError(spec.name, f"The {what} {spec.name!r} is given twice.")
        where = f"The {what} {'--' if what == 'XLA flag' else ''}{spec.name}"
        settings[spec.name] = FlagSetting(spec.name, _canonical_value(spec, value, where))
    return tuple(settings[name] for name in sorted(settings))


def validate(raw: Any, jax_version: str | None = None, backend: str | None = None) -> RunFlags:
    """A client's plain ``{"config": {...}, "xla": {...}}`` (None: no flags) as RunFlags; FlagError names what
    is wrong. With ``jax_version`` (and ``backend``), each flag must also be one that runtime's XLA knows
    (and that acts on that backend)."""
    if raw is None:
        return NO_FLAGS
    if isinstance(raw, RunFlags):  # as a wire carried it: checked again, name by name
        raw = {"config": _as_dict(raw.config), "xla": _as_dict(raw.xla)}
    if not isinstance(raw, Mapping):
        raise FlagError("", "Field 'flags' must be an object with 'config' (JAX options) and 'xla' (XLA flags).")
    unknown = sorted(str(key) for key in raw if key not in ("config", "xla"))
    if unknown:
        raise FlagError("", f"Field 'flags' has unknown fields {unknown}: use 'config' (JAX options) and 'xla' "
                            "(XLA flags).")
    flags = RunFlags(config=_settings(raw.get("config"), CONFIG_SPECS, "JAX option", "config"),
                     xla=_settings(raw.get("xla"), XLA_SPECS, "XLA flag", "xla"))
    if len(flags.config) + len(flags.xla) > MAX_SETTINGS:
        raise FlagError("", f"A run may set at most {MAX_SETTINGS} options and flags.")
    if jax_version is not None or backend is not None:
        check_runtime(flags, jax_version, backend)
    return flags


def _as_dict(settings: tuple[FlagSetting, ...]) -> dict[str, str]:
    names = [s.name for s in settings]
    if len(set(names)) != len(names):
        raise FlagError("", "A flag is given twice.")
    return {s.name: s.value for s in settings}


def version_of(text: str) -> Version:
    """``"0.6.2"`` -> (0, 6, 2); a part that is not a number ends it."""
    parts: list[int] = []
    for part in text.split("."):
        digits = re.match(r"\d+", part)
        if digits is None:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def check_runtime(flags: RunFlags, jax_version: str | None, backend: str | None) -> None:
    """FlagError for the first flag this runtime's XLA does not know, or that does nothing on ``backend``."""
    for setting in flags.xla:
        spec = XLA_SPECS[setting.name]
        if jax_version and not spec.known_to(version_of(jax_version)):
            raise FlagError(spec.name, f"The XLA flag --{spec.name} is not known to the XLA of JAX {jax_version}; "
                                       f"it needs {spec.runtimes_text()}. Remove it or choose another runtime.")
        if backend and spec.backends and backend not in spec.backends:
            raise FlagError(spec.name, f"The XLA flag --{spec.name} acts only on {', '.join(spec.backends)}, not on "
                                       f"{backend}; remove it or choose a {spec.backends[0]} backend.")


def catalogue() -> dict[str, list[dict[str, Any]]]:
    """The allow-list as the page's flags editor reads it (/api/flags)."""
    def entry(spec: FlagSpec) -> dict[str, Any]:
        return {"name": spec.name, "kind": spec.kind, "help": spec.help, "allowed": spec.allowed(),
                "low": spec.low, "high": spec.high, "choices": list(spec.choices),
                "since": ".".join(map(str, spec.since)), "until": ".".join(map(str, spec.until or ())),
                "backends": list(spec.backends)}
    return {"config": [entry(s) for s in CONFIG_SPECS.values()], "xla": [entry(s) for s in XLA_SPECS.values()]}
