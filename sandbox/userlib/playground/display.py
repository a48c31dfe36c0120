"""``display(*values)``: show values in the Output, the way the last expression is shown.

Arrays and pytrees get an explorable view (expand nodes, shape, dtype,
statistics, heat-maps), matplotlib figures an image, other values their
repr. ``HTML("<b>...</b>")`` shows HTML as it is, in a sandboxed frame.
"""

from __future__ import annotations

from jaxplay.sandbox.capture import display as _capture


def display(*values: object) -> None:
    """Show each value in the Output, in order, where the program is now.

    >>> display(params, jnp.eye(4), fig)
    """
    for value in values:
        _capture.show(value, "display")


class HTML:
    """HTML to show as it is (scripts run in a sandboxed frame that cannot reach the page)."""

    def __init__(self, html: str) -> None:
        if not isinstance(html, str):
            raise TypeError(f"HTML() takes a str of HTML, not {type(html).__name__}.")
        self.html = html

    def _repr_html_(self) -> str:
        return self.html

    def __repr__(self) -> str:
        return f"HTML({self.html[:60]!r}{'...' if len(self.html) > 60 else ''})"
