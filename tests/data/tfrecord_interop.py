"""TFRecord interop with TensorFlow, run by tests/data/tfrecord_interop_test.cpp.

    python tfrecord_interop.py DIR

Reads DIR/tandem.tfrecord and DIR/tandem.tfrecord.gz (written by Tandem) with tf.data and checks
every feature, then writes DIR/tf.tfrecord and DIR/tf.tfrecord.gz with TensorFlow's writer for
the C++ side to read. Exits 1 with a message on the first difference.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

RECORDS = 10


def fail(message):
    print(f"tfrecord_interop: {message}", file=sys.stderr)
    sys.exit(1)


def check_tandem_file(path, compression):
    # What tests/data/tfrecord_interop_test.cpp writes for record i.
    spec = {
        "image": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
        "weights": tf.io.FixedLenFeature([2], tf.float32),
        "ids": tf.io.FixedLenFeature([2], tf.int64),
    }
    dataset = tf.data.TFRecordDataset([path], compression_type=compression)
    count = 0
    for i, record in enumerate(dataset):
        example = tf.io.parse_single_example(record, spec)
        image = example["image"].numpy()
        if image != bytes([i] * 6):
            fail(f"{path}: record {i}: image is {image!r}, expected 6 bytes of {i}")
        if int(example["label"]) != i:
            fail(f"{path}: record {i}: label is {int(example['label'])}, expected {i}")
        weights = example["weights"].numpy()
        if not np.array_equal(weights, np.array([0.5, -i], dtype=np.float32)):
            fail(f"{path}: record {i}: weights are {weights}, expected [0.5, {-i}]")
        ids = example["ids"].numpy()
        if not np.array_equal(ids, np.array([-1, 1 << 40], dtype=np.int64)):
            fail(f"{path}: record {i}: ids are {ids}, expected [-1, 2^40]")
        count += 1
    if count != RECORDS:
        fail(f"{path}: {count} records, expected {RECORDS}")


def write_tf_file(path, compression):
    options = tf.io.TFRecordOptions(compression_type=compression)
    with tf.io.TFRecordWriter(path, options) as writer:
        for i in range(RECORDS):
            feature = {
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(value=[bytes([i] * 6)])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
                "weights": tf.train.Feature(float_list=tf.train.FloatList(value=[i * 0.25, -1.5])),
                "name": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"example-%d" % i])),
            }
            example = tf.train.Example(features=tf.train.Features(feature=feature))
            writer.write(example.SerializeToString())


def main():
    if len(sys.argv) != 2:
        fail("usage: tfrecord_interop.py DIR")
    directory = sys.argv[1]
    check_tandem_file(os.path.join(directory, "tandem.tfrecord"), "")
    check_tandem_file(os.path.join(directory, "tandem.tfrecord.gz"), "GZIP")
    write_tf_file(os.path.join(directory, "tf.tfrecord"), "")
    write_tf_file(os.path.join(directory, "tf.tfrecord.gz"), "GZIP")
    print(f"tfrecord_interop: TensorFlow {tf.__version__} read Tandem's files and wrote its own")


if __name__ == "__main__":
    main()
