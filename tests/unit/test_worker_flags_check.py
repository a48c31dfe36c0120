"""The worker checks a job's flags again before any sandbox sees them: a job whose flags are off the allow-list,
or unknown to the XLA of the runtime it names, is finished as rejected, naming the flag."""

from __future__ import annotations

import asyncio
import json

from jaxplay import worker_protocol as wp
from jaxplay.run_flags import FlagSetting, RunFlags, validate
from jaxplay.sandbox.agent import WorkerAgent
from jaxplay.settings import Settings


def agent() -> WorkerAgent:
    worker = WorkerAgent(Settings.from_env(), "ws://127.0.0.1:1/worker", "token", "flags-check")
    worker.description = {"backend": "cpu", "jax_version": "0.10.2", "jaxlib_version": "0.10.2"}
    worker.default_runtime = "0.10.2"
    worker.runtime_entries = [wp.WorkerRuntime("0.10.2", "0.10.2", "0.10.2", True, {}, None),
                              wp.WorkerRuntime("0.4.38", "0.4.38", "0.4.38", False, {}, None)]
    return worker


def finished(worker: WorkerAgent, job: wp.ServerJob) -> dict:
    worker.pools = {"0.10.2": object(), "0.4.38": object()}  # type: ignore[dict-item] - refused before any is used
    outbox: asyncio.Queue[str] = asyncio.Queue()
    asyncio.run(worker.execute(job, outbox))
    return json.loads(outbox.get_nowait())


def test_a_job_with_flags_off_the_list_or_unknown_to_its_runtime_is_rejected_by_name() -> None:
    worker = agent()
    smuggled = RunFlags(xla=(FlagSetting("xla_dump_to", "/tmp/x"),))
    reply = finished(worker, wp.ServerJob("r1", "1", 5.0, wp.JobOptions(flags=smuggled)))
    assert reply["type"] == "finished" and reply["status"] == "rejected" and "xla_dump_to" in reply["message"]
    xnnpack = validate({"xla": {"xla_cpu_use_xnnpack": False}})
    reply = finished(worker, wp.ServerJob("r2", "1", 5.0, wp.JobOptions(flags=xnnpack), runtime="0.4.38"))
    assert reply["status"] == "rejected" and "not known to the XLA of JAX 0.4.38" in reply["message"]
    gpu_only = validate({"xla": {"xla_gpu_autotune_level": 0}})
    assert "acts only on gpu" in (worker.flags_refusal(wp.ServerJob("r3", "1", 5.0, wp.JobOptions(flags=gpu_only)))
                                  or "")
    assert worker.flags_refusal(wp.ServerJob("r4", "1", 5.0, wp.JobOptions(flags=xnnpack))) is None
    assert worker.flags_refusal(wp.ServerJob("r5", "1", 5.0)) is None
