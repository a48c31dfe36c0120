"""display_render: which view a value gets, and the bounds on size and time."""

from __future__ import annotations

import base64
import dataclasses
import signal
import time

import jax.numpy as jnp
import numpy as np
import pytest

from jaxplay.sandbox.capture import display_render
from jaxplay.sandbox.capture.display_render import render


@pytest.fixture(scope="module", autouse=True)
def warm_renderer() -> None:
    """treescope imported and a tree view with a heat-map drawn once, untimed: a render's time limit
    is for the value, and the zygote has imported treescope before any run; the first heat-map's
    imports and compilations took over the 3 s limit on a loaded machine."""
    limit = display_render.RENDER_TIME_LIMIT_S
    display_render.RENDER_TIME_LIMIT_S = 600.0
    try:
        assert render({"w": jnp.ones((2, 2))}).mime == "text/html"
    finally:
        display_render.RENDER_TIME_LIMIT_S = limit


def test_plain_values_stay_text_like_the_repl():
    assert render(42) == display_render.Rendered("text/plain", "42")
    assert render("hi").data == "'hi'"
    assert render(jnp.float32(2.5)).mime == "text/plain"  # a 0-d array is a number
    assert render([]).data == "[]"


def test_arrays_and_pytrees_get_the_explorable_view_with_heatmaps():
    params = {"w": jnp.arange(12.0).reshape(3, 4), "b": jnp.zeros(4)}
    rendered = render(params)
    assert rendered.mime == "text/html"
    assert rendered.notice is None
    assert "treescope" in rendered.data
    assert rendered.text.startswith("{'w': Array(") and "'b': Array(" in rendered.text  # its plain form beside it
    # A heat-map (treescope's arrayviz) makes the page much bigger than the summary alone.
    without = display_render.treescope_html(params, heatmaps=False)
    assert len(rendered.data) > len(without) + 5000


def test_dataclass_and_registered_pytree_nodes_get_the_explorable_view():
    @dataclasses.dataclass
    class Layer:
        w: np.ndarray

    assert display_render.wants_tree_view(Layer(np.ones(3)))
    import jax

    @jax.tree_util.register_pytree_node_class
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

        def tree_flatten(self):
            return (self.a, self.b), None

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children)

    assert display_render.wants_tree_view(Pair(np.ones(2), 2))
    assert not display_render.wants_tree_view(Pair(1, 2))  # nothing to explore

    class Plain:
        pass

    assert not display_render.wants_tree_view(Plain())


def test_many_arrays_leave_out_heatmaps_with_a_notice():
    many = [np.full(4, i, dtype=np.float32) for i in range(display_render.MAX_HEATMAP_ARRAYS + 1)]
    rendered = render(many)
    assert rendered.mime == "text/html"
    assert rendered.notice and "Heat-maps left out" in rendered.notice


def test_plain_data_in_containers_stays_text():
    assert render(list(range(500))) == display_render.Rendered("text/plain", repr(list(range(500))))
    assert render({"lr": 0.1, "schedule": {"warmup": 10}}).mime == "text/plain"
    assert render({"w": np.ones(2), "lr": 0.1}).mime == "text/html"


def test_a_container_that_holds_itself_is_surveyed_in_bounded_time():
    loop: list = []
    loop.append(loop)
    assert render(loop).data == "[[...]]"


def test_too_many_leaves_falls_back_to_text_with_a_notice():
    leaves = [np.zeros(1)] * (display_render.MAX_TREE_LEAVES + 1)
    rendered = render(leaves)
    assert rendered.mime == "text/plain"
    assert rendered.data.startswith("[array([0.]), array([0.])")
    assert "leaves" in rendered.notice


def test_a_big_array_is_summarised_never_sent_whole():
    big = np.arange(4_000_000, dtype=np.float32).reshape(2000, 2000)
    rendered = render(big)
    assert rendered.mime == "text/html"
    assert len(rendered.data) < 100_000  # 16 MB of data, a summary and a truncated heat-map
    assert rendered.notice is None


def test_long_text_is_cut_with_a_notice():
    rendered = render("x" * (display_render.MAX_TEXT_CHARS * 2))
    assert len(rendered.data) == display_render.MAX_TEXT_CHARS
    assert "200,002" in rendered.notice


def test_a_slow_repr_is_interrupted_and_only_the_type_is_shown(monkeypatch):
    monkeypatch.setattr(display_render, "RENDER_TIME_LIMIT_S", 0.2)

    class Slow:
        def __repr__(self):
            time.sleep(5)
            return "never"

    started = time.monotonic()
    rendered = render(Slow())
    assert time.monotonic() - started < 2
    assert rendered.data.endswith("Slow object>")
    assert "took longer than 0.2 s" in rendered.notice


def test_a_slow_tree_view_falls_back_to_text(monkeypatch):
    monkeypatch.setattr(display_render, "RENDER_TIME_LIMIT_S", 0.2)

    def slow_view(value, heatmaps):
        time.sleep(5)

    monkeypatch.setattr(display_render, "treescope_html", slow_view)
    rendered = render({"a": np.ones(3)})
    assert rendered.mime == "text/plain"
    assert "{'a': array([1., 1., 1.])}" == rendered.data
    assert "took longer" in rendered.notice


def test_time_limit_restores_a_timer_the_user_had_set():
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *a: fired.append(True))
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.3)
        with display_render.time_limit(1.0):
            pass
        assert signal.getitimer(signal.ITIMER_REAL)[0] > 0
        time.sleep(0.5)
        assert fired == [True]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_repr_errors_propagate_as_in_python():
    class Broken:
        def __repr__(self):
            raise ValueError("bad repr")

    with pytest.raises(ValueError, match="bad repr"):
        render(Broken())


def test_ipython_display_protocol_is_honoured():
    class Table:
        def _repr_html_(self):
            return "<table><tr><td>1</td></tr></table>"

    class Picture:
        def _repr_png_(self):
            return b"\x89PNG fake"

    class Declines:
        def _repr_html_(self):
            return None

        def __repr__(self):
            return "Declines()"

    table = render(Table())
    assert (table.mime, table.data) == ("text/html", "<table><tr><td>1</td></tr></table>")
    assert table.text.startswith("<") and "Table object at" in table.text  # its plain form, for exports
    png = render(Picture())
    assert png.mime == "image/png" and base64.b64decode(png.data) == b"\x89PNG fake"
    assert render(Declines()).data == "Declines()"
    assert render(Table).mime == "text/plain"  # the class, not an instance


def test_oversized_self_rendered_html_falls_back_to_text():
    class Huge:
        def _repr_html_(self):
            return "<p>" + "x" * display_render.MAX_HTML_BYTES

        def __repr__(self):
            return "Huge()"

    rendered = render(Huge())
    assert rendered == display_render.Rendered("text/plain", "Huge()", rendered.notice)
    assert "KiB limit" in rendered.notice


def test_an_oversized_tree_view_drops_heatmaps_then_falls_back_to_text(monkeypatch):
    params = {"w": np.ones((64, 64)), "b": np.zeros(64)}
    summary_size = len(display_render.treescope_html(params, heatmaps=False))
    monkeypatch.setattr(display_render, "MAX_HTML_BYTES", summary_size)
    smaller = render(params)
    assert smaller.mime == "text/html" and "Heat-maps left out" in smaller.notice
    monkeypatch.setattr(display_render, "MAX_HTML_BYTES", summary_size - 1)
    text = render(params)
    assert text.mime == "text/plain" and "KiB limit" in text.notice


def test_the_same_values_make_the_same_bytes_in_every_run(monkeypatch):
    """treescope names elements with fresh uuid4s; numbered in the order made, a second run shows the same
    bytes (the result cache compares runs byte for byte), and views within one run keep distinct names."""
    params = {"w": jnp.arange(12.0).reshape(3, 4), "b": jnp.zeros(4)}

    def one_run() -> list[str]:
        monkeypatch.setattr(display_render, "_treescope_ids", {})  # each run is a fresh process
        return [render(params).data, render(jnp.ones(3)).data]

    first, second = one_run(), one_run()
    assert first == second
    names = [set(display_render.TREESCOPE_ID.findall(html)) for html in first]
    assert all(names) and not names[0] & names[1]
