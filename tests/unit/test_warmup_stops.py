"""A spare's warming gives way to the run: it stops between operations, and its program at its next
call, once the run has come; what it runs stays out of the run's output, environment and interpreter."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import jax
import pytest

from jaxplay.sandbox.engine import warmup


def test_warming_stops_between_operations_once_the_run_has_come(monkeypatch):
    stop = threading.Event()
    warmed: list[object] = []

    def count_and_stop(value: object) -> object:
        warmed.append(value)
        stop.set()  # the run arrives while the first operation warms
        return value

    monkeypatch.setattr(jax, "block_until_ready", count_and_stop)
    warmup.common_operations(stop=stop)
    assert len(warmed) == 1

    warmed.clear()
    stop.clear()
    monkeypatch.setattr(jax, "block_until_ready", lambda value: warmed.append(value) or value)
    warmup.common_operations(stop=stop)
    assert len(warmed) == 4  # undisturbed, every operation warms


def test_the_warm_program_stops_at_its_next_line_once_the_run_has_come():
    stop = threading.Event()
    ended: list[object] = []
    endless = "def step():\n    return 1\n\nwhile True:\n    step()\n"

    def warm() -> None:
        warmup.run_program(stop, endless)
        ended.append(sys.gettrace())  # the watch on its lines is gone with the program

    thread = threading.Thread(target=warm, daemon=True)
    thread.start()
    time.sleep(0.2)
    assert thread.is_alive()
    stop.set()
    thread.join(5)
    assert not thread.is_alive() and ended == [None]


def test_a_finalizer_running_when_the_run_comes_is_not_interrupted(capsys):
    # Objects of another file, freed by the program's loop: their __del__ runs on the warming thread
    # all the time. Stopping inside one would print "Exception ignored" on the run's stderr.
    churn = ('ns = {}\nexec(compile("class Freed:\\n    def __del__(self):\\n        sum(range(50))\\n", '
             '"<elsewhere>", "exec"), ns)\nwhile True:\n    ns["Freed"]()\n')
    stop_while_it_runs(churn, after_s=0.2)
    assert capsys.readouterr().err == ""


def test_the_warm_program_prints_nothing_and_runs_jax(capsys):
    warmup.run_program(threading.Event(), "import jax.numpy as jnp\nprint('warm', jnp.ones(3).sum())\n")
    assert capsys.readouterr() == ("", "")


def test_the_warm_program_is_the_default_example_with_instant_sleeps(tmp_path):
    examples = Path(__file__).resolve().parents[2] / "frontend" / "src" / "examples"
    program = warmup.program_from_examples(examples)
    assert "jax.jit" in program and "time.sleep(" not in program
    assert len(program) == len((examples / "default.py").read_text(encoding="utf-8"))  # every column kept
    assert warmup.program_from_examples(tmp_path) == ""  # an installed worker ships no examples


def test_the_zygote_takes_the_warm_program_out_of_the_runs_environment(monkeypatch):
    monkeypatch.setenv(warmup.PROGRAM_VARIABLE, "print(1)")
    monkeypatch.setattr(warmup, "_program", [])
    warmup.take_program_from_environment()
    assert warmup.PROGRAM_VARIABLE not in os.environ and warmup._program == ["print(1)"]


def test_the_run_gets_pythons_own_switch_interval_back(monkeypatch):
    monkeypatch.setattr(warmup, "run_arrived", threading.Event())
    plain = sys.getswitchinterval()
    assert warmup._switch_often_while_warming()
    assert sys.getswitchinterval() == pytest.approx(warmup.WARMING_SWITCH_INTERVAL_S)
    warmup.end_warming(None)
    assert sys.getswitchinterval() == plain and warmup.run_arrived.is_set()
    assert not warmup._switch_often_while_warming()  # a warming thread that wakes after the run stays off
    assert sys.getswitchinterval() == plain


def _warm_namespaces() -> int:
    import gc

    # type(), not isinstance(): a dead weakref.proxy among the objects raises ReferenceError on isinstance.
    return sum(1 for o in gc.get_objects() if type(o) is dict and o.get("__name__") == "__jaxplay_warm__")


@pytest.mark.parametrize("stopped", [False, True], ids=["ran-to-the-end", "stopped-mid-way"])
def test_nothing_the_warm_program_made_outlives_it(stopped):
    # Its function holds the namespace as its globals: a cycle, which kept its arrays alive into the run.
    program = "import jax.numpy as jnp\ndef f(v):\n    return v + 1\nkept = f(jnp.arange(5.0))\nmore = kept * 2\n"
    before = {id(a) for a in jax.live_arrays()}
    if stopped:
        stop_while_it_runs(program.replace("more = kept * 2", "while True:\n    more = kept * 2"), after_s=0.3)
    else:
        warmup.run_program(threading.Event(), program)
    assert [a for a in jax.live_arrays() if id(a) not in before] == []
    assert _warm_namespaces() == 0


def test_the_program_starts_only_once_warming_has_stopped(monkeypatch):
    # Warming beside the program showed in it (its compiles in the program's jax_log_compiles output,
    # its thread in threading.enumerate()): the run's thread waits for the warm program's current line.
    monkeypatch.setattr(warmup, "run_arrived", threading.Event())
    slow_lines = "while True:\n    total = sum(range(300_000))\n"
    thread = threading.Thread(target=warmup.run_program, args=(warmup.run_arrived, slow_lines), daemon=True)
    thread.start()
    time.sleep(0.2)
    warmup.end_warming(thread)
    assert not thread.is_alive()


def stop_while_it_runs(program: str, after_s: float) -> None:
    """Run the warm program on a thread, as a spare does, and stop it ``after_s`` in: it must end."""
    stop = threading.Event()
    thread = threading.Thread(target=warmup.run_program, args=(stop, program), daemon=True)
    thread.start()
    time.sleep(after_s)
    stop.set()
    thread.join(5)
    assert not thread.is_alive()
