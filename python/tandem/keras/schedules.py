"""tf.keras.optimizers.schedules: learning rates that change with the update count.

A schedule given as an optimizer's learning_rate runs inside Tandem's update, step by step;
``schedule(step)`` gives its rate for an update number, as Keras' does.
"""

from __future__ import annotations

from typing import Any, Optional

from tandem import _native
from tandem._unsupported import missing, module_getattr


class LearningRateSchedule:
    """A schedule Tandem runs: the rate of update number ``step`` (from 0)."""

    _native: Any

    def __call__(self, step: int) -> float:
        return float(self._native(int(step)))


class CosineDecay(LearningRateSchedule):
    """Keras' CosineDecay, with its optional linear warm-up to warmup_target."""

    def __init__(
        self,
        initial_learning_rate: float,
        decay_steps: int,
        alpha: float = 0.0,
        name: Optional[str] = None,
        warmup_target: Optional[float] = None,
        warmup_steps: int = 0,
    ) -> None:
        if warmup_steps and warmup_target is None:
            raise ValueError("CosineDecay: warmup_steps needs a warmup_target to climb to")
        self._native = _native.cosine_decay(
            float(initial_learning_rate),
            int(decay_steps),
            float(alpha),
            int(warmup_steps),
            float(warmup_target or 0.0),
        )


class ExponentialDecay(LearningRateSchedule):
    """Keras' ExponentialDecay; Tandem has the staircase form."""

    def __init__(
        self,
        initial_learning_rate: float,
        decay_steps: int,
        decay_rate: float,
        staircase: bool = False,
        name: Optional[str] = None,
    ) -> None:
        if not staircase:
            missing("tf.keras.optimizers.schedules.ExponentialDecay(staircase=False)")
        self._native = _native.step_decay(
            float(initial_learning_rate), int(decay_steps), float(decay_rate)
        )


__getattr__ = module_getattr("tf.keras.optimizers.schedules")
