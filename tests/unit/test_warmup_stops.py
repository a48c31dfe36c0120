"""A spare's warming gives way to the run: it stops between operations once the run has come."""

from __future__ import annotations

import threading

import jax

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
