"""Sharded TFRecord files of JPEG images as TensorFlow's tools write them, for
tests/cli/train_data_test.cpp (`tandem train --data 'DIR/train-*-of-00002'`).

    python tf_image_records.py DIR

Writes DIR/train-00000-of-00002 and DIR/train-00001-of-00002 (60 examples) and
DIR/test-00000-of-00001 (30): tf.train.Example records with image/encoded (a JPEG from
tf.io.encode_jpeg), image/format, image/height, image/width and image/class/label (0-2). Class c
is a noisy image with a bright band across the c-th third of its rows, so that any working
pipeline separates them.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

SIDE = 16
CLASSES = 3


def example(rng, label):
    pixels = 10 + rng.integers(0, 60, size=(SIDE, SIDE, 3))
    band = SIDE // CLASSES
    pixels[label * band:(label + 1) * band] += 160
    pixels = pixels.astype(np.uint8)
    encoded = tf.io.encode_jpeg(pixels, quality=95).numpy()

    def int64(value):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))

    def bytes_feature(value):
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))

    features = {
        "image/encoded": bytes_feature(encoded),
        "image/format": bytes_feature(b"jpeg"),
        "image/height": int64(SIDE),
        "image/width": int64(SIDE),
        "image/class/label": int64(label),
    }
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def write(path, rng, count):
    with tf.io.TFRecordWriter(path) as writer:
        for i in range(count):
            writer.write(example(rng, i % CLASSES))


def main():
    directory = sys.argv[1]
    rng = np.random.default_rng(7)
    write(os.path.join(directory, "train-00000-of-00002"), rng, 30)
    write(os.path.join(directory, "train-00001-of-00002"), rng, 30)
    write(os.path.join(directory, "test-00000-of-00001"), rng, 30)


if __name__ == "__main__":
    main()
