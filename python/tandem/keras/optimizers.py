"""tf.keras.optimizers: Adam and SGD with Keras' arguments and update rules."""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional, Tuple

from tandem import _native
from tandem._tensor import Tensor
from tandem._unsupported import missing, module_getattr
from tandem.keras import schedules


class Optimizer:
    """An optimizer Tandem runs; ``learning_rate`` reads and sets the rate of the next update."""

    def __init__(self, native: Any) -> None:
        self._native = native

    @property
    def learning_rate(self) -> float:
        return float(self._native.learning_rate)

    @learning_rate.setter
    def learning_rate(self, value: float) -> None:
        self._native.learning_rate = float(value)

    lr = learning_rate

    @property
    def iterations(self) -> int:
        return int(self._native.iterations)

    @property
    def name(self) -> str:
        return self._native.name

    def apply_gradients(
        self, grads_and_vars: Iterable[Tuple[Optional[Tensor], Tensor]], **unsupported: Any
    ) -> None:
        """Keras' apply_gradients(zip(grads, vars)); a None gradient leaves its variable alone."""
        if unsupported:
            missing(f"tf.keras.optimizers.Optimizer.apply_gradients({', '.join(unsupported)}=...)")
        pairs = list(grads_and_vars)
        gradients = [g if g is not None else _native.Tensor() for g, _ in pairs]
        self._native.apply_gradients(gradients, [v for _, v in pairs])


def _rate(name: str, learning_rate: Any) -> Any:
    """A learning rate as the native optimizers take it: a number or a Tandem schedule."""
    if isinstance(learning_rate, schedules.LearningRateSchedule):
        return learning_rate._native
    if not isinstance(learning_rate, (int, float)):
        missing(f"tf.keras.optimizers.{name} with a {type(learning_rate).__name__} learning rate")
    return float(learning_rate)


# Keras' base optimizer arguments, at their defaults: Tandem runs each optimizer as Keras does
# with these (jit_compile and the name change nothing in what it computes).
_BASE_DEFAULTS = {
    "weight_decay": None,
    "clipnorm": None,
    "clipvalue": None,
    "global_clipnorm": None,
    "use_ema": False,
    "ema_momentum": 0.99,
    "ema_overwrite_frequency": None,
    "jit_compile": True,
    "name": None,
}


def _check_base(optimizer: str, arguments: Dict[str, Any]) -> None:
    unknown = [key for key in arguments if key not in _BASE_DEFAULTS]
    if unknown:
        missing(f"tf.keras.optimizers.{optimizer}({', '.join(unknown)}=...)")
    for key, value in arguments.items():
        if key not in ("jit_compile", "name") and value != _BASE_DEFAULTS[key]:
            missing(f"tf.keras.optimizers.{optimizer}({key}={value!r})")


def Adam(
    learning_rate: Any = 0.001,
    beta_1: float = 0.9,
    beta_2: float = 0.999,
    epsilon: float = 1e-07,
    amsgrad: bool = False,
    **base: Any,
) -> Optimizer:
    if amsgrad:
        missing("tf.keras.optimizers.Adam(amsgrad=True)")
    _check_base("Adam", base)
    return Optimizer(
        _native.Adam(_rate("Adam", learning_rate), float(beta_1), float(beta_2), float(epsilon))
    )


def SGD(
    learning_rate: Any = 0.01, momentum: float = 0.0, nesterov: bool = False, **base: Any
) -> Optimizer:
    _check_base("SGD", base)
    return Optimizer(_native.SGD(_rate("SGD", learning_rate), float(momentum), bool(nesterov)))


def get(identifier: Any) -> Optimizer:
    """An optimizer by Keras name ("adam", "sgd") or as given."""
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, str):
        by_name = {"adam": Adam, "sgd": SGD}
        if identifier.lower() in by_name:
            return by_name[identifier.lower()]()
        missing(f"the optimizer {identifier!r} (tf.keras.optimizers.get)")
    missing(f"an optimizer of type {type(identifier).__name__}")


__getattr__ = module_getattr("tf.keras.optimizers")
