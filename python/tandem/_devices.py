"""The machine's devices, found once a process, and TensorFlow's device names read once."""

from __future__ import annotations

import functools
from typing import Any, Dict, Tuple

from tandem import _native


@functools.cache
def physical_devices() -> Tuple[Tuple[str, Dict[str, Any]], ...]:
    """(device_type, details) per device, as Tandem's discovery finds them ("CPU", "GPU",
    "TPU"). Discovery loads the CUDA runtime and the PJRT plugins to ask them: done once."""
    return tuple((kind, dict(details)) for kind, details in _native.physical_devices())


def gpu_count() -> int:
    return sum(1 for kind, _ in physical_devices() if kind == "GPU")


def parse_device(name: str) -> Tuple[str, int]:
    """TensorFlow's device names ("/GPU:0", "gpu", "/device:CPU:0",
    "/job:localhost/replica:0/task:0/device:GPU:1") as (kind, index), kind "cpu", "gpu" or
    "tpu"; ValueError for anything else."""
    text = name.lower().split("device:")[-1].strip("/")
    kind, _, index = text.partition(":")
    if kind not in ("cpu", "gpu", "tpu") or not (index or "0").isdigit():
        raise ValueError(f"unknown device {name!r}; give /CPU:0 or /GPU:N")
    return kind, int(index or 0)
