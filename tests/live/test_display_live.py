"""Displays through the real server, worker and sandbox: each mime and each role."""

from __future__ import annotations

import base64

from tests.conftest import done_of, output_text


def displays(events: list[dict]) -> list[dict]:
    return [e for e in events if e["type"] == "display"]


def test_last_expression_text_and_pytree_html(live):
    events = live.run("""
import jax.numpy as jnp
print("before")
x = jnp.arange(6.0).reshape(2, 3)
{"w": x, "b": jnp.zeros(3)}
""")
    assert done_of(events)["status"] == "ok"
    (shown,) = displays(events)
    assert shown["role"] == "result" and shown["mime"] == "text/html"
    assert "treescope" in shown["data"] and "notice" not in shown
    # The display comes after the output printed before it.
    kinds = [e["type"] for e in events if e["type"] in ("stdout", "display")]
    assert kinds == ["stdout", "display"]

    events = live.run("1 + 1")
    assert [(e["mime"], e["data"], e["role"]) for e in displays(events)] == [("text/plain", "2", "result")]
    assert displays(live.run("print('x')\nNone")) == []


def test_display_helper_in_the_sandbox(live):
    events = live.run("""
from playground import HTML, display
import jax.numpy as jnp
display("text", jnp.eye(3), HTML("<i>hi</i>"))
""")
    assert done_of(events)["status"] == "ok"
    assert [(e["mime"], e["role"]) for e in displays(events)] == [
        ("text/plain", "display"), ("text/html", "display"), ("text/html", "display")]


def test_matplotlib_png_and_svg_figures_in_the_sandbox(live):
    events = live.run("""
import matplotlib.pyplot as plt
plt.figure(figsize=(4, 3))
plt.plot([1, 3, 2])
plt.show()
plt.rcParams["savefig.format"] = "svg"
plt.figure(figsize=(2, 2))
_ = plt.plot([1, 2])
""")
    assert done_of(events)["status"] == "ok", output_text(events, "stderr")
    png, svg = displays(events)
    assert (png["mime"], png["role"]) == ("image/png", "figure")
    assert base64.b64decode(png["data"]).startswith(b"\x89PNG")
    assert 300 < png["width"] <= 400 and 200 < png["height"] <= 300
    assert (svg["mime"], svg["role"]) == ("image/svg+xml", "figure") and "<svg" in svg["data"]
    # No "Matplotlib created a temporary cache directory" or backend warnings.
    assert output_text(events, "stderr") == ""


def test_figure_count_bound_in_the_sandbox(live):
    events = live.run("""
import matplotlib.pyplot as plt
for i in range(22):
    plt.figure(figsize=(1, 1))
plt.show()
""")
    assert done_of(events)["status"] == "ok"
    assert len(displays(events)) == 20
    assert "at most 20 figures" in output_text(events, "stderr")


def test_a_huge_array_is_summarised_and_a_slow_repr_is_cut_short(live):
    events = live.run("""
import jax.numpy as jnp
big = jnp.ones((3000, 3000))
big
""")
    assert done_of(events)["status"] == "ok"
    (shown,) = displays(events)
    assert shown["mime"] == "text/html" and len(shown["data"]) < 100_000  # 36 MB of data

    events = live.run("""
import time
class Slow:
    def __repr__(self):
        time.sleep(30)
        return "never"
Slow()
""")
    assert done_of(events)["status"] == "ok"
    (shown,) = displays(events)
    assert shown["mime"] == "text/plain" and shown["data"].endswith("Slow object>")
    assert "took longer than" in shown["notice"]


def test_displays_arrive_in_order_with_the_printed_output(live):
    events = live.run("""
from playground import display
for i in range(30):
    print("line", i)
    display(i)
""")
    assert done_of(events)["status"] == "ok"
    order = []
    for event in events:
        if event["type"] == "stdout":
            order += event["text"].splitlines()
        elif event["type"] == "display":
            order.append("display " + event["data"])
    assert order == [item for i in range(30) for item in (f"line {i}", f"display {i}")]
