"""tf.io: tf.train.Example parsing, image codecs and file reading over Tandem's readers.

Byte strings (TensorFlow's scalar tf.string tensors) are rank-1 uint8 tensors in Tandem, as its
pipelines carry them: what TFRecordDataset yields and parse_single_example gives for a
tf.string feature, and what decode_jpeg takes.
"""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Optional, Sequence, Union

import numpy as np

from tandem import _native
from tandem import dtypes as _dtypes
from tandem._tensor import Tensor
from tandem._unsupported import missing, module_getattr


class FixedLenFeature(NamedTuple):
    """A feature of fixed shape: tf.string (a byte string), tf.int64 or tf.float32 values."""

    shape: Sequence[int]
    dtype: Any
    default_value: Any = None


def _as_bytes(value: Union[Tensor, bytes], what: str) -> Tensor:
    if isinstance(value, (bytes, bytearray)):
        return _native.bytes(bytes(value))
    if isinstance(value, Tensor):
        return value
    raise TypeError(f"{what}: expects bytes or a uint8 byte-string tensor, not {type(value)}")


def parse_single_example(
    serialized: Union[Tensor, bytes], features: Dict[str, Any], name: Optional[str] = None
) -> Dict[str, Tensor]:
    """One serialized tf.train.Example parsed by ``features`` (name -> FixedLenFeature)."""
    specs = {}
    for key, feature in features.items():
        if not isinstance(feature, FixedLenFeature):
            missing(f"tf.io.{type(feature).__name__} (parse_single_example takes FixedLenFeature)")
        dtype = _dtypes.as_dtype(feature.dtype)
        kind = {"string": "bytes", "int64": "int64", "float32": "float32"}.get(dtype.name)
        if kind is None:
            raise ValueError(
                f"parse_single_example: feature {key!r} is {dtype.name}; a tf.train.Example holds "
                "tf.string, tf.int64 or tf.float32 features"
            )
        default = feature.default_value
        defaults = None if default is None else [float(v) for v in np.ravel(default)]
        shape = [int(d) for d in feature.shape]
        specs[key] = (kind, shape, "uint8" if kind == "bytes" else dtype.name, defaults)
    return dict(_native.parse_example(_as_bytes(serialized, "parse_single_example"), specs))


def decode_image(contents: Union[Tensor, bytes], channels: int = 0, **unsupported: Any) -> Tensor:
    """A JPEG or PNG as uint8 (H, W, C); channels 1 gives grey, 3 RGB, 0 the file's own."""
    if unsupported:
        missing(f"tf.io.decode_image({', '.join(unsupported)}=...)")
    return _native.decode_image(_as_bytes(contents, "decode_image"), int(channels))


def decode_jpeg(contents: Union[Tensor, bytes], channels: int = 0, **unsupported: Any) -> Tensor:
    return decode_image(contents, channels, **unsupported)


def decode_png(contents: Union[Tensor, bytes], channels: int = 0, **unsupported: Any) -> Tensor:
    return decode_image(contents, channels, **unsupported)


def read_file(filename: str, name: Optional[str] = None) -> Tensor:
    """The file's bytes as a byte-string tensor."""
    with open(filename, "rb") as file:
        return _native.bytes(file.read())


__getattr__ = module_getattr("tf.io")
