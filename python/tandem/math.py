"""tf.math: element-wise math and reductions over Tandem's ops (gradients through GradientTape)."""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from tandem import _native
from tandem._tensor import Tensor, TensorLike, _operand, convert_to_tensor
from tandem._unsupported import module_getattr

_ops = _native.ops
Axis = Union[None, int, Sequence[int]]


def _binary(op: Any, tf_name: str) -> Any:
    def function(x: TensorLike, y: TensorLike, name: Optional[str] = None) -> Tensor:
        if isinstance(x, Tensor):
            return op(x, _operand(x, y))
        y_tensor = convert_to_tensor(y)
        return op(_operand(y_tensor, x), y_tensor)

    function.__name__ = tf_name
    function.__doc__ = f"tf.math.{tf_name}, with numpy broadcasting."
    return function


def _unary(op: Any, tf_name: str) -> Any:
    def function(x: TensorLike, name: Optional[str] = None) -> Tensor:
        return op(convert_to_tensor(x))

    function.__name__ = tf_name
    function.__doc__ = f"tf.math.{tf_name}, element-wise."
    return function


add = _binary(_ops.add, "add")
subtract = _binary(_ops.sub, "subtract")
multiply = _binary(_ops.mul, "multiply")
divide = _binary(_ops.div, "divide")
truediv = divide
maximum = _binary(_ops.maximum, "maximum")
minimum = _binary(_ops.minimum, "minimum")
pow = _binary(_ops.pow, "pow")
equal = _binary(_ops.equal, "equal")
greater = _binary(_ops.greater, "greater")
greater_equal = _binary(_ops.greater_equal, "greater_equal")
less = _binary(_ops.less, "less")


def less_equal(x: TensorLike, y: TensorLike, name: Optional[str] = None) -> Tensor:
    return greater_equal(y, x)


negative = _unary(_ops.neg, "negative")
abs = _unary(_ops.abs, "abs")
sign = _unary(_ops.sign, "sign")
exp = _unary(_ops.exp, "exp")
log = _unary(_ops.log, "log")
sqrt = _unary(_ops.sqrt, "sqrt")
rsqrt = _unary(_ops.rsqrt, "rsqrt")
square = _unary(_ops.square, "square")
sigmoid = _unary(_ops.sigmoid, "sigmoid")
tanh = _unary(_ops.tanh, "tanh")


def _axes(axis: Axis) -> list:
    if axis is None:
        return []
    if isinstance(axis, (int,)) or hasattr(axis, "__index__"):
        return [int(axis)]
    return [int(a) for a in axis]


def reduce_sum(
    input_tensor: TensorLike, axis: Axis = None, keepdims: bool = False, name: Optional[str] = None
) -> Tensor:
    return _ops.sum(convert_to_tensor(input_tensor), _axes(axis), keepdims)


def reduce_mean(
    input_tensor: TensorLike, axis: Axis = None, keepdims: bool = False, name: Optional[str] = None
) -> Tensor:
    return _ops.mean(convert_to_tensor(input_tensor), _axes(axis), keepdims)


def reduce_max(
    input_tensor: TensorLike, axis: Axis = None, keepdims: bool = False, name: Optional[str] = None
) -> Tensor:
    return _ops.max(convert_to_tensor(input_tensor), _axes(axis), keepdims)


def argmax(
    input: TensorLike,
    axis: Optional[int] = None,
    output_type: Any = None,
    name: Optional[str] = None,
) -> Tensor:
    """tf.math.argmax: int64 indices along ``axis`` (TensorFlow's default axis is 0)."""
    result = _ops.argmax(convert_to_tensor(input), 0 if axis is None else int(axis))
    if output_type is not None:
        from tandem._tensor import cast

        result = cast(result, output_type)
    return result


__getattr__ = module_getattr("tf.math")
