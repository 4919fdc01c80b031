"""tf.keras.layers: the layers Tandem has, made from Keras' own arguments.

Each layer is made as Tandem reads a layer of a Keras model file (io::keras_layer): Keras'
argument names and defaults; an argument Tandem lacks is accepted at Keras' default and is an
InvalidArgumentError naming the layer and the argument otherwise.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

from tandem import _native
from tandem._tensor import Tensor, convert_to_tensor
from tandem._unsupported import missing, module_getattr

KerasTensor = _native.SymbolicTensor


def _policy_name(dtype: Any) -> str:
    """A layer's dtype argument (a Policy, a policy name, a dtype) as a policy name."""
    return str(getattr(dtype, "name", dtype))


def _json_value(value: Any) -> Any:
    if callable(value) and hasattr(value, "__name__"):
        return value.__name__  # activation=tf.nn.relu
    if isinstance(value, tuple):
        return list(value)
    return value


class WeightsOf:
    """The weights of a layer or a model (its ``_native``), as Keras lists them."""

    _native: Any

    @property
    def weights(self) -> List[Tensor]:
        return self._native.weights

    @property
    def trainable_weights(self) -> List[Tensor]:
        return self._native.trainable_weights

    @property
    def non_trainable_weights(self) -> List[Tensor]:
        return self._native.non_trainable_weights

    trainable_variables = trainable_weights
    variables = weights

    def get_weights(self) -> list:
        return [w.numpy().copy() for w in self.weights]


class Layer(WeightsOf):
    """A Keras layer Tandem has; the subclasses below are the ones that exist."""

    _class_name: str = ""
    _positional: Tuple[str, ...] = ()

    def __init__(
        self,
        *args: Any,
        name: Optional[str] = None,
        dtype: Any = None,
        trainable: bool = True,
        input_shape: Optional[Sequence[Optional[int]]] = None,
        input_dim: Optional[int] = None,
        **arguments: Any,
    ) -> None:
        if not self._class_name:
            missing(
                f"a subclass of tf.keras.layers.Layer ({type(self).__name__}, with its own call)"
            )
        if len(args) > len(self._positional):
            raise TypeError(
                f"{self._class_name} takes {len(self._positional)} positional arguments "
                f"({', '.join(self._positional) or 'none'}); pass the others by name"
            )
        config: Dict[str, Any] = dict(zip(self._positional, args))
        for key, value in arguments.items():
            if key in config:
                raise TypeError(f"{self._class_name} got argument {key!r} twice")
            config[key] = value
        config = {key: _json_value(value) for key, value in config.items()}
        config["trainable"] = bool(trainable)
        self._input_shape: Optional[Tuple[int, ...]] = None
        if input_shape is not None:
            self._input_shape = tuple(int(d) for d in input_shape)
        elif input_dim is not None:
            self._input_shape = (int(input_dim),)
        self._native = _native.keras_layer(
            self._class_name,
            name or "",
            json.dumps(config),
            f"tf.keras.layers.{self._class_name}" + (f" '{name}'" if name else ""),
        )
        # dtype="float32" is the layer's own policy whatever the global one (Keras: the logits
        # of a mixed-precision model); set on the made layer, as Keras' layer takes it.
        if dtype is not None:
            self._native.with_dtype_policy(_policy_name(dtype))

    @classmethod
    def _wrap(cls, native: Any) -> Layer:
        layer = cls.__new__(_LAYER_CLASSES.get(native.class_name, Layer))
        layer._native = native
        layer._input_shape = None
        return layer

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def trainable(self) -> bool:
        return self._native.trainable

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self._native.trainable = bool(value)

    @property
    def built(self) -> bool:
        return self._native.built

    def set_weights(self, weights: Sequence[Any]) -> None:
        self._native.set_weights([convert_to_tensor(w) for w in weights])

    def __call__(self, inputs: Any, training: Optional[bool] = None) -> Any:
        if isinstance(inputs, (list, tuple)):
            if inputs and all(isinstance(x, KerasTensor) for x in inputs):
                return self._native.call_symbolic(list(inputs))
            missing(f"calling {self._class_name} on a list of tensors eagerly")
        if isinstance(inputs, KerasTensor):
            return self._native.call_symbolic([inputs])
        return self._native.call_tensor(convert_to_tensor(inputs), bool(training))

    def __repr__(self) -> str:
        return f"<tandem.keras.layers.{self._class_name} name={self.name!r}>"


def _layer(class_name: str, positional: Tuple[str, ...] = ()) -> type:
    return type(
        class_name,
        (Layer,),
        {
            "_class_name": class_name,
            "_positional": positional,
            "__doc__": f"tf.keras.layers.{class_name}.",
        },
    )


Dense = _layer("Dense", ("units", "activation"))
Conv2D = _layer("Conv2D", ("filters", "kernel_size", "strides", "padding"))
MaxPooling2D = _layer("MaxPooling2D", ("pool_size", "strides", "padding"))
AveragePooling2D = _layer("AveragePooling2D", ("pool_size", "strides", "padding"))
GlobalAveragePooling2D = _layer("GlobalAveragePooling2D")
GlobalAveragePooling1D = _layer("GlobalAveragePooling1D")
Flatten = _layer("Flatten")
Dropout = _layer("Dropout", ("rate", "noise_shape", "seed"))
BatchNormalization = _layer("BatchNormalization", ("axis", "momentum", "epsilon"))
LayerNormalization = _layer("LayerNormalization", ("axis", "epsilon"))
Activation = _layer("Activation", ("activation",))
ReLU = _layer("ReLU")
Softmax = _layer("Softmax", ("axis",))
Embedding = _layer("Embedding", ("input_dim", "output_dim"))
Add = _layer("Add")
MaxPool2D = MaxPooling2D
AvgPool2D = AveragePooling2D
GlobalAvgPool2D = GlobalAveragePooling2D

_LAYER_CLASSES: Dict[str, type] = {
    cls._class_name: cls
    for cls in (
        Dense,
        Conv2D,
        MaxPooling2D,
        AveragePooling2D,
        GlobalAveragePooling2D,
        GlobalAveragePooling1D,
        Flatten,
        Dropout,
        BatchNormalization,
        LayerNormalization,
        Activation,
        ReLU,
        Softmax,
        Embedding,
        Add,
    )
}


def Input(
    shape: Optional[Sequence[Optional[int]]] = None,
    batch_size: Optional[int] = None,
    name: Optional[str] = None,
    dtype: Any = None,
    **unsupported: Any,
) -> Any:
    """tf.keras.Input: the symbolic input of a functional model, ``shape`` without the batch."""
    if unsupported:
        missing(f"tf.keras.Input({', '.join(unsupported)}=...)")
    if shape is None or any(d is None for d in shape):
        raise ValueError(
            f"Input: Tandem needs every dimension of shape={shape!r} (the batch aside); give "
            "the sizes, e.g. shape=(28, 28, 1)"
        )
    dtype_name = "float32" if dtype is None else getattr(dtype, "name", str(dtype))
    return _native.Input([int(d) for d in shape], dtype_name, name or "")


def add(inputs: Sequence[Any], **kwargs: Any) -> Any:
    """tf.keras.layers.add: the functional form of Add."""
    return Add(**kwargs)(inputs)


__getattr__ = module_getattr("tf.keras.layers")
