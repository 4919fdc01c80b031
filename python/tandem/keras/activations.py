"""tf.keras.activations: the functions Keras 2.15 names, computed by Tandem's layers' own
activations (one definition, tandem/nn.h), and `get` by name."""

from __future__ import annotations

from typing import Callable, Union

from tandem import _native
from tandem._tensor import Tensor, TensorLike, convert_to_tensor
from tandem._unsupported import module_getattr

__all__ = [
    "elu",
    "exponential",
    "gelu",
    "get",
    "hard_sigmoid",
    "linear",
    "mish",
    "relu",
    "selu",
    "sigmoid",
    "softmax",
    "softplus",
    "softsign",
    "swish",
    "tanh",
]


def _named(name: str) -> Callable[[TensorLike], Tensor]:
    def activation(x: TensorLike) -> Tensor:
        return _native.ops.activation(name, convert_to_tensor(x))

    activation.__name__ = name
    activation.__qualname__ = name
    activation.__doc__ = f"Keras' {name!r} activation."
    return activation


elu = _named("elu")
exponential = _named("exponential")
gelu = _named("gelu")
hard_sigmoid = _named("hard_sigmoid")
linear = _named("linear")
mish = _named("mish")
relu = _named("relu")
selu = _named("selu")
sigmoid = _named("sigmoid")
softmax = _named("softmax")
softplus = _named("softplus")
softsign = _named("softsign")
swish = _named("swish")
tanh = _named("tanh")


def get(identifier: Union[str, Callable[[TensorLike], Tensor], None]) -> Callable:
    """The activation named `identifier` (Keras' names, "silu" and TensorFlow's "relu6" and
    "leaky_relu" too); a callable is returned as it is, None is linear."""
    if identifier is None:
        return linear
    if callable(identifier):
        return identifier
    # Checks the name now, with the known ones listed, rather than at the first call.
    _native.ops.activation(str(identifier), convert_to_tensor([0.0]))
    return globals().get(str(identifier)) or _named(str(identifier))


__getattr__ = module_getattr("tf.keras.activations")
