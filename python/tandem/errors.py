"""TensorFlow's exception classes (``tf.errors``), raised with Tandem's messages.

Each is also the builtin a Python user would catch: InvalidArgumentError is a ValueError,
ResourceExhaustedError a MemoryError, NotFoundError a FileNotFoundError.
"""

from __future__ import annotations

from typing import Any

from tandem._unsupported import module_getattr


class OpError(Exception):
    """Base of Tandem's errors; takes TensorFlow's (node_def, op, message) or a message."""

    def __init__(self, *args: Any) -> None:
        message = args[2] if len(args) == 3 else (args[0] if args else "")
        super().__init__(message)
        self.message: str = str(message)
        self.node_def: Any = args[0] if len(args) == 3 else None
        self.op: Any = args[1] if len(args) == 3 else None

    def __str__(self) -> str:
        return self.message


class InvalidArgumentError(OpError, ValueError):
    pass


class NotFoundError(OpError, FileNotFoundError):
    pass


class PermissionDeniedError(OpError, PermissionError):
    pass


class ResourceExhaustedError(OpError, MemoryError):
    pass


class DataLossError(OpError, OSError):
    pass


class InternalError(OpError, RuntimeError):
    pass


class UnknownError(OpError, RuntimeError):
    pass


class UnimplementedError(OpError, NotImplementedError):
    pass


__getattr__ = module_getattr("tf.errors")
