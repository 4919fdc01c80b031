"""tf.function over Tandem's compiled steps (tandem::function).

The first call with a signature (the tensors' shapes and dtypes, and the values of the other
arguments) runs the Python function once on symbolic tensors, and Tandem compiles the ops it ran:
a custom training step's forward pass, tape and optimizer update become one planned graph. Later
calls with that signature run the graph without Python, with the GIL released. Inside, tensors
have no values: ``float(t)`` or ``t.numpy()`` raise, as in TensorFlow's graphs.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from tandem import _native
from tandem._tensor import Tensor, convert_to_tensor
from tandem._unsupported import missing

Rebuild = Callable[[List[Tensor]], Any]


def _flatten(value: Any, tensors: List[Tensor]) -> Tuple[Any, Rebuild]:
    """(key, rebuild): the value's structure with its non-tensor leaves (part of the signature),
    and how to rebuild it from the flat tensors; tensors are appended to ``tensors``."""
    if isinstance(value, (Tensor, np.ndarray)):
        index = len(tensors)
        tensors.append(convert_to_tensor(value))
        return ("tensor",), lambda flat: flat[index]
    if isinstance(value, (list, tuple)):
        parts = [_flatten(item, tensors) for item in value]
        kind = type(value)
        return (kind.__name__, tuple(key for key, _ in parts)), lambda flat: kind(
            rebuild(flat) for _, rebuild in parts
        )
    if isinstance(value, dict):
        parts = {name: _flatten(item, tensors) for name, item in value.items()}
        return ("dict", tuple((name, key) for name, (key, _) in parts.items())), lambda flat: {
            name: rebuild(flat) for name, (_, rebuild) in parts.items()
        }
    try:
        hash(value)
        static = ("value", type(value).__name__, value)
    except TypeError:
        static = ("object", id(value))
    return static, lambda flat: value


def _flatten_result(result: Any) -> Tuple[List[Tensor], Rebuild]:
    tensors: List[Tensor] = []
    if result is None:
        return tensors, lambda flat: None
    if isinstance(result, (int, float, bool)):
        result = convert_to_tensor(result)
    _, rebuild = _flatten(result, tensors)
    return tensors, rebuild


class Function:
    """A Python function compiled by Tandem on its first call with each signature."""

    def __init__(self, python_function: Callable[..., Any], jit_compile: Optional[bool]) -> None:
        functools.update_wrapper(self, python_function)
        self._python_function = python_function
        self._jit_compile = jit_compile
        self._traced: Dict[Any, Tuple[Any, Dict[str, Rebuild]]] = {}

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        return self if instance is None else functools.partial(self.__call__, instance)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tensors: List[Tensor] = []
        key, rebuild_arguments = _flatten((args, kwargs), tensors)
        if key not in self._traced:
            outputs: Dict[str, Rebuild] = {}

            def body(symbolic: List[Tensor]) -> List[Tensor]:
                call_args, call_kwargs = rebuild_arguments(symbolic)
                flat, outputs["rebuild"] = _flatten_result(
                    self._python_function(*call_args, **call_kwargs)
                )
                return flat

            self._traced[key] = (_native.Function(self.__name__, body), outputs)
        native, outputs = self._traced[key]
        results = native(tensors)
        return outputs["rebuild"](results)

    @property
    def compiles(self) -> int:
        """How many signatures were traced and compiled (Tandem's count)."""
        return sum(native.compiles for native, _ in self._traced.values())


def function(
    func: Optional[Callable[..., Any]] = None,
    input_signature: Any = None,
    autograph: bool = True,
    jit_compile: Optional[bool] = None,
    reduce_retracing: bool = False,
    experimental_implements: Any = None,
    experimental_autograph_options: Any = None,
    experimental_attributes: Any = None,
    experimental_relax_shapes: Any = None,
    experimental_compile: Any = None,
    experimental_follow_type_hints: Any = None,
) -> Any:
    """tf.function, as a decorator (with or without arguments) or a call. Tandem always compiles
    the traced step, so jit_compile=True and the default behave alike."""
    if input_signature is not None:
        missing("tf.function(input_signature=...)")
    if jit_compile is False:
        missing("tf.function(jit_compile=False) (Tandem compiles every traced step)")
    if func is None:
        return lambda inner: Function(inner, jit_compile)
    return Function(func, jit_compile)
