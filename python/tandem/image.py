"""tf.image: decoding and resizing images (NHWC), over Tandem's image code."""

from __future__ import annotations

from typing import Any, Sequence

from tandem import _native
from tandem._tensor import Tensor, cast, convert_to_tensor
from tandem._unsupported import missing, module_getattr
from tandem.io import decode_image, decode_jpeg, decode_png

__all__ = ["convert_image_dtype", "decode_image", "decode_jpeg", "decode_png", "resize"]


def resize(
    images: Any,
    size: Sequence[int],
    method: str = "bilinear",
    preserve_aspect_ratio: bool = False,
    antialias: bool = False,
) -> Tensor:
    """Bilinear with half-pixel centres, as TensorFlow's default; float32 out, as TensorFlow
    gives. One image (H, W, C)."""
    if method != "bilinear" or preserve_aspect_ratio or antialias:
        missing(f"tf.image.resize(method={method!r}/preserve_aspect_ratio/antialias)")
    image = convert_to_tensor(images)
    if image.ndim != 3:
        missing("tf.image.resize of a batch (N, H, W, C); map it over the images")
    height, width = (int(d) for d in size)
    return _native.resize_image(cast(image, "float32"), height, width)


def convert_image_dtype(image: Any, dtype: Any, saturate: bool = False) -> Tensor:
    """uint8 images to floats in [0, 1] (and floats cast as they are), as TensorFlow does."""
    tensor = convert_to_tensor(image)
    target = str(getattr(dtype, "name", dtype))
    if tensor.dtype == "uint8" and target in ("float16", "bfloat16", "float32", "float64"):
        return cast(cast(tensor, "float32") * (1.0 / 255.0), target)
    if tensor.dtype.is_floating and target in ("float16", "bfloat16", "float32", "float64"):
        return cast(tensor, target)
    missing(f"tf.image.convert_image_dtype from {tensor.dtype.name} to {target}")


__getattr__ = module_getattr("tf.image")
