"""Turn one Python value into what the page shows: explorable HTML or text.

Arrays and pytrees get treescope's explorable view (expandable nodes, shape,
dtype, summary statistics, heat-maps of arrays); plain values (numbers,
strings, objects treescope knows nothing about) stay text, as Python's REPL
prints them. Objects that render themselves the IPython way
(``_repr_html_``, ``_repr_svg_``, ``_repr_png_``) are honoured.

Every rendering is bounded in time and size so that a huge value can neither
stall the end of a run nor flood the page: the view falls back to a smaller
one (heat-maps left out, then text) and says so in ``Rendered.notice``.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from jaxplay.sandbox.capture.display_event import Rendered

RENDER_TIME_LIMIT_S = 3.0
MAX_HTML_BYTES = 1024 * 1024
MAX_TEXT_CHARS = 100_000
MAX_IMAGE_BYTES = 5 * 1024 * 1024
# treescope takes ~0.5 ms a node: above this many leaves the view takes over a second to build.
MAX_TREE_LEAVES = 2_000
# Each heat-map is a few KiB of HTML and ~1 ms of work; beyond this many the
# arrays are shown by their summaries only.
MAX_HEATMAP_ARRAYS = 64
# The names treescope gives a view's elements (html_encapsulation.py, lowering.py): a uuid4 each.
TREESCOPE_ID = re.compile(r"\b(treescope_out_|deferred_)([0-9a-f]{32})\b")
_treescope_ids: dict[str, str] = {}  # this run's: a run is a process of its own


class RenderTooSlow(Exception):
    """Raised inside a rendering that ran past RENDER_TIME_LIMIT_S."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the enclosed Python code after ``seconds`` with RenderTooSlow.

    Uses SIGALRM, so it bounds only the main thread (display() from a user
    thread is not bounded). A timer the user's code had set is restored.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum: int, frame: Any) -> None:
        raise RenderTooSlow()

    started = time.monotonic()
    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    previous_delay, previous_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_delay > 0:
            remaining = max(previous_delay - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, remaining, previous_interval)


def render(value: Any) -> Rendered:
    """The best view of ``value`` that fits the bounds; a richer view than text carries the text too."""
    rendered = _richest(value)
    if rendered.mime == "text/plain" or rendered.text is not None:
        return rendered
    return dataclasses.replace(rendered, text=plain_text(value))


def _richest(value: Any) -> Rendered:
    own = self_rendered(value)
    if own is not None:
        return own
    if not wants_tree_view(value):
        return as_text(value)
    try:
        with time_limit(RENDER_TIME_LIMIT_S):
            return as_tree_view(value)
    except RenderTooSlow:
        return as_text(value, f"The explorable view took longer than {RENDER_TIME_LIMIT_S:g} s to build; shown as text.")
    except Exception as exc:  # noqa: BLE001 - a treescope failure must not fail the run
        return as_text(value, f"The explorable view failed ({type(exc).__name__}: {exc}); shown as text.")


def plain_text(value: Any) -> str:
    """``repr(value)`` as ``as_text`` bounds it, or only its type where repr fails: never raises."""
    try:
        return as_text(value).data
    except Exception:  # noqa: BLE001 - its richer view was made; the text beside it is a courtesy
        return f"<{type(value).__module__}.{type(value).__qualname__} object>"


def as_text(value: Any, notice: str | None = None) -> Rendered:
    """``repr(value)``, bounded in time and length; its own exceptions propagate, as in Python."""
    try:
        with time_limit(RENDER_TIME_LIMIT_S):
            text = repr(value)
    except RenderTooSlow:
        text = f"<{type(value).__module__}.{type(value).__qualname__} object>"
        notice = f"Its repr() took longer than {RENDER_TIME_LIMIT_S:g} s; only its type is shown."
    if len(text) > MAX_TEXT_CHARS:
        cut = f"Only the first {MAX_TEXT_CHARS:,} of {len(text):,} characters are shown."
        text = text[:MAX_TEXT_CHARS]
        notice = f"{notice} {cut}" if notice else cut
    return Rendered("text/plain", text, notice)


# --- values that render themselves ------------------------------------------

def self_rendered(value: Any) -> Rendered | None:
    """IPython's display protocol: pandas tables, treescope figures, user classes."""
    if isinstance(value, type):
        return None  # the class itself, whose _repr_html_ is an unbound function
    for method, mime in (("_repr_html_", "text/html"), ("_repr_svg_", "image/svg+xml"), ("_repr_png_", "image/png")):
        func = getattr(value, method, None)
        if not callable(func):
            continue
        try:
            with time_limit(RENDER_TIME_LIMIT_S):
                data = func()
        except RenderTooSlow:
            return as_text(value, f"Its {method}() took longer than {RENDER_TIME_LIMIT_S:g} s; shown as text.")
        if data is None:
            continue  # IPython's convention for "no such representation"
        if isinstance(data, tuple):
            data = data[0]  # (data, metadata)
        return bounded_self_rendering(value, method, mime, data)
    return None


def bounded_self_rendering(value: Any, method: str, mime: str, data: Any) -> Rendered:
    if mime == "image/png":
        if not isinstance(data, bytes | bytearray):
            return as_text(value, f"Its {method}() returned {type(data).__name__}, not bytes; shown as text.")
        if len(data) > MAX_IMAGE_BYTES:
            return as_text(value, f"Its image is {len(data) // 1024} KiB, over the {MAX_IMAGE_BYTES // 2**20} MiB limit; shown as text.")
        return Rendered(mime, base64.b64encode(data).decode("ascii"))
    if not isinstance(data, str):
        return as_text(value, f"Its {method}() returned {type(data).__name__}, not str; shown as text.")
    limit = MAX_IMAGE_BYTES if mime.startswith("image/") else MAX_HTML_BYTES
    size = len(data.encode("utf-8", "surrogatepass"))
    if size > limit:
        return as_text(value, f"Its {method}() is {size // 1024} KiB, over the {limit // 1024} KiB limit; shown as text.")
    return Rendered(mime, data)


# --- treescope --------------------------------------------------------------

def is_array(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype") and not isinstance(value, type)


def wants_tree_view(value: Any) -> bool:
    """Arrays, and containers holding arrays, gain from the explorable view; plain data does not.

    A list of numbers or a dict of settings reads better as its repr, as does
    an object treescope knows nothing about.
    """
    if is_array(value):
        return bool(getattr(value, "ndim", 0))
    if hasattr(type(value), "__treescope_repr__"):
        return True
    if not children_of(value):
        return False
    return survey(value)[1] > 0


def children_of(node: Any) -> list[Any] | None:
    """The values inside a container, or None for a leaf."""
    if is_array(node) or isinstance(node, str | bytes | bytearray | int | float | complex | bool | type(None)):
        return None
    if isinstance(node, dict):
        return list(node.values())
    if isinstance(node, list | tuple | set | frozenset):
        return list(node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return [getattr(node, field.name, None) for field in dataclasses.fields(node)]
    return pytree_children(node)


def pytree_children(node: Any) -> list[Any] | None:
    """The children of a registered JAX pytree node (flax/equinox modules, optax states...)."""
    tree_util = sys.modules.get("jax.tree_util")
    if tree_util is None:
        return None
    try:
        # Flatten one level only: every child counts as a leaf.
        children, treedef = tree_util.tree_flatten(node, is_leaf=lambda child: child is not node)
    except Exception:
        return None
    return None if tree_util.treedef_is_leaf(treedef) else children


def survey(value: Any) -> tuple[int, int]:
    """(leaves, arrays of one dimension or more), counting no further than MAX_TREE_LEAVES + 1 leaves."""
    leaves = arrays = visited = 0
    stack = [value]
    # A container that holds itself has no end: stop after a bounded number of nodes.
    while stack and leaves <= MAX_TREE_LEAVES and visited <= 4 * MAX_TREE_LEAVES:
        node = stack.pop()
        visited += 1
        children = children_of(node)
        if children is None:
            leaves += 1
            arrays += is_array(node) and getattr(node, "ndim", 0) >= 1
        else:
            stack.extend(children)
    return leaves, arrays


def treescope_html(value: Any, heatmaps: bool) -> str:
    import treescope

    if not heatmaps:
        return stable_ids(treescope.render_to_html(value, ignore_exceptions=True))
    with treescope.active_autovisualizer.set_scoped(treescope.ArrayAutovisualizer()):
        return stable_ids(treescope.render_to_html(value, ignore_exceptions=True))


def stable_ids(html: str) -> str:
    """treescope names each view's elements with a fresh uuid4; number them in the order made instead,
    so that the same program shows the same bytes in every run (each view has a frame of its own,
    so the names need only differ within a run). The result cache shares a run only once a second
    run agreed with it byte for byte (server/runs/result_verification.py)."""
    def numbered(match: re.Match[str]) -> str:
        original = match.group(0)
        if original not in _treescope_ids:
            counted = hashlib.sha256(f"jaxplay-view-{len(_treescope_ids)}".encode()).hexdigest()[:32]
            _treescope_ids[original] = match.group(1) + counted
        return _treescope_ids[original]

    return TREESCOPE_ID.sub(numbered, html)


def as_tree_view(value: Any) -> Rendered:
    leaves, arrays = survey(value)
    if leaves > MAX_TREE_LEAVES:
        return as_text(value, f"It has more than {MAX_TREE_LEAVES:,} leaves, the explorable view's limit; shown as text.")
    notice = None
    if 0 < arrays <= MAX_HEATMAP_ARRAYS:
        html = treescope_html(value, heatmaps=True)
        if len(html) <= MAX_HTML_BYTES:
            return Rendered("text/html", html)
        notice = f"Heat-maps left out: with them the view would be {len(html) // 1024} KiB."
    elif arrays > MAX_HEATMAP_ARRAYS:
        notice = f"Heat-maps left out: {arrays} arrays is more than {MAX_HEATMAP_ARRAYS}."
    html = treescope_html(value, heatmaps=False)
    if len(html) <= MAX_HTML_BYTES:
        return Rendered("text/html", html, notice)
    return as_text(value, f"The explorable view would be {len(html) // 1024} KiB, over the {MAX_HTML_BYTES // 1024} KiB limit; shown as text.")
