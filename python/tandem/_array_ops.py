"""Shapes and layouts: tf.reshape, tf.transpose, tf.concat, tf.matmul, tf.zeros, ..."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from tandem import _native
from tandem import dtypes as _dtypes
from tandem._tensor import Tensor, TensorLike, _operand, _placed, cast, convert_to_tensor


def matmul(
    a: TensorLike,
    b: TensorLike,
    transpose_a: bool = False,
    transpose_b: bool = False,
    name: Optional[str] = None,
) -> Tensor:
    return _native.ops.matmul(
        convert_to_tensor(a), convert_to_tensor(b), bool(transpose_a), bool(transpose_b)
    )


def reshape(tensor: TensorLike, shape: Sequence[int], name: Optional[str] = None) -> Tensor:
    return _native.ops.reshape(convert_to_tensor(tensor), [int(d) for d in shape])


def transpose(
    a: TensorLike, perm: Optional[Sequence[int]] = None, name: Optional[str] = None
) -> Tensor:
    x = convert_to_tensor(a)
    order = list(range(x.ndim))[::-1] if perm is None else [int(p) for p in perm]
    return _native.ops.transpose(x, order)


def concat(values: Sequence[TensorLike], axis: int, name: Optional[str] = None) -> Tensor:
    return _native.ops.concat([convert_to_tensor(v) for v in values], int(axis))


def broadcast_to(
    input: TensorLike,
    shape: Sequence[int],
    name: Optional[str] = None,
) -> Tensor:
    return _native.ops.broadcast_to(convert_to_tensor(input), [int(d) for d in shape])


def where(
    condition: TensorLike, x: Any = None, y: Any = None, name: Optional[str] = None
) -> Tensor:
    if x is None or y is None:
        from tandem._unsupported import missing

        missing("tf.where(condition) without x and y (the indices of true elements)")
    x_tensor = convert_to_tensor(x) if not isinstance(y, Tensor) else _operand(y, x)
    return _native.ops.where(cast(condition, "bool"), x_tensor, _operand(x_tensor, y))


def fill(dims: Sequence[int], value: float, name: Optional[str] = None) -> Tensor:
    dtype = "float32" if isinstance(value, float) else "int32"
    return _placed(_native.full([int(d) for d in dims], float(value), dtype))


def zeros(shape: Sequence[int], dtype: Any = "float32", name: Optional[str] = None) -> Tensor:
    return _placed(_native.full([int(d) for d in shape], 0.0, _dtypes.as_dtype(dtype).name))


def ones(shape: Sequence[int], dtype: Any = "float32", name: Optional[str] = None) -> Tensor:
    return _placed(_native.full([int(d) for d in shape], 1.0, _dtypes.as_dtype(dtype).name))
