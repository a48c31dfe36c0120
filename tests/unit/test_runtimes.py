"""JAX runtimes without a sandbox: the pins, what a worker offers, the protocol's checks, the server's choice."""

from __future__ import annotations

import fcntl
import json
import sys
from pathlib import Path

import pytest

from jaxplay import browser_protocol as bp
from jaxplay import worker_protocol as wp
from jaxplay.sandbox.learning import api_versions
from jaxplay.sandbox.runtimes import pins, store
from jaxplay.server.runs import runtimes
from jaxplay.server.runs.result_cache import cache_key, environment
from jaxplay.server.sharing.snippets import SnippetContent, SnippetError, parse_content
from jaxplay.settings import Settings


def runtime(name: str, default: bool = False, problem: str | None = None) -> dict:
    return {"name": name, "jax_version": name, "jaxlib_version": name, "default": default, "libraries": {},
            "problem": problem}


def hello(*entries: dict) -> wp.WorkerHello:
    return wp.WorkerHello(token="", name="w", backend="cpu", device_kind="cpu", device_count=8, jax_version="0.10.2",
                          jaxlib_version="0.10.2", slots=2, runtimes=tuple(wp.WorkerRuntime(**e) for e in entries))


def test_each_line_pins_jax_and_jaxlib_exactly_and_every_library():
    assert pins.requirements("0.4.38")[:2] == ["jax==0.4.38", "jaxlib==0.4.38"]
    assert "flax==0.10.2" in pins.requirements("0.4.38")
    assert pins.requirements("0.10.2", {"optax": "0.2.8"}) == ["jax==0.10.2", "jaxlib==0.10.2", "optax==0.2.8"]
    for bad in ("0.3.25", "latest", "0.4"):
        with pytest.raises(ValueError):
            pins.requirements(bad)


def test_the_projects_own_worker_libs_are_the_pins_of_its_jax_line_on_each_python():
    """pyproject.toml's worker-libs: JAX 0.10's libraries on Python 3.11 (pip cannot give it newer JAX),
    and on 3.12+, where pip gives JAX 0.12, exactly the 0.12 line's (flax 0.12.8 fails to import there)."""
    from jaxplay.sandbox.runtimes import install

    old, new = install.newest_pins((3, 11)), install.newest_pins((3, 13))
    assert old["flax"] == "0.12.8" and all("==" not in v and ";" not in v for v in old.values())
    assert new == {name: pins.LINES["0.12"].libraries[name] for name in new} and new["flax"] == "0.12.12"
    assert set(old) == set(new) and install.newest_pins((3, 12)) == new


def installed_runtime(runtimes_dir: Path, version: str) -> Path:
    """A runtime folder as an install leaves it: its record, and bin/python (here: this interpreter)."""
    folder = runtimes_dir / f"jax-{version}"
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").symlink_to(sys.executable)
    (folder / store.RECORD).write_text(json.dumps({"jax_version": version}))
    return folder


def test_a_worker_offers_listed_runtimes_each_ready_missing_or_failed(tmp_path):
    installed_runtime(tmp_path, "0.4.38")
    store.failure_file(tmp_path, "0.6.2").write_text(json.dumps({"message": "pip install failed: no wheel"}))
    offered = store.offered(Settings(runtimes="0.4.38,0.6.2,0.7.2,x", runtimes_dir=tmp_path))
    assert [(r.name, r.problem is None) for r in offered] == [("0.4.38", True), ("0.6.2", False), ("0.7.2", False),
                                                             ("x", False)]
    assert "no wheel" in offered[1].problem and "jaxplay runtimes add 0.7.2" in offered[2].problem
    assert [r.name for r in store.offered(Settings(runtimes="all", runtimes_dir=tmp_path))] == ["0.4.38"]


def test_a_half_made_install_or_one_whose_python_is_gone_is_never_offered_and_says_why(tmp_path):
    (tmp_path / "jax-0.11.2.part" / "bin").mkdir(parents=True)  # an install cut short: no record, no lock held
    (tmp_path / "jax-0.12.0.1.part").mkdir()
    gone = installed_runtime(tmp_path, "0.6.2")
    (gone / "bin" / "python").unlink()
    (gone / "bin" / "python").symlink_to(tmp_path / "uninstalled-python3.13")
    settings = Settings(runtimes="0.11.2,0.12.0.1,0.6.2", runtimes_dir=tmp_path)
    with open(store.lock_file(tmp_path, "0.12.0.1"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as install.add holds it while pip runs
        problems = {r.name: r.problem for r in store.offered(settings)}
    assert "did not finish" in problems["0.11.2"] and "jaxplay runtimes add 0.11.2" in problems["0.11.2"]
    assert "being installed now" in problems["0.12.0.1"]
    assert "uninstalled-python3.13" in problems["0.6.2"] and "is gone" in problems["0.6.2"]
    assert "did not finish" in store.missing_reason(tmp_path, "0.12.0.1")  # the lock is free again
    assert store.installed_versions(tmp_path) == ["0.6.2"]  # listed (jaxplay runtimes list), never offered


def test_a_run_that_names_no_runtime_gets_the_newest_offered_unless_the_setting_says_otherwise():
    from jaxplay.sandbox.agent_runtimes import default_of

    pools = dict.fromkeys(["0.10.2", "0.4.38", "0.12.0.1", "0.6.2"])  # what works here, the worker's own first
    assert default_of("newest", "0.10.2", pools) == "0.12.0.1"  # 0.12 > 0.10 > 0.6, numerically
    assert default_of("own", "0.10.2", pools) == "0.10.2"
    assert default_of("0.4.38", "0.10.2", pools) == "0.4.38"
    assert default_of("0.11.2", "0.10.2", pools) == "0.12.0.1"  # not offered here: the newest, with a warning
    assert default_of("newest", "0.10.2", {"0.10.2": None}) == "0.10.2"


def test_a_hello_with_malformed_runtimes_is_refused():
    good = hello(runtime("0.10.2", True), runtime("0.4.38"))
    assert wp.decode(wp.encode(good)).runtimes == good.runtimes
    for bad in ([{"name": "0.4.38"}], [runtime("x" * 41)], [runtime("0.4.38") | {"default": "yes"}],
                [runtime(str(i)) for i in range(65)]):
        with pytest.raises(ValueError):
            wp.decode(json.dumps({**json.loads(wp.encode(good)), "runtimes": bad}))


def test_the_server_resolves_a_runtime_or_refuses_naming_the_offered_ones():
    hellos = [hello(runtime("0.10.2", True), runtime("0.4.38"), runtime("0.5.3", problem="its install failed"))]
    assert runtimes.resolve(hellos, "cpu", None) == ""
    assert runtimes.resolve(hellos, "cpu", "0.4.38") == "0.4.38"
    for wanted, why in (("0.5.3", "its install failed"), ("0.9.9", "not offered")):
        with pytest.raises(bp.ProtocolError) as refused:
            runtimes.resolve(hellos, "cpu", wanted)
        assert why in str(refused.value) and "0.10.2 (default), 0.4.38" in str(refused.value)
    listed = runtimes.describe(h for h in hellos)
    assert [r["name"] for r in listed] == ["0.10.2", "0.5.3", "0.4.38"] and listed[1]["problem"]
    with pytest.raises(bp.ProtocolError):
        bp.parse_client_message(json.dumps({"type": "run", "id": "a", "code": "", "runtime": "../x"}),
                                max_code_bytes=100)


def test_the_result_cache_key_includes_the_runtime():
    worker = hello(runtime("0.10.2", True), runtime("0.4.38"))
    default, old = environment(worker, ""), environment(worker, "0.4.38")
    assert default["runtime"] == "0.10.2" and old["runtime"] == "0.4.38" and old["jax_version"] == "0.4.38"
    options = wp.RunOptions()
    assert cache_key("print(1)", "cpu", default, options) != cache_key("print(1)", "cpu", old, options)
    assert environment(worker, "0.10.2") == default  # naming the default is the same run as naming none


def test_a_snippet_records_its_runtime_and_old_content_keeps_its_id():
    content = parse_content(b'{"code": "x", "runtime": "0.4.38"}', Settings())
    assert content.runtime == "0.4.38" and content.fields()["runtime"] == "0.4.38"
    plain = SnippetContent("x", None, {}, None, None, None)
    assert "runtime" not in plain.fields() and plain.content_hash() != content.content_hash()
    with pytest.raises(SnippetError, match="runtime"):
        parse_content(b'{"code": "x", "runtime": "<script>"}', Settings())


def test_missing_jax_names_carry_the_versions_that_have_them():
    assert api_versions.missing_api("AttributeError", "jax.tree_map was removed in JAX v0.6.0: use jax.tree.map") \
        == ("jax.tree_map", {"removed_in": "0.6.0"})
    assert api_versions.missing_api("AttributeError", "module 'jax' has no attribute 'typeof'") \
        == ("jax.typeof", {"added_in": "0.6.2"})
    assert api_versions.missing_api("ImportError", "cannot import name 'shard_map' from 'jax' (x)") \
        == ("jax.shard_map", {"added_in": "0.6.2"})
    assert api_versions.missing_api("AttributeError", "jax.device_put_replicated is deprecated; use jax.device_put") \
        == ("jax.device_put_replicated", {})
    assert api_versions.missing_api("TypeError", "module 'jax' has no attribute 'typeof'") is None


def test_a_run_queued_before_any_worker_for_a_runtime_none_offers_is_rejected_when_they_join():
    import asyncio

    from jaxplay.server.runs.scheduler import Run, Scheduler, WorkerLink

    async def scenario() -> list[dict]:
        scheduler = Scheduler(Settings(local_workers=0, expected_backends="cpu"))
        sent: list[dict] = []
        waiting = Run(client_id="a", request=wp.RunRequest(code="print(1)", backend="cpu", timeout_s=5,
                                                           runtime="0.5.3"), emit=sent.append)
        fine = Run(client_id="b", request=wp.RunRequest(code="print(1)", backend="cpu", timeout_s=5), emit=sent.append)
        scheduler.submit(waiting)
        scheduler.submit(fine)

        async def no_send(text: str) -> None:
            return None

        scheduler.add_worker(WorkerLink(hello=hello(runtime("0.10.2", True), runtime("0.4.38")), send=no_send))
        await asyncio.sleep(0)
        return sent

    sent = asyncio.run(scenario())
    done = next(e for e in sent if e["type"] == "done")
    assert done["id"] == "a" and done["status"] == "rejected" and "0.4.38" in done["message"]
    assert any(e["type"] == "started" and e["id"] == "b" for e in sent)


def test_a_run_waits_briefly_for_the_seat_where_its_runtime_is_warm_before_starting_another():
    import asyncio

    from jaxplay.sandbox.engine.runtime_pool import Seats

    async def scenario() -> list[int]:
        seats, warm = Seats(2), {0}
        taken = [await seats.take(lambda s: s in warm)]  # the warm seat
        waiting = asyncio.create_task(seats.take(lambda s: s in warm))
        await asyncio.sleep(0.1)
        assert not waiting.done()  # seat 1 is free, yet it waits for the warm seat 0...
        seats.give(0)
        taken.append(await waiting)  # ...and gets it when it frees
        taken.append(await seats.take(lambda s: s in warm))  # busy too long: the free seat after all
        return taken

    assert asyncio.run(scenario()) == [0, 0, 1]


def test_runs_one_after_another_keep_to_the_seat_given_back_last_while_its_spare_is_ready():
    import asyncio

    from jaxplay.sandbox.engine.runtime_pool import Seats

    async def scenario() -> list[int]:
        seats, ready = Seats(3), {0, 1, 2}
        taken = []
        for _ in range(3):  # back-to-back: each run gives its seat back just before the next comes
            seat = await seats.take(lambda s: True, lambda s: s in ready)
            taken.append(seat)
            seats.give(seat)
        ready.discard(0)  # its new spare is not offered yet: the seat idle longest
        taken.append(await seats.take(lambda s: True, lambda s: s in ready))
        seats.give(taken[-1])
        ready.clear()  # none offered: the seat idle longest
        taken.append(await seats.take(lambda s: True, lambda s: s in ready))
        return taken

    # Taking the seat idle longest, back-to-back runs went round the seats (0, 1, 2, ...): each met a spare
    # idle long enough to be warming, and waited for it.
    assert asyncio.run(scenario()) == [0, 0, 0, 1, 2]


def test_a_run_that_comes_later_takes_the_seat_idle_longest_not_the_one_given_back_last():
    import asyncio

    from jaxplay.sandbox.engine import warmup
    from jaxplay.sandbox.engine.runtime_pool import Seats

    async def scenario() -> list[int]:
        seats = Seats(2)
        taken = []
        for _ in range(3):  # as a person presses Run: the seat given back last may be warming its spare now
            seat = await seats.take(lambda s: True, lambda s: True)
            taken.append(seat)
            seats.give(seat)
            await asyncio.sleep(warmup.IDLE_BEFORE_WARMING_S + 0.02)
        return taken

    assert asyncio.run(scenario()) == [0, 1, 0]
