"""The run's typed path (jaxplay/worker_protocol.py): every field typed, every wire unchanged, every step whole.

The JSON literals below are what the code before the typed messages wrote for the same messages: a
worker, a server or a replica of either version reads the other's frames, and the result cache keeps
its keys.
"""

from __future__ import annotations

import dataclasses
import json
import typing

import pytest

from jaxplay import run_events
from jaxplay import worker_protocol as wp
from jaxplay.sandbox.engine import zygote_protocol as zp
from jaxplay.sandbox.output.event_channel import RUN_EVENT_BUDGETS
from jaxplay.server.runs import broker_jobs, result_cache
from jaxplay.server.runs.broker_keys import hello_of, public_hello
from jaxplay.server.runs.result_cache import cache_key
from jaxplay.server.runs.run import Run

OLD_JOB = ('{"run_id":"r1","code":"print(1)","timeout_s":5.0,"options":{"inspect":true,"profile":true,'
           '"compile_cache":"abababababababababababababababab"},"runtime":"0.4.38","type":"job"}')
OLD_PASSES_JOB = ('{"run_id":"r2","code":"x","timeout_s":30.0,"options":{"inspect":true,"passes":{"key":"1.1",'
                  '"fn":"f"}},"runtime":"","type":"job"}')
OLD_HELLO = ('{"token":"t","name":"w","backend":"cpu","device_kind":"cpu","device_count":8,"jax_version":"0.10.2",'
             '"jaxlib_version":"0.10.2","slots":2,"platform_version":"p","device_memory_bytes":0,'
             '"libraries":{"optax":"0.2.8"},"device_peak":{"flops_per_s":50000000000.0,"bytes_per_s":10000000000.0,'
             '"how":"matmul","measured_at":"2026-11-24T00:00:00Z","device_kind":"cpu"},"runtimes":[{"name":"0.10.2",'
             '"jax_version":"0.10.2","jaxlib_version":"0.10.2","default":true,"libraries":{},"problem":null},'
             '{"name":"0.4.38","jax_version":"0.4.38","jaxlib_version":"0.4.38","default":false,'
             '"libraries":{"flax":"0.10.2"},"problem":null}],"protocol":1,"type":"hello"}')
OLD_BARE_HELLO = ('{"token":"t","name":"w","backend":"cpu","device_kind":"cpu","device_count":8,'
                  '"jax_version":"0.10.2","jaxlib_version":"0.10.2","slots":2,"platform_version":"","device_memory_bytes":0,'
                  '"libraries":{},"device_peak":{},"runtimes":[],"protocol":1,"type":"hello"}')
OLD_BROKER_JOB = ('{"key":"k1","origin":"o1","code":"print(1)","backend":"cpu","timeout_s":30.0,"options":{"inspect":true,'
                  '"profile":true},"session_id":"s","network":"n","runtime":"0.4.38","deadline":1800000000.0}')
ENV = {"device_kind": "cpu", "device_count": 8, "runtime": "0.10.2", "jax_version": "0.10.2",
       "jaxlib_version": "0.10.2", "platform_version": "p"}


def _types_in(hint: object) -> typing.Iterator[object]:
    yield hint
    for arg in typing.get_args(hint):
        yield from _types_in(arg)


def test_no_field_of_the_run_or_a_worker_message_is_left_untyped():
    """No ``dict[str, Any]`` (nor any ``Any``) crosses the worker boundary: every field says what it holds."""
    checked = [cls for cls in vars(wp).values() if dataclasses.is_dataclass(cls) and cls.__module__ == wp.__name__]
    assert {wp.WorkerHello, wp.ServerJob, wp.WorkerEvent, wp.RunRequest, wp.SandboxRun} <= set(checked)
    for cls in checked:
        for name, hint in typing.get_type_hints(cls).items():
            assert typing.Any not in set(_types_in(hint)), f"{cls.__name__}.{name} is {hint}"
    assert typing.get_type_hints(wp.WorkerEvent)["event"] == run_events.RunEvent
    for kind in typing.get_args(run_events.RunEvent):
        assert typing.is_typeddict(kind)
        assert typing.Any not in {t for hint in typing.get_type_hints(kind).values() for t in _types_in(hint)}


def test_the_wire_of_a_job_and_a_hello_is_what_it_was():
    job = wp.ServerJob(run_id="r1", code="print(1)", timeout_s=5.0,
                       options=wp.JobOptions.of(wp.RunOptions(profile=True), "ab" * 16), runtime="0.4.38")
    passes = wp.ServerJob(run_id="r2", code="x", timeout_s=30.0,
                          options=wp.JobOptions(passes=wp.PassesTarget(key="1.1", fn="f")))
    peak = wp.DevicePeak(5e10, 1e10, how="matmul", measured_at="2026-11-24T00:00:00Z", device_kind="cpu")
    runtimes = (wp.WorkerRuntime("0.10.2", "0.10.2", "0.10.2", True, {}, None),
                wp.WorkerRuntime("0.4.38", "0.4.38", "0.4.38", False, {"flax": "0.10.2"}, None))
    hello = wp.WorkerHello(token="t", name="w", backend="cpu", device_kind="cpu", device_count=8, jax_version="0.10.2",
                           jaxlib_version="0.10.2", slots=2, platform_version="p", libraries={"optax": "0.2.8"},
                           device_peak=peak, runtimes=runtimes)
    bare = wp.WorkerHello(token="t", name="w", backend="cpu", device_kind="cpu", device_count=8, jax_version="0.10.2",
                          jaxlib_version="0.10.2", slots=2)
    for message, old in ((job, OLD_JOB), (passes, OLD_PASSES_JOB), (hello, OLD_HELLO), (bare, OLD_BARE_HELLO)):
        assert wp.encode(message) == old
        assert wp.decode(old) == message


def test_every_message_comes_back_whole():
    messages = [
        wp.ServerWelcome(), wp.ServerRefused(message="wrong token"), wp.ServerCancel(run_id="r"),
        wp.WorkerEvent(run_id="r", event={"type": "compiled", "key": "1.1", "cost": {"flops": 2.0, "x": None}}),
        wp.WorkerFinished(run_id="r", status="ok", elapsed_ms=1.5, message="m", read_session_cache=True),
        wp.WorkerSlots(busy=1, total=2, oom_kills=3, crashes=4),
        wp.ServerJob(run_id="r", code="c", timeout_s=1, options=wp.JobOptions(inspect=False)),
    ]
    for message in messages:
        assert wp.decode(wp.encode(message)) == message


@pytest.mark.parametrize("frame", [
    {"type": "job", "run_id": "r", "code": "", "timeout_s": 1, "options": {"inspect": 1}},
    {"type": "job", "run_id": "r", "code": "", "timeout_s": 1, "options": {"inspect": True, "device_peak": {}}},
    {"type": "job", "run_id": "r", "code": "", "timeout_s": 1, "options": {"passes": {"key": "1.1"}}},
    {"type": "job", "run_id": "r", "code": "", "timeout_s": 1, "options": []},
    {"type": "job", "run_id": "r", "code": "", "timeout_s": True},
    {"type": "event", "run_id": "r", "event": {"type": "done", "status": "ok"}},
    {"type": "event", "run_id": "r", "event": {"text": "no type"}},
    {"type": "event", "run_id": "r", "event": ["stdout"]},
    {"type": "hello", "token": "t", "name": "w", "backend": "cpu", "device_kind": "cpu", "device_count": 1,
     "jax_version": "0", "jaxlib_version": "0", "slots": 1, "runtimes": [{"name": "0.4.38"}]},
    {"type": "hello", "token": "t", "name": "w", "backend": "cpu", "device_kind": "cpu", "device_count": 1,
     "jax_version": "0", "jaxlib_version": "0", "slots": 1, "libraries": {"optax": 1}},
])
@pytest.mark.attack("malformed input")
def test_a_frame_whose_nested_fields_are_wrong_is_refused_naming_the_field(frame):
    with pytest.raises(ValueError, match="field|event|lacks"):
        wp.decode(json.dumps(frame))


def test_the_result_cache_keys_are_what_they_were(monkeypatch):
    """The key hashes the options' JSON, as before they were typed. Format v4 (text under a measured name is
    compared since) changes every key and nothing else: under v3's name the keys are v3's, so entries kept
    before answer no one, on purpose, and the options' JSON is unchanged."""
    assert cache_key("print(1)", "cpu", ENV, wp.RunOptions()) == \
        "51f525ee419d4f74b7e8254085eeba5c7891d23b15541e7a63dd374e28360122"
    assert cache_key("print(1)", "cpu", ENV, wp.RunOptions(inspect=False, profile=True), "s" * 32) == \
        "2a137eb1a3ca19b55acc2bde05f668d156d78f74e9447ed89dadc385665cbe57"
    monkeypatch.setattr(result_cache, "KEY_FORMAT", "jaxplay-result-v3")
    assert cache_key("print(1)", "cpu", ENV, wp.RunOptions()) == \
        "93f2365c078417f632444d1d6a1c28f5a05e8187a05b2d97622a8e4b9ca5fbbe"
    assert cache_key("print(1)", "cpu", ENV, wp.RunOptions(inspect=False, profile=True), "s" * 32) == \
        "d406bce01828d2249190b6b26b58d04595a231ca0e909e524a31453de320e2b9"


def test_a_broker_job_keeps_its_json_and_checks_it():
    request = wp.RunRequest(code="print(1)", backend="cpu", timeout_s=30.0, options=wp.RunOptions(profile=True),
                            runtime="0.4.38", fresh=True)
    run = Run(client_id="c1", request=request, emit=lambda e: None, session_id="s", network="n", key="k1")
    assert broker_jobs.job_payload(run, "o1", 1800000000.0) == OLD_BROKER_JOB  # fresh stays with the origin
    taken = broker_jobs.job_run(broker_jobs.read_job(OLD_BROKER_JOB), lambda e: None)
    assert (taken.key, taken.request, taken.session_id, taken.network) == (
        "k1", dataclasses.replace(request, fresh=False), "s", "n")
    for bad in ({"timeout_s": "soon"}, {"options": {"inspect": "yes"}}, {"runtime": None}):
        with pytest.raises(ValueError):
            broker_jobs.job_run(broker_jobs.read_job(json.dumps({**json.loads(OLD_BROKER_JOB), **bad})), print)


def test_a_hello_shared_between_replicas_is_checked_like_one_from_a_worker():
    hello = wp.decode(OLD_HELLO)
    assert hello_of(json.loads(json.dumps(public_hello(hello)))) == dataclasses.replace(hello, token="")
    with pytest.raises(ValueError):
        hello_of({**public_hello(hello), "slots": 0})


def test_a_sandbox_run_crosses_the_spares_door_whole():
    run = wp.SandboxRun(options=wp.JobOptions(inspect=True, profile=True, passes=wp.PassesTarget("2.1", "update"),
                                              compile_cache="c" * 32),
                        compile_cache_read=True, memory_limit_bytes=4 << 30, memory_rlimit=True, limit_processes=True,
                        artifact_limit_bytes=4096, device_peak=wp.DevicePeak(1e11, 1e10, how="matmul"))
    assert zp.run_of(json.loads(json.dumps(zp.run_message(run)))) == run
    assert zp.run_of(zp.run_message(wp.SandboxRun(probe=True, calibrate=True))).calibrate
    with pytest.raises(ValueError):
        zp.run_of({"type": "run", "run": {"cpu_devices": 8}})  # a field nothing reads is no field at all


def test_the_workers_gate_admits_exactly_the_kinds_the_server_accepts():
    """A kind the gate passed and the server refused would end the worker's connection and its runs."""
    from_a_run = set(RUN_EVENT_BUDGETS) - {"probe"}  # the probe is the worker's own run, never sent on
    assert from_a_run == set(run_events.BY_TYPE) - run_events.WORKER_MADE


def test_a_request_says_what_it_is_for():
    plain = wp.RunRequest(code="", backend="cpu", timeout_s=1)
    passes = dataclasses.replace(plain, options=wp.RunOptions(passes=wp.PassesTarget("1.1", "f")))
    assert (plain.kind, passes.kind) == ("run", "passes")
