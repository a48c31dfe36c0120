"""What a GPU host tells a person, decided on CPU with the real texts seen on an H100 host."""

from __future__ import annotations

import pytest

from jaxplay import host_devices
from jaxplay.sandbox.isolation import gpu
from jaxplay.sandbox.learning import oom_message
from jaxplay.settings import Settings

# Seen on an H100 host (jax 0.11.2, CUDA 13 plugin) and on hosts whose driver JAX could not use.
XLA_GPU_OOM = ("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 200.02GiB with allocator GPU_0_bfc on "
               "device 0. [tf-allocator-allocation-error='']")
XLA_BYTES_OOM = "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 214748364800 bytes."
NUMPY_OOM = "Unable to allocate 8.00 GiB for an array with shape (1073741824,) and data type float64"
CUINIT = ("INTERNAL: no supported devices found for platform CUDA: cuInit(0) failed: "
          "CUDA_ERROR_NO_DEVICE: unable to load the CUDA libraries\nmore detail")


def test_the_asked_size_is_read_in_every_unit_xla_and_numpy_write():
    assert oom_message.asked_bytes(XLA_GPU_OOM) == int(200.02 * 2**30)
    assert oom_message.asked_bytes(XLA_BYTES_OOM) == 214748364800
    assert oom_message.asked_bytes(NUMPY_OOM) == 8 * 2**30
    assert oom_message.asked_bytes("no size here") is None


def test_gpu_oom_names_the_gpu_and_its_size(monkeypatch):
    monkeypatch.setattr(oom_message, "device_limit_bytes", lambda: ("gpu", int(71.3 * 2**30)))
    text = oom_message.out_of_memory_text(XLA_GPU_OOM, "16 GiB")
    assert text.startswith("Out of GPU memory: this run asked for 200 GiB; the slot has 71.3 GiB.")


def test_host_memory_on_a_gpu_worker_is_not_called_gpu_memory(monkeypatch):
    monkeypatch.setattr(oom_message, "device_limit_bytes", lambda: ("gpu", 80 << 30))
    text = oom_message.out_of_memory_text(NUMPY_OOM, "16 GiB")
    assert "GPU" not in text and "limit of 16 GiB" in text and "8 GiB of the host's memory" in text
    assert oom_message.is_out_of_memory(MemoryError(NUMPY_OOM), NUMPY_OOM)
    assert not oom_message.is_device_oom(NUMPY_OOM) and oom_message.is_device_oom(XLA_GPU_OOM)


def test_a_missing_cuda_plugin_is_named_as_such():
    cause = gpu.backend_failure_cause("cuda", {}, ["xla_tpu"], "Unknown backend cuda")
    assert "no CUDA plugin" in cause and "jax[cuda13]" in cause


def test_a_plugin_that_failed_names_its_own_error_not_unknown_backend():
    cause = gpu.backend_failure_cause("cuda", {"cuda": CUINIT}, ["xla_cuda13"], "Unknown backend cuda")
    assert cause == ("cuda: INTERNAL: no supported devices found for platform CUDA: cuInit(0) failed: "
                     "CUDA_ERROR_NO_DEVICE: unable to load the CUDA libraries")
    assert "Unknown backend" not in cause


def test_without_a_recorded_cause_the_error_asked_is_shown():
    assert gpu.backend_failure_cause("cuda", {}, ["xla_cuda12"], "Unknown backend cuda") == "cuda: Unknown backend cuda"


@pytest.mark.parametrize(("visible", "slots"), [
    (None, [("nvidia0",), ("nvidia1",), ("nvidia2",)]),
    ("1", [("nvidia1",)]),
    ("0,2", [("nvidia0",), ("nvidia2",)]),
    ("", [(), ()]),  # every GPU hidden: a CPU worker with --slots sandboxes
    ("GPU-6f09f9b0-a7db,MIG-1", [("nvidia0", "nvidia1", "nvidia2")]),
])
def test_an_operators_cuda_visible_devices_is_honoured(tmp_path, visible, slots):
    for name in ("nvidia0", "nvidia1", "nvidia2", "nvidiactl"):
        (tmp_path / name).touch()
    environ = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    found = gpu.slot_devices(Settings(slots=2), tmp_path, environ)
    assert [tuple(p.rsplit("/", 1)[1] for p in s) for s in found] == slots


def test_uuids_are_passed_on_to_the_sandbox_as_the_operator_wrote_them():
    env = gpu.gpu_environment(("/dev/nvidia0", "/dev/nvidia1"), Settings(), {"CUDA_VISIBLE_DEVICES": "GPU-6f09f9b0"})
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-6f09f9b0"
    assert gpu.gpu_environment(("/dev/nvidia1",), Settings(), {"CUDA_VISIBLE_DEVICES": "1"})["CUDA_VISIBLE_DEVICES"] == "1"


@pytest.mark.parametrize(("nodes", "environ", "backend"), [
    ((), {}, "cpu"),
    (("nvidia0", "nvidiactl"), {}, "gpu"),
    (("nvidia0",), {"CUDA_VISIBLE_DEVICES": ""}, "cpu"),
    (("nvidia0",), {"CUDA_VISIBLE_DEVICES": "GPU-6f09f9b0"}, "gpu"),
    (("accel0",), {}, "tpu"),
])
def test_the_server_knows_what_its_local_workers_will_offer_before_they_join(tmp_path, nodes, environ, backend):
    for name in nodes:
        (tmp_path / name).touch()
    assert host_devices.local_backend(tmp_path, environ) == backend
