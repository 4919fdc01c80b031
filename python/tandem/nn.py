"""tf.nn: activations and softmax over Tandem's ops."""

from __future__ import annotations

from typing import Optional

from tandem import _native
from tandem._tensor import Tensor, TensorLike, convert_to_tensor
from tandem._unsupported import missing, module_getattr
from tandem.math import sigmoid, tanh

__all__ = [
    "relu",
    "relu6",
    "gelu",
    "sigmoid",
    "tanh",
    "softmax",
    "log_softmax",
    "elu",
    "selu",
    "softplus",
    "softsign",
    "silu",
    "swish",
    "leaky_relu",
]


def relu(features: TensorLike, name: Optional[str] = None) -> Tensor:
    return _native.ops.relu(convert_to_tensor(features))


def _activation(name: str, features: TensorLike) -> Tensor:
    return _native.ops.activation(name, convert_to_tensor(features))


def relu6(features: TensorLike, name: Optional[str] = None) -> Tensor:
    return _activation("relu6", features)


def elu(features: TensorLike, name: Optional[str] = None) -> Tensor:
    return _activation("elu", features)


def selu(features: TensorLike, name: Optional[str] = None) -> Tensor:
    return _activation("selu", features)


def softplus(features: TensorLike, name: Optional[str] = None) -> Tensor:
    return _activation("softplus", features)


def softsign(features: TensorLike, name: Optional[str] = None) -> Tensor:
    return _activation("softsign", features)


def silu(features: TensorLike, beta: float = 1.0, name: Optional[str] = None) -> Tensor:
    if beta != 1.0:
        missing(f"tf.nn.silu with beta={beta} (Tandem's swish has beta 1)")
    return _activation("swish", features)


swish = silu


def leaky_relu(features: TensorLike, alpha: float = 0.2, name: Optional[str] = None) -> Tensor:
    if alpha != 0.2:
        missing(f"tf.nn.leaky_relu with alpha={alpha} (Tandem's has TensorFlow's default, 0.2)")
    return _activation("leaky_relu", features)


def gelu(features: TensorLike, approximate: bool = False, name: Optional[str] = None) -> Tensor:
    return _native.ops.gelu(convert_to_tensor(features), approximate)


def softmax(logits: TensorLike, axis: Optional[int] = None, name: Optional[str] = None) -> Tensor:
    return _native.ops.softmax(convert_to_tensor(logits), -1 if axis is None else int(axis))


def log_softmax(
    logits: TensorLike, axis: Optional[int] = None, name: Optional[str] = None
) -> Tensor:
    return _native.ops.log_softmax(convert_to_tensor(logits), -1 if axis is None else int(axis))


__getattr__ = module_getattr("tf.nn")
