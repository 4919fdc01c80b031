"""tf.keras.mixed_precision: dtype policies (mixed_float16 adds dynamic loss scaling at compile)."""

from __future__ import annotations

from typing import Union

from tandem import _native
from tandem._unsupported import module_getattr


class Policy:
    """A dtype policy: "float32", "mixed_float16", "mixed_bfloat16" (or one dtype for both)."""

    def __init__(self, name: str) -> None:
        self._compute, self._variable = _native.policy_dtypes(str(name))
        self._name = str(name)

    @property
    def name(self) -> str:
        return self._name

    @property
    def compute_dtype(self) -> str:
        return self._compute

    @property
    def variable_dtype(self) -> str:
        return self._variable

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Policy) and other.name == self._name

    def __hash__(self) -> int:
        return hash(self._name)

    def __repr__(self) -> str:
        return f'<Policy "{self._name}">'


def set_global_policy(policy: Union[Policy, str]) -> None:
    """Layers made from now on take ``policy``; compile wraps the optimizer for loss scaling
    under mixed_float16."""
    _native.set_global_policy(policy.name if isinstance(policy, Policy) else str(policy))


def global_policy() -> Policy:
    return Policy(_native.global_policy() or "float32")


__getattr__ = module_getattr("tf.keras.mixed_precision")
