"""TensorFlow's dtypes (``tf.float32``, ...) for the element types Tandem has."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from tandem._unsupported import module_getattr


class DType:
    """An element type, named as TensorFlow and numpy name it."""

    def __init__(self, name: str, numpy_dtype: Any) -> None:
        self._name = name
        self._numpy = np.dtype(numpy_dtype)

    @property
    def name(self) -> str:
        return self._name

    @property
    def as_numpy_dtype(self) -> type:
        return self._numpy.type

    @property
    def is_floating(self) -> bool:
        return self._name in ("float16", "bfloat16", "float32", "float64")

    @property
    def is_integer(self) -> bool:
        return self._name in ("int8", "uint8", "int32", "int64")

    @property
    def is_bool(self) -> bool:
        return self._name == "bool"

    @property
    def size(self) -> int:
        return self._numpy.itemsize

    def __eq__(self, other: object) -> bool:
        try:
            return as_dtype(other).name == self._name  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return False

    def __hash__(self) -> int:
        return hash(self._name)

    def __repr__(self) -> str:
        return f"tf.{self._name}"


float16 = DType("float16", np.float16)
bfloat16 = DType("bfloat16", ml_dtypes.bfloat16)
float32 = DType("float32", np.float32)
float64 = DType("float64", np.float64)
int8 = DType("int8", np.int8)
uint8 = DType("uint8", np.uint8)
int32 = DType("int32", np.int32)
int64 = DType("int64", np.int64)
bool = DType("bool", np.bool_)
# tf.string: a byte string, which Tandem holds as a rank-1 uint8 tensor (parse_single_example's
# feature type; no tensor has this dtype).
string = DType("string", np.object_)
half = float16
double = float64

_BY_NAME = {
    d.name: d for d in (float16, bfloat16, float32, float64, int8, uint8, int32, int64, bool)
}
_ALIASES = {"float": float32, "int": int32, "half": float16, "double": float64}


def as_dtype(value: Any) -> DType:
    """The DType of a DType, a name ("float32"), a numpy dtype or a Python type."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    if isinstance(value, str) and value == "string":
        return string
    if isinstance(value, str) and value in _ALIASES:
        return _ALIASES[value]
    try:
        numpy_dtype = np.dtype(value)
    except TypeError:
        raise TypeError(f"cannot convert {value!r} to a dtype") from None
    if numpy_dtype == np.dtype(ml_dtypes.bfloat16):
        return bfloat16
    if numpy_dtype.name in _BY_NAME:
        return _BY_NAME[numpy_dtype.name]
    raise ValueError(f"Tandem has no {numpy_dtype.name} tensors; use one of {', '.join(_BY_NAME)}")


__getattr__ = module_getattr("tf.dtypes")
