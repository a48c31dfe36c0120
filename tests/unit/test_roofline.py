"""Roofline arithmetic, the peak a worker keeps per host, and the peak's checks in the worker's hello."""

from __future__ import annotations

import json

import pytest

from jaxplay import worker_protocol as wp
from jaxplay.sandbox.capture import roofline
from jaxplay.sandbox.capture.roofline import DevicePeak
from jaxplay.sandbox.engine import peak_cache

# A device of 100 GFLOP/s and 10 GB/s: its ridge is at 10 FLOP per byte.
PEAK = DevicePeak(flops_per_s=100e9, bytes_per_s=10e9)


def test_memory_bound_below_the_ridge():
    # 1 MFLOP over 1 MB (1 FLOP/byte) in 200 us: 5 GFLOP/s achieved, roof 1 * 10 GB/s = 10 GFLOP/s.
    result = roofline.figures(1e6, 1e6, 200e-6, PEAK)
    assert result["intensity"] == 1.0
    assert result["bound"] == "memory"
    assert result["roof_flops_per_s"] == pytest.approx(10e9)
    assert result["achieved_flops_per_s"] == pytest.approx(5e9)
    assert result["achieved_bytes_per_s"] == pytest.approx(5e9)
    assert result["fraction_of_roof"] == pytest.approx(0.5)


def test_compute_bound_above_the_ridge():
    # 2 GFLOP over 10 MB (200 FLOP/byte) in 40 ms: 50 GFLOP/s of the 100 GFLOP/s roof.
    result = roofline.figures(2e9, 10e6, 40e-3, PEAK)
    assert result["bound"] == "compute"
    assert result["roof_flops_per_s"] == pytest.approx(100e9)
    assert result["fraction_of_roof"] == pytest.approx(0.5)
    assert PEAK.ridge == pytest.approx(10.0)
    assert roofline.figures(10e6, 1e6, 1.0, PEAK)["bound"] == "compute"  # exactly at the ridge


def test_a_pure_copy_is_measured_against_the_bandwidth():
    result = roofline.figures(0.0, 8e6, 1e-3, PEAK)  # 8 MB moved in 1 ms: 8 GB/s of 10
    assert result["bound"] == "memory" and result["intensity"] == 0.0
    assert result["fraction_of_roof"] == pytest.approx(0.8)


def test_what_cannot_be_known_is_null():
    assert roofline.figures(1e6, 1e6, None, PEAK)["fraction_of_roof"] is None  # never ran after compiling
    assert roofline.figures(1e6, 0.0, 1e-3, PEAK)["intensity"] is None  # no bytes reported
    unroofed = roofline.figures(1e6, 1e6, 1e-3, None)
    assert unroofed["bound"] is None and unroofed["achieved_flops_per_s"] == pytest.approx(1e9)
    assert peak_cache.checked({"flops_per_s": -1, "bytes_per_s": 1}) is None
    assert peak_cache.checked({"flops_per_s": float("inf"), "bytes_per_s": 1}) is None
    assert peak_cache.checked(None) is None


def test_collector_event_joins_cost_and_time_by_compilation():
    collector = roofline.RooflineCollector()
    collector.hook({"key": "1.1", "fn_id": 1, "fn": "f", "line": 3, "compile_index": 1,
                    "cost": {"flops": 1e6, "bytes accessed": 1e6}}, None)
    collector.hook({"key": "1.2", "fn_id": 1, "fn": "f", "line": 3, "compile_index": 2, "cost": None}, None)
    event = collector.event({"1.1": (5, 200e-6)}, DevicePeak(flops_per_s=100e9, bytes_per_s=10e9, how="test"))
    assert event["type"] == "roofline" and event["peak"] == {"flops_per_s": 100e9, "bytes_per_s": 10e9, "how": "test"}
    first, second = event["functions"]
    assert (first["timed_calls"], first["median_ms"], first["bound"]) == (5, 0.2, "memory")
    assert first["fraction_of_roof"] == pytest.approx(0.5)
    assert (second["timed_calls"], second["flops"], second["fraction_of_roof"]) == (0, None, None)
    assert roofline.RooflineCollector().event({}, None) is None


def test_peak_cache_keeps_a_checked_peak_per_host_and_devices(tmp_path):
    cache = peak_cache.PeakCache(tmp_path)
    cpu = {"backend": "cpu", "device_kind": "cpu", "device_count": 8, "jax_version": "0.10.2"}
    assert cache.load(cpu) is None
    cache.save(cpu, DevicePeak(flops_per_s=5e10, bytes_per_s=1e10, how="matmul and copy"))
    assert cache.load(cpu) == DevicePeak(flops_per_s=5e10, bytes_per_s=1e10, how="matmul and copy")
    assert cache.load({**cpu, "device_count": 4}) is None  # another device count measures again
    cache.path(cpu).write_text(json.dumps({"flops_per_s": "fast", "bytes_per_s": 1}))
    assert cache.load(cpu) is None
    assert peak_cache.checked({"flops_per_s": 1, "bytes_per_s": 1, "extra": "dropped"}) == DevicePeak(1.0, 1.0)


def _hello(**peak) -> str:
    hello = wp.WorkerHello(token="", name="w", backend="cpu", device_kind="cpu", device_count=8,
                           jax_version="0.10.2", jaxlib_version="0.10.2", slots=1)
    return json.dumps({**json.loads(wp.encode(hello)), "device_peak": peak})


@pytest.mark.attack("forged worker hello")
def test_hello_refuses_a_peak_that_is_not_two_positive_rates_and_short_text():
    assert wp.decode(_hello(flops_per_s=1e11, bytes_per_s=1e10, how="x")).device_peak.how == "x"
    assert wp.decode(_hello()).device_peak is None  # {} on the wire: a worker that measured none
    for bad in ({"flops_per_s": -1, "bytes_per_s": 1}, {"flops_per_s": True, "bytes_per_s": 1},
                {"flops_per_s": 1, "bytes_per_s": 1, "script": "<x>"},
                {"flops_per_s": 1, "bytes_per_s": 1, "how": "x" * 5000}, {"flops_per_s": 1}):
        with pytest.raises(ValueError):
            wp.decode(_hello(**bad))
