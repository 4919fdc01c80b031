"""tf.Tensor: Tandem's native tensor with TensorFlow's methods and operators.

The methods are set on the native class itself, so every tensor an op, a layer or a model returns
is a ``tandem.Tensor`` without a wrapper, and its memory is shared with numpy and DLPack users
without copies (``numpy()``, ``__array__``, ``__dlpack__``).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, Optional, Sequence, Union

import ml_dtypes
import numpy as np

from tandem import _devices, _native
from tandem import dtypes as _dtypes
from tandem._unsupported import missing

Tensor = _native.Tensor
TensorLike = Union[Tensor, np.ndarray, float, int, bool, Sequence[Any]]

# TensorFlow's conversions of Python values: floats become float32 and ints int32, while numpy
# arrays keep their dtype (float64 included).
_PYTHON_DEFAULTS = {np.dtype(np.float64): np.float32, np.dtype(np.int64): np.int32}


class TensorShape(tuple):
    """A tensor's shape: a tuple of ints, with TensorFlow's ``as_list`` and ``rank``."""

    def as_list(self) -> list:
        return list(self)

    @property
    def rank(self) -> int:
        return len(self)

    @property
    def ndims(self) -> int:
        return len(self)

    def num_elements(self) -> int:
        return int(np.prod(self, dtype=np.int64))

    def __repr__(self) -> str:
        return f"TensorShape({list(self)})"


def _to_numpy_array(value: Any, dtype: Optional[_dtypes.DType]) -> np.ndarray:
    if isinstance(value, _native.SymbolicTensor):
        raise TypeError(
            "a Keras symbolic tensor (a functional model's, or a subclassed model's while its "
            "call is traced) cannot go into TensorFlow ops in Tandem; use Keras layers on it"
        )
    array = np.asarray(value)
    python_value = not isinstance(value, (np.ndarray, np.generic))
    if python_value and dtype is None and array.dtype in _PYTHON_DEFAULTS:
        array = array.astype(_PYTHON_DEFAULTS[array.dtype])
    if dtype is not None:
        array = array.astype(dtype.as_numpy_dtype, copy=False)
    if array.dtype == np.dtype(object):
        raise ValueError(f"cannot make a tensor of {type(value).__name__} values: {value!r:.80}")
    return np.ascontiguousarray(array)


def _from_array(array: np.ndarray) -> Tensor:
    if array.dtype == np.dtype(ml_dtypes.bfloat16):
        return _native.tensor_copy(array.view(np.uint16), "bfloat16")
    _dtypes.as_dtype(array.dtype)  # an unsupported dtype is an error naming it
    return _native.tensor_copy(array)


_placement = threading.local()


def _placed(tensor: Tensor) -> Tensor:
    """The tensor on the device of the innermost ``with tf.device(...)``, if any."""
    target = getattr(_placement, "device", None)
    return tensor if target is None or target == tensor.device_name else tensor.to(target)


def _tandem_device(name: str) -> str:
    """TensorFlow's device names as Tandem's ("cuda:0", "cpu"); a GPU this machine lacks is the
    CPU (soft placement)."""
    kind, index = _devices.parse_device(name)
    if kind == "tpu":
        missing("tf.device('/TPU:N') (TPUs train through TPUStrategy)")
    return f"cuda:{index}" if kind == "gpu" and index < _devices.gpu_count() else "cpu"


@contextlib.contextmanager
def device(device_name: str) -> Iterator[None]:
    """tf.device: tensors made inside (constant, Variable, zeros, ones, fill, tf.random) are
    placed on the device, and ops run where their inputs are. A GPU the machine lacks falls back
    to the CPU, as TensorFlow's soft placement does."""
    previous = getattr(_placement, "device", None)
    _placement.device = _tandem_device(device_name)
    try:
        yield
    finally:
        _placement.device = previous


def constant(
    value: Any, dtype: Any = None, shape: Optional[Sequence[int]] = None, name: Optional[str] = None
) -> Tensor:
    """tf.constant: a tensor with a copy of ``value`` (numpy array, scalar, nested lists)."""
    target = None if dtype is None else _dtypes.as_dtype(dtype)
    if isinstance(value, Tensor):
        tensor = value if target is None or value.dtype == target else cast(value, target)
    else:
        array = _to_numpy_array(value, target)
        if shape is not None:
            shape = tuple(int(d) for d in shape)
            if array.size == 1:
                array = np.full(shape, array.reshape(()), dtype=array.dtype)
            elif array.size == int(np.prod(shape)):
                array = array.reshape(shape)
            else:
                raise TypeError(
                    f"constant: {array.size} values cannot have shape {shape}; give "
                    f"{int(np.prod(shape))} values or one"
                )
        tensor = _placed(_from_array(array))
    if name:
        tensor.set_name(name)
    return tensor


def convert_to_tensor(value: Any, dtype: Any = None, name: Optional[str] = None) -> Tensor:
    """tf.convert_to_tensor: a Tensor as it is (its dtype must match), anything else copied."""
    if isinstance(value, Tensor):
        if dtype is not None and value.dtype != _dtypes.as_dtype(dtype):
            raise ValueError(
                f"convert_to_tensor: the tensor is {value.dtype.name}, not "
                f"{_dtypes.as_dtype(dtype).name}; use tf.cast to convert it"
            )
        return value
    return constant(value, dtype=dtype, name=name)


def cast(x: TensorLike, dtype: Any) -> Tensor:
    tensor = convert_to_tensor(x)
    target = _dtypes.as_dtype(dtype)
    return tensor if tensor.dtype == target else _native.ops.cast(tensor, target.name)


def Variable(
    initial_value: Any, trainable: bool = True, name: Optional[str] = None, dtype: Any = None
) -> Tensor:
    """tf.Variable: a tensor of its own memory that GradientTape watches when trainable."""
    value = constant(initial_value, dtype=dtype)
    variable = value.clone() if isinstance(initial_value, Tensor) else value
    variable.set_variable(bool(trainable))
    if name:
        variable.set_name(name)
    return variable


def _operand(tensor: Tensor, other: Any) -> Tensor:
    """``other`` as a tensor to combine with ``tensor``: Python numbers take tensor's dtype."""
    if isinstance(other, Tensor):
        return other
    if isinstance(other, (int, float, bool)) and not isinstance(other, np.generic):
        return _native.ops.scalar_like(tensor, float(other))
    return constant(other, dtype=tensor.dtype)


def _binary(op: Any, reflected: bool = False) -> Any:
    def method(self: Tensor, other: Any) -> Tensor:
        operand = _operand(self, other)
        return op(operand, self) if reflected else op(self, operand)

    return method


def _tf_device_name(name: str) -> str:
    """Tandem's device ("cpu", "cuda:1") as TensorFlow names it."""
    kind, _, index = name.partition(":")
    tf_kind = {"cpu": "CPU", "cuda": "GPU"}.get(kind, kind.upper())
    return f"/job:localhost/replica:0/task:0/device:{tf_kind}:{index or 0}"


def _numpy(self: Tensor) -> np.ndarray:
    """The tensor's memory as a numpy array, shared (no copy) for a host tensor."""
    host = self if self.device_name == "cpu" else self.to("cpu")
    view = host.numpy_view()
    return view.view(ml_dtypes.bfloat16) if self.dtype_name == "bfloat16" else view


def _array(self: Tensor, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray:
    array = _numpy(self)
    if dtype is not None:
        array = array.astype(dtype, copy=bool(copy))
    elif copy:
        array = array.copy()
    return array


def _dlpack(
    self: Tensor,
    *,
    stream: Any = None,
    max_version: Any = None,
    dl_device: Any = None,
    copy: Optional[bool] = None,
) -> Any:
    if copy:
        return self.clone().dlpack_view().__dlpack__(stream=stream)
    return self.dlpack_view().__dlpack__(stream=stream)


def _repr(self: Tensor) -> str:
    if self.device_name != "cpu":
        return (
            f"<tf.Tensor: shape={tuple(self.shape)}, dtype={self.dtype.name}, device={self.device}>"
        )
    values = np.array2string(_numpy(self), separator=", ", threshold=100)
    return f"<tf.Tensor: shape={tuple(self.shape)}, dtype={self.dtype.name}, numpy={values}>"


def _scalar(kind: type) -> Any:
    def method(self: Tensor) -> Any:
        if int(np.prod(self.shape_list, dtype=np.int64)) != 1:
            raise ValueError(
                f"only a tensor of one element converts to {kind.__name__}; this one has shape "
                f"{tuple(self.shape)}"
            )
        return kind(self.item())

    return method


def _getitem(self: Tensor, index: Any) -> Tensor:
    """Basic indexing, as TensorFlow's: integers (negative from the end), slices with step 1,
    ``...`` and ``None``. A slice op, so gradients flow through it."""
    items = list(index) if isinstance(index, tuple) else [index]
    if any(item is Ellipsis for item in items):
        at = items.index(Ellipsis)
        named = sum(1 for item in items if item is not None and item is not Ellipsis)
        items[at : at + 1] = [slice(None)] * (self.ndim - named)
    shape = self.shape_list
    begin, size, result_shape, axis = [], [], [], 0
    for item in items:
        if item is None:
            result_shape.append(1)
            continue
        if axis >= len(shape):
            raise IndexError(f"too many indices for a tensor of shape {tuple(shape)}")
        extent = shape[axis]
        if isinstance(item, slice):
            start, stop, step = item.indices(extent)
            if step != 1:
                missing("tf.Tensor.__getitem__ with a step other than 1 (tf.strided_slice)")
            begin.append(start)
            size.append(max(stop - start, 0))
            result_shape.append(max(stop - start, 0))
        elif isinstance(item, (int, np.integer)):
            position = int(item) + extent if item < 0 else int(item)
            if not 0 <= position < extent:
                raise IndexError(f"index {item} is out of range for axis {axis} of size {extent}")
            begin.append(position)
            size.append(1)
        else:
            missing(f"tf.Tensor.__getitem__ with a {type(item).__name__} index (tf.gather)")
        axis += 1
    begin += [0] * (len(shape) - axis)
    size += shape[axis:]
    result_shape += shape[axis:]
    return _ops.reshape(_ops.slice(self, begin, size), result_shape)


def _assign(self: Tensor, value: Any) -> Tensor:
    self._assign_native(_operand(self, value))
    return self


_ops = _native.ops
_methods = {
    "shape": property(lambda self: TensorShape(self.shape_list)),
    "dtype": property(lambda self: _dtypes.as_dtype(self.dtype_name)),
    "device": property(lambda self: _tf_device_name(self.device_name)),
    "ndim": property(lambda self: len(self.shape_list)),
    "name": property(lambda self: self.tensor_name),
    "trainable": property(lambda self: self.is_variable),
    "numpy": _numpy,
    "__array__": _array,
    "__dlpack__": _dlpack,
    "__dlpack_device__": lambda self: self.dlpack_view().__dlpack_device__(),
    "__repr__": _repr,
    "__str__": _repr,
    "__len__": lambda self: (
        self.shape_list[0] if self.shape_list else missing("len() of a scalar tensor")
    ),
    "__float__": _scalar(float),
    "__int__": _scalar(int),
    "__bool__": _scalar(bool),
    "__index__": _scalar(int),
    "__getitem__": _getitem,
    "__add__": _binary(_ops.add),
    "__radd__": _binary(_ops.add, reflected=True),
    "__sub__": _binary(_ops.sub),
    "__rsub__": _binary(_ops.sub, reflected=True),
    "__mul__": _binary(_ops.mul),
    "__rmul__": _binary(_ops.mul, reflected=True),
    "__truediv__": _binary(_ops.div),
    "__rtruediv__": _binary(_ops.div, reflected=True),
    "__pow__": _binary(_ops.pow),
    "__rpow__": _binary(_ops.pow, reflected=True),
    "__matmul__": lambda self, other: _ops.matmul(self, _operand(self, other), False, False),
    "__rmatmul__": lambda self, other: _ops.matmul(_operand(self, other), self, False, False),
    "__neg__": lambda self: _ops.neg(self),
    "__abs__": lambda self: _ops.abs(self),
    "__gt__": _binary(_ops.greater),
    "__ge__": _binary(_ops.greater_equal),
    "__lt__": _binary(_ops.less),
    "__le__": lambda self, other: _ops.greater_equal(_operand(self, other), self),
    "__array_priority__": 100,  # numpy defers `array + tensor` to the tensor's __radd__
    "_assign_native": Tensor.assign,
    "assign": _assign,
    "assign_add": lambda self, value: _assign(self, _ops.add(self, _operand(self, value))),
    "assign_sub": lambda self, value: _assign(self, _ops.sub(self, _operand(self, value))),
    "cpu": lambda self: self.to("cpu"),
}
for _name, _value in _methods.items():
    setattr(Tensor, _name, _value)
