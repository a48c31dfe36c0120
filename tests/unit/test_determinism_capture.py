"""The nondeterminism capture: which reads of the clock and of OS randomness make a run uncacheable.

Programs run in this process as the runner runs them (compiled as
``<playground>``, registered in linecache), without JAX: a JAX backend started
in the test process would make every later fork of it unsafe. One test runs the
real runner, with JAX (in a fork of a process that imported it, tests/runner_harness.py),
to see the capture installed among the others and JAX's own timers ignored.
"""

from __future__ import annotations

import linecache
import os
import sys
import textwrap
import time
import timeit  # before any install, as in the zygote (its matplotlib imports timeit)

import pytest

from jaxplay import worker_protocol as wp
from jaxplay.sandbox.capture import determinism
from jaxplay.sandbox.output import events
from tests import runner_harness


@pytest.fixture
def run(monkeypatch):
    """``run(code)`` -> the (source, line) pairs reported while ``code`` ran."""
    sent: list[dict] = []
    monkeypatch.setattr(events, "emit", sent.append)

    def execute(code: str) -> list[tuple[str, int]]:
        sent.clear()
        code = textwrap.dedent(code)
        linecache.cache["<playground>"] = (len(code), None, code.splitlines(True), "<playground>")
        determinism.install(wp.SandboxRun())
        try:
            exec(compile(code, "<playground>", "exec"), {"__name__": "__main__"})
        finally:
            determinism.uninstall()
        assert all(e["type"] == "nondeterministic" and e["kind"] in ("time", "randomness") for e in sent)
        return [(e["source"], e["line"]) for e in sent]

    yield execute
    linecache.cache.pop("<playground>", None)


def sources(reported: list[tuple[str, int]]) -> set[str]:
    return {source for source, _ in reported}


def test_deterministic_programs_report_nothing(run):
    assert run("""
        import random, time, logging, tempfile
        import numpy as np
        np.random.seed(1); np.random.rand(2); np.random.randint(0, 9)
        np.random.default_rng(7).random(); np.random.Generator(np.random.PCG64(3)).random()
        random.seed(5); random.random(); random.choice([1, 2]); random.Random(9).random()
        logging.getLogger("x").warning("a log record carries a timestamp")
        tempfile.NamedTemporaryFile().close()              # random file names are plumbing
        time.localtime(0); time.strftime("%Y", time.gmtime(0))
    """) == []


@pytest.mark.parametrize(("code", "source"), [
    ("import time\nt = time.time()", "time.time"),
    ("import time\nt = time.perf_counter_ns()", "time.perf_counter_ns"),
    ("import time\ntime.sleep(0.001)", "time.sleep"),
    ("import time\ntime.localtime()", "time.localtime"),
    ("import time\ntime.strftime('%H')", "time.strftime"),
    ("from time import monotonic\nmonotonic()", "time.monotonic"),
    ("import datetime\ndatetime.datetime.now()", "datetime.datetime.now()"),
    ("from datetime import date\ndate.today()", "date.today()"),
    ("import uuid\nuuid.uuid1()", "uuid.uuid1"),
    ("import os\nos.times()", "os.times"),
    ("from datetime import datetime\ndatetime.now()", "datetime.now()"),
    ("import timeit\ntimeit.timeit('1 + 1', number=10)", "timeit"),
    ("import timeit\ntimeit.repeat('1 + 1', number=10, repeat=2)", "timeit"),
    ("from timeit import Timer\nTimer('1 + 1').autorange()", "timeit"),
    ("import timeit\ntimeit.default_timer()", "timeit"),
    ("import os\nos.urandom(4)", "os.urandom"),
    ("import uuid\nuuid.uuid4()", "os.urandom"),
    ("import secrets\nsecrets.token_hex(4)", "random.SystemRandom"),
    ("import random\nrandom.random()", "random.random"),
    ("import random\nrandom.seed()", "random.seed()"),
    ("import random\nrandom.Random().random()", "random.Random()"),
    ("import numpy as np\nnp.random.rand(3)", "numpy.random.rand"),
    ("from numpy.random import normal\nnormal()", "numpy.random.normal"),
    ("import numpy as np\nnp.random.default_rng().random()", "numpy.random (seeded from the OS)"),
    ("import numpy as np\nnp.random.RandomState().rand()", "numpy.random (seeded from the OS)"),
    ("open('/dev/urandom', 'rb').close()", "open('/dev/urandom')"),
])
def test_each_source_is_reported_with_the_programs_line(run, code, source):
    reported = run(code)
    assert source in sources(reported)
    assert all(line == 2 for _, line in reported) or code.startswith("open")


def test_seeding_after_drawing_does_not_undo_the_draw_and_seed_none_is_not_a_seed(run):
    assert sources(run("import random\nrandom.random()\nrandom.seed(1)\nrandom.random()")) == {"random.random"}
    assert sources(run("import numpy as np\nnp.random.seed(None)\nnp.random.rand()")) >= {"numpy.random.seed()"}
    assert run("import numpy as np\nnp.random.set_state(np.random.get_state())\nnp.random.rand()") == []


def test_legacy_random_state_with_a_seed_is_reported_as_numpy_seeds_it_from_the_os_first(run):
    # RandomState(seed) builds an OS-seeded MT19937 in C before applying the seed: indistinguishable
    # from RandomState() here, so it counts (the safe direction); default_rng(seed) does not.
    assert sources(run("import numpy as np\nnp.random.RandomState(3).rand()")) == {
        "numpy.random (seeded from the OS)"}


def test_each_source_is_reported_once_at_its_first_line(run):
    assert run("""
        import time
        for _ in range(1000):
            time.perf_counter()
        time.perf_counter()
    """) == [("time.perf_counter", 4)]


def test_a_library_reading_for_the_program_counts_but_jax_and_plumbing_do_not(run):
    def module_function(name: str):
        namespace = {"__name__": name}
        exec(compile("import time\ndef read():\n    return time.time()\n", f"/site-packages/{name}.py", "exec"),
             namespace)
        return namespace["read"]

    sys.modules["fake_progress_bar"] = type(sys)("fake_progress_bar")
    sys.modules["fake_progress_bar"].read = module_function("fake_progress_bar")
    sys.modules["jax_fake_internal"] = type(sys)("jax_fake_internal")
    sys.modules["jax_fake_internal"].read = module_function("jax._src.fake")
    try:
        assert run("import jax_fake_internal\njax_fake_internal.read()") == []
        assert run("import fake_progress_bar\n\nfake_progress_bar.read()") == [("time.time", 3)]
    finally:
        del sys.modules["fake_progress_bar"], sys.modules["jax_fake_internal"]


def test_timeit_imported_before_the_clock_was_wrapped_still_counts(run):
    # As in the zygote: matplotlib imports timeit, binding time.perf_counter, long before a run.
    assert timeit.default_timer is time.perf_counter
    assert run("import timeit\nt = timeit.Timer('x = 1')\nt.timeit(5)") == [("timeit", 3)]
    assert timeit.default_timer is time.perf_counter
    assert timeit.Timer.__init__.__defaults__[2] is time.perf_counter


def test_uninstall_restores_the_original_functions():
    import random
    import time

    import numpy as np

    originals = (time.time, time.sleep, os.urandom, random.random, random.Random.seed, np.random.rand)
    determinism.install(wp.SandboxRun())
    assert time.time is not originals[0] and np.random.rand is not originals[5]
    determinism.uninstall()
    assert (time.time, time.sleep, os.urandom, random.random, random.Random.seed, np.random.rand) == originals


def test_installed_among_the_captures_of_a_real_runner(tmp_path):
    ran = runner_harness.run_program(textwrap.dedent("""\
        import time, jax, jax.numpy as jnp
        f = jax.jit(lambda x: jnp.sin(x) + 1)  # JAX times its own tracing and compiling: not the program's
        print(f(jnp.zeros(2)), jax.random.normal(jax.random.key(0), (2,)).shape)
        start = time.perf_counter()
        print('took', time.perf_counter() - start > 0)
    """), tmp_path / "run", timeout=60)
    assert ran.status == 0, ran.stderr
    assert ran.stdout == "[1. 1.] (2,)\ntook True\n"
    reported = [e for e in ran.events if e["type"] == "nondeterministic"]
    assert reported == [{"type": "nondeterministic", "kind": "time", "source": "time.perf_counter", "line": 4}]
