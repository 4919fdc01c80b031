"""tf.nn: activations and softmax over Tandem's ops."""

from __future__ import annotations

from typing import Optional

from tandem import _native
from tandem._tensor import Tensor, TensorLike, convert_to_tensor
from tandem._unsupported import module_getattr
from tandem.math import sigmoid, tanh

__all__ = ["relu", "gelu", "sigmoid", "tanh", "softmax", "log_softmax"]


def relu(features: TensorLike, name: Optional[str] = None) -> Tensor:
    return _native.ops.relu(convert_to_tensor(features))


def gelu(features: TensorLike, approximate: bool = False, name: Optional[str] = None) -> Tensor:
    return _native.ops.gelu(convert_to_tensor(features), approximate)


def softmax(logits: TensorLike, axis: Optional[int] = None, name: Optional[str] = None) -> Tensor:
    return _native.ops.softmax(convert_to_tensor(logits), -1 if axis is None else int(axis))


def log_softmax(
    logits: TensorLike, axis: Optional[int] = None, name: Optional[str] = None
) -> Tensor:
    return _native.ops.log_softmax(convert_to_tensor(logits), -1 if axis is None else int(axis))


__getattr__ = module_getattr("tf.nn")
