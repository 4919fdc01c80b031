"""tf.io and tf.image: a tf.train.Example with an encoded image parsed, decoded and resized."""

import io

import numpy as np
import pytest

import tandem as tf

PIL = pytest.importorskip("PIL.Image", reason="Pillow comes with the notebook group")


def png_bytes(pixels: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    PIL.fromarray(pixels).save(buffer, format="PNG")
    return buffer.getvalue()


def test_an_example_with_a_png_is_parsed_decoded_and_resized():
    pixels = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    encoded = png_bytes(pixels)
    serialized = tf._native.serialize_example(
        {"image": tf._native.bytes(encoded), "label": tf.constant([7], dtype="int64")}
    )
    features = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
        "weight": tf.io.FixedLenFeature([], tf.float32, default_value=0.5),
    }
    parsed = tf.io.parse_single_example(serialized, features)
    assert int(parsed["label"]) == 7 and float(parsed["weight"]) == 0.5
    assert bytes(parsed["image"].numpy()) == encoded
    image = tf.io.decode_png(parsed["image"], channels=3)
    np.testing.assert_array_equal(image.numpy(), pixels)
    resized = tf.image.resize(image, [8, 12])
    assert resized.dtype == tf.float32 and resized.shape == (8, 12, 3)
    same = tf.image.resize(image, [4, 6])
    np.testing.assert_allclose(same.numpy(), pixels.astype(np.float32))
    scaled = tf.image.convert_image_dtype(image, tf.float32)
    np.testing.assert_allclose(scaled.numpy(), pixels / 255.0, rtol=1e-6)


def test_a_missing_feature_without_a_default_and_garbage_are_errors_naming_them():
    serialized = tf._native.serialize_example({"label": tf.constant([1], dtype="int64")})
    with pytest.raises(tf.errors.InvalidArgumentError, match="image"):
        tf.io.parse_single_example(serialized, {"image": tf.io.FixedLenFeature([], tf.string)})
    with pytest.raises(tf.errors.OpError, match="decode_image"):
        tf.io.decode_jpeg(b"not an image")
