"""tf.keras.backend: the session state Tandem keeps (layer names)."""

from tandem import _native
from tandem._unsupported import module_getattr


def clear_session() -> None:
    """Forgets the layer-name counters, so new layers are named dense, dense_1, ... again."""
    _native.clear_session()


__getattr__ = module_getattr("tf.keras.backend")
