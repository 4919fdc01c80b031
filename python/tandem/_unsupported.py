"""What Tandem lacks fails loudly, by name: never a silent no-op."""

from __future__ import annotations

from typing import Callable, NoReturn


class TensorFlowSymbolMissingError(NotImplementedError, AttributeError):
    """A TensorFlow 2.15 name Tandem does not have.

    A NotImplementedError naming the TensorFlow symbol; also an AttributeError, so that
    ``hasattr`` and introspection (IPython, pytest) treat the name as absent.
    """


def missing(symbol: str) -> NoReturn:
    raise TensorFlowSymbolMissingError(
        f"tandem has no {symbol} (TensorFlow 2.15 names it; docs/python.md lists what "
        "Tandem has): use the TensorFlow package for it, or leave it out"
    )


def module_getattr(prefix: str) -> Callable[[str], NoReturn]:
    """A module ``__getattr__`` that names ``prefix.name`` for every public name it lacks."""

    def __getattr__(name: str) -> NoReturn:  # noqa: N807 - the module hook
        if name.startswith("_"):
            raise AttributeError(f"module {prefix!r} has no attribute {name!r}")
        missing(f"{prefix}.{name}")

    return __getattr__
