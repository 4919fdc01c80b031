"""tf.test: whether a GPU is there to train on."""

from __future__ import annotations

from typing import Any

from tandem import _devices, _native
from tandem._unsupported import module_getattr


def is_gpu_available(cuda_only: bool = False, min_cuda_compute_capability: Any = None) -> bool:
    """Whether Tandem can train on a GPU here (of at least the given compute capability)."""
    for kind, details in _devices.physical_devices():
        if kind != "GPU":
            continue
        if min_cuda_compute_capability is None or tuple(details["compute_capability"]) >= tuple(
            min_cuda_compute_capability
        ):
            return True
    return False


def is_built_with_cuda() -> bool:
    return bool(_native.built_with_cuda())


def gpu_device_name() -> str:
    """ "/device:GPU:0" where a GPU is, else ""."""
    return "/device:GPU:0" if is_gpu_available() else ""


__getattr__ = module_getattr("tf.test")
