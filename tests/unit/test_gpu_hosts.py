"""GPU and TPU hosts, decided on CPU: slot layout, device visibility, memory settings, no silent fallback."""

from __future__ import annotations

import pytest

from jaxplay.sandbox.isolation import bwrap, gpu
from jaxplay.settings import Settings


def _host(tmp_path, *names):
    for name in names:
        (tmp_path / name).touch()
    return tmp_path


def test_one_slot_per_gpu_each_seeing_only_its_own(tmp_path):
    dev = _host(tmp_path, "nvidia0", "nvidia1", "nvidia10", "nvidiactl", "nvidia-uvm", "nvidia-caps")
    assert [p.rsplit("/", 1)[1] for p in gpu.nvidia_gpus(dev)] == ["nvidia0", "nvidia1", "nvidia10"]
    slots = gpu.slot_devices(Settings(slots=2), dev)
    assert [len(s) for s in slots] == [1, 1, 1]
    args = bwrap.bwrap_args(["python"], {}, {}, ["/dev/nvidia1", "/dev/nvidiactl"])
    binds = [args[i + 1] for i, a in enumerate(args) if a == "--dev-bind"]
    assert binds == ["/dev/nvidia1", "/dev/nvidiactl"]
    assert args.index("--dev-bind") > args.index("--dev")  # on top of the minimal /dev, not hidden by it
    assert "--dev-bind" not in bwrap.bwrap_args(["python"], {}, {})


def test_one_slot_owning_every_gpu_when_asked(tmp_path):
    dev = _host(tmp_path, "nvidia0", "nvidia1")
    assert gpu.slot_devices(Settings(gpu_slots="all"), dev) == [(str(dev / "nvidia0"), str(dev / "nvidia1"))]
    env = gpu.gpu_environment(("/dev/nvidia0", "/dev/nvidia1"), Settings(gpu_memory_fraction=0.8))
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_runs_may_share_a_gpu_with_its_memory_split_between_them(tmp_path):
    dev = _host(tmp_path, "nvidia0", "nvidia1")
    shared = Settings(runs_per_gpu=3, gpu_memory_fraction=0.9)
    slots = gpu.slot_devices(shared, dev)
    assert slots == [(str(dev / "nvidia0"),)] * 3 + [(str(dev / "nvidia1"),)] * 3
    assert gpu.gpu_environment(("/dev/nvidia1",), shared)["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.3"
    assert gpu.slot_devices(Settings(runs_per_gpu=2, gpu_slots="all"), dev) == [slots[0] + slots[3]] * 2
    (tmp_path / "tpu").mkdir()
    tpu = _host(tmp_path / "tpu", "accel0")
    assert gpu.slot_devices(shared, tpu) == [(str(tpu / "accel0"),)]  # one process owns a TPU chip
    with pytest.raises(ValueError, match="--runs-per-gpu must be between 1 and 16; it is 0"):
        gpu.slot_devices(Settings(runs_per_gpu=0), dev)


def test_a_cpu_host_gets_its_configured_slots(tmp_path):
    assert gpu.slot_devices(Settings(slots=3), tmp_path) == [(), (), ()]


def test_tpu_chips_take_the_same_path(tmp_path):
    dev = _host(tmp_path, "accel0", "accel1")
    assert gpu.slot_devices(Settings(), dev) == [(str(dev / "accel0"),), (str(dev / "accel1"),)]
    assert gpu.gpu_environment(("/dev/accel1",), Settings()) == {"TPU_VISIBLE_CHIPS": "1"}


def test_gpu_memory_is_bounded_and_not_preallocated():
    """A spare's CUDA context must fit beside the running run's: no 75% preallocation."""
    env = gpu.gpu_environment(("/dev/nvidia3",), Settings(gpu_memory_fraction=0.85))
    assert env["CUDA_VISIBLE_DEVICES"] == "3"
    assert env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert env["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.85"
    assert gpu.gpu_environment((), Settings()) == {}


@pytest.mark.parametrize(("backend", "devices", "allow", "refused"), [
    ("cpu", ("/dev/nvidia0",), False, True),   # GPU nodes, CPU backend: the silent fallback of old
    ("cpu", ("/dev/nvidia0",), True, False),   # the operator asked for CPU-only on purpose
    ("gpu", ("/dev/nvidia0",), False, False),  # it really runs on the GPU
    ("cpu", (), False, False),                 # a CPU host
    ("cpu", ("/dev/accel0",), False, True),    # TPU nodes, CPU backend
])
def test_a_host_whose_accelerator_jax_cannot_use_refuses_to_start(backend, devices, allow, refused):
    probe = {"backend": backend, "backend_error": "cuInit(0) failed: CUDA_ERROR_OUT_OF_MEMORY" if refused else None}
    message = gpu.fallback_refusal(probe, devices, allow)
    assert (message is not None) == refused
    if message:
        assert "cuInit(0) failed" in message and "--allow-cpu-fallback" in message
