"""The display capture end to end in a real runner process (no sandbox): events as the worker reads them.

Programs run through the runner in a fork of a process that imported JAX (tests/runner_harness.py).
"""

from __future__ import annotations

import base64
import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests import runner_harness

# For the tests of which view a value gets: a tree view's first render (treescope's import, its heat-map's
# compilations) took over the 3 s limit on a loaded machine, where the zygote has imported treescope ahead.
NO_RENDER_LIMIT = "from jaxplay.sandbox.capture import display_render\ndisplay_render.RENDER_TIME_LIMIT_S = 600.0\n"


def run_program(tmp_path: Path, code: str, env: dict[str, str] | None = None,
                before: str = "") -> tuple[list[dict], str, str]:
    """Run ``code`` through the runner (after ``before``); return (events, stdout, stderr)."""
    # Output to files, not pipes: nobody reads a pipe while the program runs here,
    # and a display waits for the output before it to be read from a pipe.
    ran = runner_harness.run_program(textwrap.dedent(code), tmp_path / "run", env, before=before, timeout=180)
    return ran.events, ran.stdout, ran.stderr


def displays(events: list[dict]) -> list[dict]:
    return [event for event in events if event["type"] == "display"]


def test_the_last_expression_is_shown_and_none_is_not(tmp_path):
    events, stdout, _ = run_program(tmp_path, """
        print("printed")
        6 * 7
    """)
    assert stdout == "printed\n"
    assert displays(events) == [{"type": "display", "mime": "text/plain", "data": "42", "role": "result"}]
    events, _, _ = run_program(tmp_path, "print('x')\nNone\n")
    assert displays(events) == []


def test_printing_stays_plain_text(tmp_path):
    events, stdout, _ = run_program(tmp_path, """
        import jax.numpy as jnp
        print({"w": jnp.ones((2, 2))})
        x = 1
    """)
    assert "Array([[1., 1.]" in stdout
    assert displays(events) == []


def test_display_helper_shows_each_value_in_order(tmp_path):
    events, _, _ = run_program(tmp_path, """
        from playground import HTML, display
        import jax.numpy as jnp
        display(1, {"w": jnp.eye(3)}, HTML("<b>bold</b>"))
    """, before=NO_RENDER_LIMIT)
    shown = displays(events)
    assert [(e["mime"], e["role"]) for e in shown] == [
        ("text/plain", "display"), ("text/html", "display"), ("text/html", "display")]
    assert shown[0]["data"] == "1"
    assert "treescope" in shown[1]["data"]
    assert shown[2]["data"] == "<b>bold</b>"


def test_plt_show_sends_a_png_of_the_figure_size_then_open_figures_at_the_end(tmp_path):
    events, stdout, _ = run_program(tmp_path, """
        import matplotlib.pyplot as plt
        fig = plt.figure(figsize=(4, 3), dpi=100)
        plt.plot([1, 2, 3])
        plt.show()
        print("after show")
        plt.figure(figsize=(2, 2))
        lines = plt.plot([3, 2, 1])
    """)
    assert stdout == "after show\n"
    shown = displays(events)
    assert [(e["mime"], e["role"]) for e in shown] == [("image/png", "figure"), ("image/png", "figure")]
    png = base64.b64decode(shown[0]["data"])
    assert png.startswith(b"\x89PNG")
    # A tight bounding box trims the margins: a little under 400x300 CSS pixels, drawn at twice that.
    assert 300 < shown[0]["width"] <= 400 and 200 < shown[0]["height"] <= 300
    assert int.from_bytes(png[16:20], "big") == pytest.approx(2 * shown[0]["width"], abs=2)


def test_a_figure_shown_once_and_unchanged_is_not_sent_again(tmp_path):
    events, _, _ = run_program(tmp_path, """
        import matplotlib.pyplot as plt
        from playground import display
        fig, ax = plt.subplots()
        ax.plot([1, 2])
        display(fig)
        fig2, ax2 = plt.subplots()
        ax2.plot([1, 2])
        display(fig2)
        more = ax2.plot([2, 1])  # changed after display: sent again at the end
    """)
    assert [e["role"] for e in displays(events)] == ["display", "display", "figure"]


def test_svg_is_sent_when_savefig_format_asks_for_it(tmp_path):
    events, _, _ = run_program(tmp_path, """
        import matplotlib.pyplot as plt
        plt.rcParams["savefig.format"] = "svg"
        plt.figure(figsize=(3, 2))
        lines = plt.plot([1, 2])
    """)
    (shown,) = displays(events)
    assert shown["mime"] == "image/svg+xml" and shown["role"] == "figure"
    assert "<svg" in shown["data"][:1000]
    assert 200 < shown["width"] <= 300


def test_a_figure_as_the_last_expression_is_its_result(tmp_path):
    events, _, _ = run_program(tmp_path, """
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots()
        ax.plot([1, 2])
        fig
    """)
    assert [(e["mime"], e["role"]) for e in displays(events)] == [("image/png", "result")]


def test_at_most_20_figures_per_run_with_a_notice(tmp_path):
    events, _, stderr = run_program(tmp_path, """
        import matplotlib.pyplot as plt
        for i in range(25):
            plt.figure(figsize=(1, 1))
            plt.show()
    """)
    assert len(displays(events)) == 20
    assert stderr.count("[playground] Not shown: a run shows at most 20 figures") == 1


def test_figure_bytes_are_bounded_per_run(tmp_path):
    events, _, stderr = run_program(tmp_path, """
        import numpy as np
        import matplotlib.pyplot as plt
        rng = np.random.default_rng(0)
        for i in range(10):
            plt.figure(figsize=(8, 8))
            plt.imshow(rng.random((400, 400)))  # noise compresses badly: ~1.5 MB each
            plt.show()
    """)
    sizes = [len(base64.b64decode(e["data"])) for e in displays(events)]
    assert 0 < len(sizes) < 10
    assert sum(len(e["data"]) for e in displays(events)) <= 5 * 1024 * 1024
    assert "MiB of figures" in stderr


def test_matplotlib_is_not_imported_unless_the_program_does(tmp_path):
    events, stdout, _ = run_program(tmp_path, """
        import sys
        print("matplotlib" in sys.modules, "treescope" in sys.modules)
        1
    """)
    assert stdout == "False False\n"


def test_install_and_finish_cost_no_import_or_scan_per_run(monkeypatch):
    from jaxplay import worker_protocol as wp
    from jaxplay.sandbox.capture import display, display_figures

    # install() may write these; restore them after the test.
    for name in ("MPLBACKEND", "MPLCONFIGDIR", "FONTCONFIG_FILE"):
        monkeypatch.setenv(name, os.environ.get(name, ""))
    try:
        display.install(wp.SandboxRun())  # first call pays for imports the zygote already made
        started = time.perf_counter()
        for _ in range(100):
            display.install(wp.SandboxRun())
            display.finish()
        per_run_ms = (time.perf_counter() - started) * 1000 / 100
        # Well under 1 ms on a quiet machine; this bound only catches a gross regression (an import
        # or a scan per run) without failing on a loaded shared one.
        assert per_run_ms < 20.0, f"display install+finish costs {per_run_ms:.3f} ms per run"
        if "matplotlib" not in sys.modules:
            # Nothing was prepared: that waits for the user's `import matplotlib`.
            assert sum(isinstance(f, display_figures.PrepareMatplotlib) for f in sys.meta_path) == 1
    finally:
        display_figures.remove_import_hook()


def test_matplotlib_gets_a_writable_config_dir_without_home(tmp_path):
    env = {"HOME": "/nonexistent", "MPLCONFIGDIR": ""}
    events, _, stderr = run_program(tmp_path, """
        import matplotlib, os
        print(matplotlib.get_configdir(), os.access(matplotlib.get_configdir(), os.W_OK))
        import matplotlib.pyplot as plt
        lines = plt.plot([1])
    """, env)
    assert "Matplotlib created a temporary" not in stderr
    assert len(displays(events)) == 1


def test_display_from_a_user_thread_works(tmp_path):
    events, _, _ = run_program(tmp_path, """
        import threading
        from playground import display
        import numpy as np
        t = threading.Thread(target=display, args=({"a": [np.ones(2)]},))
        t.start(); t.join()
    """, before=NO_RENDER_LIMIT)
    assert [(e["mime"], e["role"]) for e in displays(events)] == [("text/html", "display")]


def test_a_display_waits_until_the_output_before_it_was_read(tmp_path):
    """With output on pipes, an event is written only once the reader has the lines printed before it."""
    code = "from playground import display\nfor i in range(20):\n    print('line', i)\n    display(i)\n"
    events_r, events_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    stderr_r, stderr_w = os.pipe()
    run = runner_harness.forking_runner().start(code, stdout_w, stderr_w, events_w, timeout=30)
    for fd in (events_w, stdout_w, stderr_w):
        os.close(fd)
    # Read both pipes as a worker would, noting the order in which things arrive; when both are
    # ready the events pipe is read first, the worst case for a reader of two pipes.
    import selectors

    order: list[str] = []
    buffers = {stdout_r: b"", events_r: b""}
    selector = selectors.DefaultSelector()
    for fd in buffers:
        selector.register(fd, selectors.EVENT_READ)
    open_fds = set(buffers)
    while open_fds:
        time.sleep(0.02)  # a busy reader: let both pipes fill
        for key, _ in sorted(selector.select(timeout=30), key=lambda ready: ready[0].fd != events_r):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                selector.unregister(key.fd)
                open_fds.discard(key.fd)
                continue
            buffers[key.fd] += chunk
            *lines, buffers[key.fd] = buffers[key.fd].split(b"\n")
            for line in lines:
                order.append(line.decode() if key.fd != events_r else "display " + json.loads(line)["data"])
    run.wait()
    for fd in (events_r, stdout_r, stderr_r):
        os.close(fd)
    assert order == [item for i in range(20) for item in (f"line {i}", f"display {i}")]


def test_figures_work_when_matplotlib_was_imported_before_the_run(tmp_path):
    """As a zygote may do: prepare, import pyplot, then lose /tmp's contents before the run."""
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()\nimport matplotlib\nprint(matplotlib.get_backend())\n"
    before = """
        import os, shutil
        from jaxplay.sandbox.capture import display_figures
        display_figures.prepare_environment()
        import matplotlib.pyplot
        shutil.rmtree(os.environ['MPLCONFIGDIR'])
    """
    ran = runner_harness.run_program(code, tmp_path / "run", {"MPLCONFIGDIR": ""}, before=before, timeout=60)
    events, stdout, stderr = ran.events, ran.stdout, ran.stderr
    assert stdout == "module://jaxplay.sandbox.capture.display_backend\n", stderr
    assert [(e["mime"], e["role"]) for e in displays(events)] == [("image/png", "figure")]
    assert "Matplotlib" not in stderr


def test_a_figure_that_cannot_be_drawn_is_reported_in_one_line(tmp_path):
    events, _, stderr = run_program(tmp_path, """
        import matplotlib.pyplot as plt
        plt.figure()
        plt.title(r"$\\frac{1}{$")  # unbalanced mathtext fails only when drawn
        plt.figure(figsize=(2, 2))
        lines = plt.plot([1, 2])
    """)
    assert "[playground] Figure 1 could not be drawn: ValueError" in stderr
    assert "Traceback" not in stderr
    assert [(e["mime"], e["role"]) for e in displays(events)] == [("image/png", "figure")]
    assert not [e for e in events if e["type"] == "error"]
