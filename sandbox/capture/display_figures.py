"""matplotlib figures shown inline, as images, where the code made them.

matplotlib is never imported here unless the user's code imported it: the
backend is chosen through ``MPLBACKEND`` (read by matplotlib at its import)
and names our own Agg-based backend, ``sandbox.capture.display_backend``,
whose ``show()`` sends the open figures. Figures still open when the code
ends are sent by ``finish``. A run may send at most MAX_FIGURES figures and
MAX_FIGURE_BYTES of images; past that a notice goes to stderr.
"""

from __future__ import annotations

import base64
import io
import os
import re
import struct
import sys
import tempfile
import weakref
from typing import Any

from sandbox.capture.display_budget import Budget
from sandbox.capture.display_render import Rendered

BACKEND = "module://sandbox.capture.display_backend"
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


def configure_matplotlib() -> None:
    """Before user code: our backend, and a config dir matplotlib can write its font cache to."""
    global budget
    budget = Budget("figures", MAX_FIGURES, MAX_FIGURE_BYTES)
    _sent.clear()
    os.environ["MPLBACKEND"] = BACKEND
    config_dir = os.environ.get("MPLCONFIGDIR")
    if not config_dir or not os.access(config_dir, os.W_OK):
        # Inside the sandbox HOME may be unset and only /tmp is writable.
        os.environ["MPLCONFIGDIR"] = tempfile.mkdtemp(prefix="matplotlib-")
    matplotlib = sys.modules.get("matplotlib")
    if matplotlib is not None:  # imported before the run (e.g. by the zygote)
        matplotlib.use(BACKEND, force=True)


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
    if figure_format() == "svg":
        fig.savefig(buffer, format="svg", bbox_inches="tight")
        svg = buffer.getvalue().decode("utf-8")
        size_pt = svg_size(svg)
        if size_pt is None:
            return Rendered("image/svg+xml", svg)
        # 72 pt to the inch; shown at the figure's dpi, as the PNG would be.
        return Rendered("image/svg+xml", svg, None, round(size_pt[0] * dpi / 72), round(size_pt[1] * dpi / 72))
    fig.savefig(buffer, format="png", dpi=dpi * ratio, bbox_inches="tight")
    png = buffer.getvalue()
    width_px, height_px = png_size(png)
    return Rendered("image/png", base64.b64encode(png).decode("ascii"), notice,
                    round(width_px / max(ratio, 1.0)), round(height_px / max(ratio, 1.0)))


def send_figure(fig: Any, role: str) -> None:
    from sandbox.capture import display

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
    display.emit_rendered(rendered, role)


def show_open_figures(close: bool = True) -> None:
    """``plt.show()``: every open figure, then closed, as a script's show() leaves them."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    from matplotlib._pylab_helpers import Gcf  # pyplot's figure registry; figure(n) would change the current one

    for manager in Gcf.get_all_fig_managers():
        fig = manager.canvas.figure
        if fig not in _sent or fig.stale:
            send_figure(fig, "figure")
    if close:
        pyplot.close("all")


def finish() -> None:
    show_open_figures(close=True)
