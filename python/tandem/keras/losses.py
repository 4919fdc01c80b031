"""tf.keras.losses: the losses Tandem has, by class or by Keras name."""

from __future__ import annotations

from typing import Any

from tandem import _native
from tandem._tensor import Tensor, convert_to_tensor
from tandem._unsupported import missing, module_getattr


class Loss:
    """A loss Tandem computes: ``loss(y_true, y_pred)`` is the batch mean."""

    def __init__(self, native: Any) -> None:
        self._native = native

    @property
    def name(self) -> str:
        return self._native.name

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Tensor:
        if sample_weight is not None:
            missing("a loss's sample_weight")
        return _native.loss_value(
            self._native, convert_to_tensor(y_true), convert_to_tensor(y_pred)
        )


def _reduction(name: str, reduction: str) -> None:
    if reduction not in ("auto", "sum_over_batch_size"):
        missing(f"tf.keras.losses.{name}(reduction={reduction!r})")


def SparseCategoricalCrossentropy(
    from_logits: bool = False,
    ignore_class: Any = None,
    reduction: str = "auto",
    name: str = "sparse_categorical_crossentropy",
) -> Loss:
    if ignore_class is not None:
        missing("tf.keras.losses.SparseCategoricalCrossentropy(ignore_class=...)")
    _reduction("SparseCategoricalCrossentropy", reduction)
    return Loss(_native.loss_from_name("sparse_categorical_crossentropy", bool(from_logits)))


def CategoricalCrossentropy(
    from_logits: bool = False,
    label_smoothing: float = 0.0,
    axis: int = -1,
    reduction: str = "auto",
    name: str = "categorical_crossentropy",
) -> Loss:
    if label_smoothing != 0.0 or axis != -1:
        missing("tf.keras.losses.CategoricalCrossentropy(label_smoothing=/axis=)")
    _reduction("CategoricalCrossentropy", reduction)
    return Loss(_native.loss_from_name("categorical_crossentropy", bool(from_logits)))


def MeanSquaredError(reduction: str = "auto", name: str = "mean_squared_error") -> Loss:
    _reduction("MeanSquaredError", reduction)
    return Loss(_native.loss_from_name("mean_squared_error", False))


def get(identifier: Any) -> Loss:
    """A loss by Keras name ("sparse_categorical_crossentropy", "mse", ...) or as given."""
    if isinstance(identifier, Loss):
        return identifier
    if isinstance(identifier, str):
        return Loss(_native.loss_from_name(identifier, False))
    missing(f"a loss given as {type(identifier).__name__} (a Python loss function)")


__getattr__ = module_getattr("tf.keras.losses")
