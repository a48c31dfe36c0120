"""The matplotlib backend of the playground: Agg drawing, figures sent inline.

Chosen with ``MPLBACKEND=module://jaxplay.sandbox.capture.display_backend`` (set by
``display_figures.configure_matplotlib``), so matplotlib imports this module
only when the user's code imports pyplot. ``plt.show()`` and ``fig.show()``
send figures to the page instead of opening windows.
"""

from __future__ import annotations

from typing import Any

from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg

from jaxplay.sandbox.capture import display_figures


class FigureManagerPlayground(FigureManagerBase):
    def show(self) -> None:  # fig.show()
        display_figures.send_figure(self.canvas.figure, "figure")


class FigureCanvasPlayground(FigureCanvasAgg):
    manager_class = FigureManagerPlayground


FigureCanvas = FigureCanvasPlayground
FigureManager = FigureManagerPlayground


def show(*args: Any, **kwargs: Any) -> None:
    """``plt.show()``: send every open figure, then close them (``block`` has no meaning here)."""
    display_figures.show_open_figures(close=True)
