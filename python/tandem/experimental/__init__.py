"""tf.experimental: DLPack exchange."""

from tandem._unsupported import module_getattr
from tandem.experimental import dlpack

__all__ = ["dlpack"]
__getattr__ = module_getattr("tf.experimental")
