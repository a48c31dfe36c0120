"""The device peak a worker measured, kept per host so that only the first worker start pays for it.

Lives beside the compile caches (``--compile-cache-dir``), in a folder of its
own that no sandbox sees: ``device-peaks/<fingerprint>.json``. The
fingerprint names what the figures depend on: the backend, the device kind
and count, the JAX and jaxlib versions, the host and its processor. Another
machine, an upgrade or a different device count measures again.

Only the worker (trusted code) writes here, from its own probe; a run's
events never reach this file.

``HostPeak`` holds the peak once the worker has it: one per worker, shared by
its warm sandboxes, each of which gives it to every run it starts (its
rooflines' roofs, ``SandboxRun.device_peak``); the hello reports it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import platform
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jaxplay import worker_protocol as wp

log = logging.getLogger("jaxplay.worker")

FOLDER = "device-peaks"
FORMAT = 2  # 2: each figure kept with when it was measured and how busy the host was (peak_keeping.py)
TEXT_FIELDS = ("how", "measured_at", "device_kind")
MAX_TEXT_CHARS = 1000


def _processor() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor()


def fingerprint(description: dict[str, Any]) -> str:
    """What a measurement is valid for (the probe's description of the devices, and this host)."""
    parts = [str(FORMAT), socket.gethostname(), _processor(), str(os.cpu_count())]
    parts += [str(description.get(name, "")) for name in
              ("backend", "device_kind", "device_count", "jax_version", "jaxlib_version", "platform_version")]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]


def checked(raw: Any) -> wp.DevicePeak | None:
    """A peak as the probe reported it, or None when it is not two positive finite rates (texts cut short)."""
    if not isinstance(raw, dict):
        return None
    rates: list[float] = []
    for name in ("flops_per_s", "bytes_per_s"):
        value = raw.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            return None
        rates.append(float(value))
    texts = {name: raw[name][:MAX_TEXT_CHARS] for name in TEXT_FIELDS if isinstance(raw.get(name), str)}
    return wp.DevicePeak(*rates, **texts)


@dataclass
class HostPeak:
    """This host's device peak, once the worker has it (None until then, or when it could not be measured)."""
    peak: wp.DevicePeak | None = None


class PeakCache:
    def __init__(self, root: Path) -> None:
        self.folder = root.expanduser() / FOLDER

    def path(self, description: dict[str, Any]) -> Path:
        return self.folder / f"{fingerprint(description)}.json"

    def load(self, description: dict[str, Any]) -> wp.DevicePeak | None:
        record = self.load_record(description)
        return checked(record) if record is not None else None

    def load_record(self, description: dict[str, Any]) -> dict[str, Any] | None:
        """The whole record kept: the peak's fields, and when and how busy each figure was measured."""
        try:
            raw = json.loads(self.path(description).read_text())
        except (OSError, ValueError):
            return None
        peak = checked(raw)
        if peak is None:
            return None
        kept: dict[str, Any] = wp.to_wire(peak)
        for name, value in raw.items():
            if name.endswith(("_at", "_busy")) and isinstance(value, int | float) and not isinstance(value, bool) \
                    and math.isfinite(value):
                kept[name] = float(value)
        kept["provisional"] = raw.get("provisional") is True
        return kept

    def save(self, description: dict[str, Any], peak: wp.DevicePeak | dict[str, Any]) -> None:
        """Keep ``peak``: a peak, or a whole record (``load_record``)."""
        path = self.path(description)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            staging = path.with_suffix(f".{os.getpid()}.tmp")
            staging.write_text(json.dumps(peak if isinstance(peak, dict) else wp.to_wire(peak)))
            staging.replace(path)  # two workers starting at once: one of the two whole files wins
        except OSError as exc:
            log.warning("could not keep the measured device peak in %s: %s", self.folder, exc)
