"""matplotlib figures shown inline, as images, where the code made them.

matplotlib is never imported here unless the user's code imports it: an
import hook prepares its environment at that moment (``MPLBACKEND``, read by
matplotlib at its import, names our own Agg-based backend
``jaxplay.sandbox.capture.display_backend``, whose ``show()`` sends the open
figures; a writable config dir; a fontconfig file), so ``print(1)`` pays
nothing. Figures still open when the code ends are sent by ``finish``. A run
may send at most MAX_FIGURES figures and MAX_FIGURE_BYTES of image data (as
sent: base64 for PNG); past that a notice goes to stderr.
"""

from __future__ import annotations

import base64
import importlib.abc
import io
import os
import re
import struct
import sys
import tempfile
import weakref
from typing import Any

from jaxplay.sandbox.capture import display_event
from jaxplay.sandbox.capture.display_budget import Budget
from jaxplay.sandbox.capture.display_event import Rendered

BACKEND = "module://jaxplay.sandbox.capture.display_backend"
MAX_FIGURES = 20
MAX_FIGURE_BYTES = 5 * 1024 * 1024
# PNGs are drawn at twice the figure's dpi so they are sharp on high-density
# screens, and shown at the figure's size in CSS pixels.
PIXEL_RATIO = 2
# A 50-inch figure at 300 dpi would take seconds and hundreds of MB to draw.
MAX_PIXELS_PER_SIDE = 4096

budget = Budget("figures", MAX_FIGURES, MAX_FIGURE_BYTES)
# Figures sent and not changed since (matplotlib marks a changed figure stale).
_sent: weakref.WeakSet[Any] = weakref.WeakSet()


FONTCONFIG_FILE = """<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<fontconfig>
  <dir>/usr/share/fonts</dir>
  <dir>/usr/local/share/fonts</dir>
  <cachedir>{cache}</cachedir>
</fontconfig>
"""


class PrepareMatplotlib(importlib.abc.MetaPathFinder):
    """Prepares matplotlib's environment when the user's code first imports it, and not before."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name == "matplotlib":
            remove_import_hook()
            prepare_environment()
        return None  # the normal finders import it


def remove_import_hook() -> None:
    sys.meta_path[:] = [finder for finder in sys.meta_path if not isinstance(finder, PrepareMatplotlib)]


def configure_matplotlib() -> None:
    """Before user code: reset the per-run state; matplotlib is prepared only if it is imported."""
    global budget
    budget = Budget("figures", MAX_FIGURES, MAX_FIGURE_BYTES)
    _sent.clear()
    remove_import_hook()
    matplotlib = sys.modules.get("matplotlib")
    if matplotlib is None:
        sys.meta_path.insert(0, PrepareMatplotlib())
        return
    # Imported before the run (e.g. by the zygote, to spare each run ~0.5 s): its
    # config dir was chosen then and may since have been emptied away with /tmp.
    prepare_environment()
    for directory in (matplotlib.get_configdir(), matplotlib.get_cachedir()):
        os.makedirs(directory, exist_ok=True)
    matplotlib.use(BACKEND, force=True)


def prepare_environment() -> None:
    """Our backend, a config dir for matplotlib's font cache, and a fontconfig that can find fonts."""
    os.environ["MPLBACKEND"] = BACKEND
    config_dir = os.environ.get("MPLCONFIGDIR")
    if not config_dir or not os.access(config_dir, os.W_OK):
        # Inside the sandbox HOME may be unset and only /tmp is writable.
        config_dir = os.environ["MPLCONFIGDIR"] = tempfile.mkdtemp(prefix="matplotlib-")
    if "FONTCONFIG_FILE" not in os.environ and not os.access("/etc/fonts/fonts.conf", os.R_OK):
        # matplotlib runs fc-list while building its font cache; without /etc/fonts (as in the
        # sandbox) fc-list prints "Fontconfig error: Cannot load default config file" to stderr.
        path = os.path.join(config_dir, "fonts.conf")
        with open(path, "w", encoding="utf-8") as f:
            f.write(FONTCONFIG_FILE.format(cache=os.path.join(config_dir, "fontconfig")))
        os.environ["FONTCONFIG_FILE"] = path


def is_figure(value: Any) -> bool:
    figure_module = sys.modules.get("matplotlib.figure")
    return figure_module is not None and isinstance(value, figure_module.Figure)


def figure_format() -> str:
    """``plt.rcParams["savefig.format"] = "svg"`` asks for SVG; anything else is PNG."""
    matplotlib = sys.modules.get("matplotlib")
    if matplotlib is not None and matplotlib.rcParams.get("savefig.format") == "svg":
        return "svg"
    return "png"


def png_size(png: bytes) -> tuple[int, int]:
    # The IHDR chunk follows the 8-byte signature: length, type, width, height.
    width, height = struct.unpack(">II", png[16:24])
    return width, height


def svg_size(svg: str) -> tuple[float, float] | None:
    match = re.search(r'<svg[^>]*\swidth="([\d.]+)pt"[^>]*\sheight="([\d.]+)pt"', svg[:2000])
    return (float(match.group(1)), float(match.group(2))) if match else None


def figure_image(fig: Any) -> Rendered:
    dpi = float(fig.dpi)
    width_in, height_in = fig.get_size_inches()
    largest_side_px = max(width_in, height_in, 0.01) * dpi
    ratio = min(PIXEL_RATIO, MAX_PIXELS_PER_SIDE / largest_side_px)
    notice = None
    if ratio < 1:
        notice = f"Drawn at {ratio * dpi:.0f} dpi instead of {dpi:.0f}: the figure is wider or taller than {MAX_PIXELS_PER_SIDE} pixels."
    buffer = io.BytesIO()
    text = repr(fig)  # "<Figure size 640x480 with 1 Axes>": the figure where images are not shown
    if figure_format() == "svg":
        import matplotlib

        # Its element ids from a fixed salt, not a fresh uuid: the same figure is the same bytes in every run.
        with matplotlib.rc_context({"svg.hashsalt": "jaxplay"}):
            fig.savefig(buffer, format="svg", bbox_inches="tight")
        svg = buffer.getvalue().decode("utf-8")
        size_pt = svg_size(svg)
        if size_pt is None:
            return Rendered("image/svg+xml", svg, text=text)
        # 72 pt to the inch; shown at the figure's dpi, as the PNG would be.
        return Rendered("image/svg+xml", svg, None, round(size_pt[0] * dpi / 72), round(size_pt[1] * dpi / 72),
                        text=text)
    fig.savefig(buffer, format="png", dpi=dpi * ratio, bbox_inches="tight")
    png = buffer.getvalue()
    width_px, height_px = png_size(png)
    return Rendered("image/png", base64.b64encode(png).decode("ascii"), notice,
                    round(width_px / max(ratio, 1.0)), round(height_px / max(ratio, 1.0)), text=text)


def send_figure(fig: Any, role: str) -> None:
    # Out of budget: the figure is not even drawn.
    if budget.exhausted():
        budget.refuse(0)
        _sent.add(fig)
        return
    rendered = figure_image(fig)
    fig.stale = False
    _sent.add(fig)
    size = len(rendered.data)
    if not budget.admit(size):
        return
    display_event.emit(rendered, role)


def show_open_figures(close: bool = True) -> None:
    """``plt.show()``: every open figure, then closed, as a script's show() leaves them.

    A figure that fails to draw raises here, at the user's ``plt.show()`` line.
    """
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    for fig in open_figures():
        if fig not in _sent or fig.stale:
            send_figure(fig, "figure")
    if close:
        pyplot.close("all")


def open_figures() -> list[Any]:
    from matplotlib._pylab_helpers import Gcf  # pyplot's registry; pyplot.figure(n) would change the current one

    return [manager.canvas.figure for manager in Gcf.get_all_fig_managers()]


def finish() -> None:
    """Figures still open at the end; one that fails to draw is reported in a line, not a traceback."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    for number, fig in enumerate(open_figures(), start=1):
        if fig in _sent and not fig.stale:
            continue
        try:
            send_figure(fig, "figure")
        except Exception as exc:  # noqa: BLE001 - the user's figure, e.g. bad mathtext in a label
            print(f"[playground] Figure {number} could not be drawn: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    pyplot.close("all")
