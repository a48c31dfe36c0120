"""``timeit``: time a JAX function properly, like IPython's ``%timeit``.

JAX dispatches asynchronously: a call returns before the device has finished,
so timing the call alone measures dispatch. Every loop here blocks until the
outputs are ready. As in ``%timeit``: warm-up calls first (the first call
compiles), an automatic number of loops per run so a run lasts at least
``min_run_s``, several runs, garbage collection paused while timing. Each
sample is one run's time divided by its loops. The result is printed, sent to
the page as a ``timing`` event (drawn as a small chart) and returned.

    from playground import timeit
    timeit(f, x)              # a function and its arguments
    timeit("f(x) @ y")        # or an expression, evaluated where timeit is called
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

AUTORANGE_STEPS = (1, 2, 5)
MAX_LOOPS = 10_000_000
STATEMENT_FILENAME = "<timeit>"


@dataclass(frozen=True)
class TimingResult:
    """Seconds per loop; ``samples`` holds one value per run."""

    label: str
    samples: list[float]
    loops: int
    warmup: float
    median: float = field(init=False)
    min: float = field(init=False)
    max: float = field(init=False)
    mean: float = field(init=False)
    q1: float = field(init=False)
    q3: float = field(init=False)

    def __post_init__(self) -> None:
        values = sorted(self.samples)
        q1, q3 = (statistics.quantiles(values, n=4, method="inclusive")[::2] if len(values) > 1
                  else (values[0], values[0]))
        for name, value in (("median", statistics.median(values)), ("min", values[0]), ("max", values[-1]),
                            ("mean", statistics.fmean(values)), ("q1", q1), ("q3", q3)):
            object.__setattr__(self, name, value)

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def repeats(self) -> int:
        return len(self.samples)

    def __str__(self) -> str:
        runs = f"{self.repeats} run{'s' if self.repeats != 1 else ''}"
        loops = f"{self.loops:,} loop{'s' if self.loops != 1 else ''} each"
        return (f"{self.label}: {format_seconds(self.median)} per loop (median of {runs}, {loops}; "
                f"min {format_seconds(self.min)}, IQR {format_seconds(self.iqr)})")

    def __repr__(self) -> str:  # shown when a timeit call is the program's last line: no second summary line
        return (f"TimingResult(median={format_seconds(self.median)}, min={format_seconds(self.min)}, "
                f"iqr={format_seconds(self.iqr)}, runs={self.repeats}, loops={self.loops})")

    def event(self, line: int | None) -> dict[str, Any]:
        def ms(seconds: float) -> float:
            return round(seconds * 1e3, 6)

        return {
            "type": "timing", "label": self.label, "line": line, "loops": self.loops, "repeats": self.repeats,
            "samples_ms": [ms(s) for s in self.samples], "median_ms": ms(self.median), "min_ms": ms(self.min),
            "max_ms": ms(self.max), "mean_ms": ms(self.mean), "q1_ms": ms(self.q1), "q3_ms": ms(self.q3),
            "iqr_ms": ms(self.iqr), "warmup_ms": ms(self.warmup),
        }


def format_seconds(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _block(value: Any) -> Any:
    ready = getattr(value, "block_until_ready", None)
    if ready is not None:
        return ready()
    import jax

    return jax.block_until_ready(value)


def _caller_frame() -> Any:
    frame = sys._getframe(2)
    return frame


def _user_line(frame: Any) -> int | None:
    while frame is not None:
        if frame.f_code.co_filename == "<playground>":
            return frame.f_lineno
        frame = frame.f_back
    return None


def _describe_call(fn: Any, args: tuple, kwargs: dict) -> str:
    from jaxplay.sandbox.capture.jit_artifacts import tree_type_text

    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    if callable(getattr(fn, "lower", None)) and callable(getattr(fn, "trace", None)):
        name = f"jit({name})"  # tell the jitted function from the plain one it wraps
    parts = [tree_type_text(a) for a in args] + [f"{k}={tree_type_text(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


def _run(call: Callable[[], Any], loops: int) -> float:
    start = time.perf_counter()
    for _ in range(loops):
        _block(call())
    return time.perf_counter() - start


def _paused_capture() -> Any:
    try:
        from jaxplay.sandbox.capture.jit_capture import capture_paused, unwrap
    except ImportError:  # outside the playground runner
        import contextlib

        return contextlib.nullcontext(), (lambda f: f)
    return capture_paused(), unwrap


def timeit(
    fn: Callable[..., Any] | str,
    *args: Any,
    number: int | None = None,
    repeat: int = 7,
    warmup: int = 1,
    min_run_s: float = 0.1,
    max_total_s: float = 20.0,
    label: str | None = None,
    **kwargs: Any,
) -> TimingResult:
    """Time ``fn(*args, **kwargs)`` (or an expression string) and report it.

    ``number`` loops per run (automatic: 1, 2, 5, 10, 20, 50 ... until a run
    takes ``min_run_s``), ``repeat`` runs, stopping early (after at least one)
    once ``max_total_s`` is spent. To pass ``fn`` a keyword named like one of
    these options, wrap it with ``functools.partial``.
    """
    caller = _caller_frame()
    line = _user_line(caller)
    if isinstance(fn, str):
        if args or kwargs:
            raise TypeError("timeit(expression) takes no further arguments: write them into the expression.")
        namespace = {**caller.f_globals, **caller.f_locals}
        code = compile(fn, STATEMENT_FILENAME, "eval", dont_inherit=True)  # as the program's own code compiles
        label = label or fn

        def call() -> Any:
            return eval(code, namespace)
    elif callable(fn):
        label = label or _describe_call(fn, args, kwargs)

        def call() -> Any:
            return fn(*args, **kwargs)
    else:
        raise TypeError(f"timeit needs a function or an expression string, not {type(fn).__name__}.")
    if repeat < 1 or warmup < 0 or (number is not None and number < 1):
        raise ValueError("timeit needs repeat >= 1, warmup >= 0 and number >= 1 (or number=None for automatic).")

    warmup_s = _run(call, 1) if warmup else 0.0  # compiles, through the capture
    if warmup > 1:
        _run(call, warmup - 1)
    paused, unwrap = _paused_capture()
    if not isinstance(fn, str):
        raw = unwrap(fn)

        def call() -> Any:  # noqa: F811 - the same call without the capture's wrapper
            return raw(*args, **kwargs)

    samples: list[float] = []
    gc_was_enabled = gc.isenabled()
    started = time.perf_counter()
    with paused:
        gc.disable()
        try:
            if number is None:
                number = _autorange(call, min_run_s)
            for _ in range(repeat):
                samples.append(_run(call, number) / number)
                if time.perf_counter() - started > max_total_s:
                    break
        finally:
            if gc_was_enabled:
                gc.enable()
    result = TimingResult(label=label, samples=samples, loops=number, warmup=warmup_s)
    try:
        from jaxplay.sandbox.output import events

        events.emit(result.event(line))
    except ImportError:
        pass
    print(result)
    return result


def _autorange(call: Callable[[], Any], min_run_s: float) -> int:
    scale = 1
    while True:
        for step in AUTORANGE_STEPS:
            loops = step * scale
            if _run(call, loops) >= min_run_s or loops >= MAX_LOOPS:
                return loops
        scale *= 10
