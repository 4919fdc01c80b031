"""tf.random: the global seed and random tensors, from Tandem's counter-based generator."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from tandem import _native
from tandem import dtypes as _dtypes
from tandem._tensor import Tensor, _placed
from tandem._unsupported import missing, module_getattr


def set_seed(seed: int) -> None:
    """tf.random.set_seed: reseeds Tandem's default generator (initial weights, dropout, draws)."""
    _native.set_seed(int(seed))


def _shape(shape: Sequence[int]) -> list:
    return [int(d) for d in shape]


def normal(
    shape: Sequence[int],
    mean: float = 0.0,
    stddev: float = 1.0,
    dtype: Any = "float32",
    seed: Optional[int] = None,
    name: Optional[str] = None,
) -> Tensor:
    if seed is not None:
        missing("tf.random.normal(seed=...) (an op-level seed); set tf.random.set_seed instead")
    return _placed(
        _native.random_normal(
            _shape(shape), float(mean), float(stddev), _dtypes.as_dtype(dtype).name
        )
    )


def uniform(
    shape: Sequence[int],
    minval: float = 0.0,
    maxval: float = 1.0,
    dtype: Any = "float32",
    seed: Optional[int] = None,
    name: Optional[str] = None,
) -> Tensor:
    if seed is not None:
        missing("tf.random.uniform(seed=...) (an op-level seed); set tf.random.set_seed instead")
    return _placed(
        _native.random_uniform(
            _shape(shape), float(minval), float(maxval), _dtypes.as_dtype(dtype).name
        )
    )


__getattr__ = module_getattr("tf.random")
