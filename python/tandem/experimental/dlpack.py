"""tf.experimental.dlpack: tensors shared with PyTorch, JAX, numpy, CuPy without copies."""

from __future__ import annotations

from typing import Any

from tandem import _native
from tandem._tensor import Tensor
from tandem._unsupported import module_getattr


def from_dlpack(array: Any) -> Tensor:
    """A tensor over the memory of ``array`` (anything with ``__dlpack__``): no copy.

    The tensor keeps ``array``'s memory alive; writes through either are seen by both.
    """
    return _native.tensor_over(array)


def to_dlpack(tensor: Tensor) -> Any:
    """A DLPack capsule of the tensor's memory (no copy), for consumers that take capsules."""
    return tensor.__dlpack__()


__getattr__ = module_getattr("tf.experimental.dlpack")
