"""tf.GradientTape over Tandem's tape: gradients through the op table's rules."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Union

from tandem import _native
from tandem._tensor import Tensor, convert_to_tensor


class GradientTape:
    """Records the ops run inside ``with tf.GradientTape() as tape:``; trainable variables (layer
    weights, tf.Variable) are watched without asking."""

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True) -> None:
        self._tape = _native.GradientTape(bool(persistent), bool(watch_accessed_variables))

    def __enter__(self) -> GradientTape:
        self._tape.start()
        return self

    def __exit__(self, *exception: Any) -> None:
        if exception[0] is not None:
            self._tape.release()

    def watch(self, tensor: Union[Tensor, Sequence[Tensor]]) -> None:
        for item in tensor if isinstance(tensor, (list, tuple)) else [tensor]:
            self._tape.watch(item)

    def gradient(
        self,
        target: Tensor,
        sources: Any,
        output_gradients: Optional[Tensor] = None,
        unconnected_gradients: Any = None,
    ) -> Any:
        """d target / d source for each source, in the sources' structure (None where the target
        does not depend on a source)."""
        single = isinstance(sources, Tensor)
        listed: List[Tensor] = [sources] if single else list(sources)
        seed = _native.Tensor() if output_gradients is None else convert_to_tensor(output_gradients)
        gradients = self._tape.gradient(target, listed, seed)
        if single:
            return gradients[0]
        return tuple(gradients) if isinstance(sources, tuple) else gradients

    class _Paused:
        def __enter__(self) -> None:
            self._guard = _native.stop_recording()

        def __exit__(self, *exception: Any) -> None:
            del self._guard

    def stop_recording(self) -> _Paused:
        return GradientTape._Paused()
