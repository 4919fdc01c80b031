"""Tandem: TensorFlow 2.15's API for the code TensorFlow users write, on Tandem's runtime.

    import tandem as tf

Whatever TensorFlow has and Tandem does not raises NotImplementedError naming the TensorFlow
symbol (docs/python.md lists what is here).
"""

from tandem import (
    _native,
    bench,
    config,
    data,
    debugging,
    distribute,
    dtypes,
    errors,
    experimental,
    image,
    io,
    keras,
    math,
    nn,
    random,
    test,
    tpu,
)
from tandem._array_ops import (
    broadcast_to,
    concat,
    fill,
    matmul,
    ones,
    reshape,
    transpose,
    where,
    zeros,
)
from tandem._autodiff import GradientTape
from tandem._function import function
from tandem._tensor import (
    Tensor,
    TensorShape,
    Variable,
    cast,
    constant,
    convert_to_tensor,
    device,
)
from tandem._unsupported import module_getattr
from tandem.dtypes import (
    DType,
    as_dtype,
    bfloat16,
    bool,
    double,
    float16,
    float32,
    float64,
    half,
    int8,
    int32,
    int64,
    string,
    uint8,
)
from tandem.math import (
    abs,
    add,
    argmax,
    divide,
    equal,
    exp,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    maximum,
    minimum,
    multiply,
    negative,
    pow,
    reduce_max,
    reduce_mean,
    reduce_sum,
    sigmoid,
    sqrt,
    square,
    subtract,
    tanh,
)

__version__ = _native.version()

__all__ = [name for name in dir() if not name.startswith("_")]
__getattr__ = module_getattr("tf")
