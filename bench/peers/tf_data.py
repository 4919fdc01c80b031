"""tf.data's side of bench/data_pipeline_vs_tfdata.sh: the same input pipelines as
bench/data_pipeline.cpp, in TensorFlow 2.15, on the same files and threads; prints elements per
second as one JSON line (median over the passes after the first, a warm-up).

    .venv/bin/python bench/peers/tf_data.py jpeg --dir DIR --decode crop --threads 2
    .venv/bin/python bench/peers/tf_data.py fashion --source tensor_slices --threads 2

jpeg, --decode crop: the input of TensorFlow's official ResNet-50 ImageNet training
(sample_distorted_bounding_box, decode_and_crop_jpeg, resize to 224x224, random flip,
normalise). --decode full decodes the whole image, then crops.
fashion: the Fashion-MNIST training images shuffled with a full buffer, batched and scaled to
[0, 1], from in-memory arrays (--source tensor_slices, what a Keras user writes) or read by
tf.data from the gzip IDX files themselves (--source records, FixedLengthRecordDataset).
"""

import argparse
import json
import os
import resource
import statistics
import time

import common

SIDE = 224
MEAN = [123.68, 116.78, 103.94]
STDDEV = [58.39, 57.12, 57.38]
SEED = 1234


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=["jpeg", "fashion"])
    parser.add_argument("--dir", help="jpeg: the folder of <class>/<image>.jpg files")
    parser.add_argument("--decode", choices=["crop", "full"], default="crop")
    parser.add_argument("--data-dir", default=common.DEFAULT_DATA_DIR)
    parser.add_argument("--source", choices=["tensor_slices", "records"], default="tensor_slices")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("--report")
    args = parser.parse_args()
    if args.workload == "jpeg" and not args.dir:
        parser.error("jpeg needs --dir")
    if args.passes < 2:
        parser.error("--passes must be at least 2 (the first is a warm-up)")
    return args


def image_files(directory):
    """Paths and labels, classes numbered in sorted order of their folders (as Tandem's)."""
    classes = sorted(entry.name for entry in os.scandir(directory) if entry.is_dir())
    paths, labels = [], []
    for label, name in enumerate(classes):
        for file in sorted(os.listdir(os.path.join(directory, name))):
            if file.lower().endswith((".jpg", ".jpeg")):
                paths.append(os.path.join(directory, name, file))
                labels.append(label)
    return paths, labels


def jpeg_pipeline(tf, args):
    paths, labels = image_files(args.dir)
    mean = tf.constant(MEAN, tf.float32)
    stddev = tf.constant(STDDEV, tf.float32)
    no_boxes = tf.zeros([1, 0, 4], tf.float32)

    def crop_window(shape):
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            shape,
            bounding_boxes=no_boxes,
            min_object_covered=0.1,
            aspect_ratio_range=[0.75, 1.33],
            area_range=[0.08, 1.0],
            max_attempts=10,
            use_image_if_no_bounding_boxes=True,
        )
        return begin, size

    def augment(path, label):
        encoded = tf.io.read_file(path)
        if args.decode == "crop":
            begin, size = crop_window(tf.image.extract_jpeg_shape(encoded))
            window = tf.stack([begin[0], begin[1], size[0], size[1]])
            image = tf.image.decode_and_crop_jpeg(encoded, window, channels=3)
        else:
            image = tf.io.decode_jpeg(encoded, channels=3)
            begin, size = crop_window(tf.shape(image))
            image = tf.slice(image, begin, size)
        image = tf.image.resize(image, [SIDE, SIDE])
        image = tf.image.random_flip_left_right(image)
        return (image - mean) / stddev, label

    dataset = tf.data.Dataset.from_tensor_slices((paths, labels))
    dataset = dataset.map(augment, num_parallel_calls=args.threads)
    return dataset.batch(args.batch_size).prefetch(tf.data.AUTOTUNE)


def fashion_pipeline(tf, args):
    images_path = os.path.join(args.data_dir, "train-images-idx3-ubyte.gz")
    labels_path = os.path.join(args.data_dir, "train-labels-idx1-ubyte.gz")
    if args.source == "tensor_slices":
        images = common.read_idx(images_path)[..., None]  # (N, 28, 28, 1) u8
        labels = common.read_idx(labels_path).astype("int32")
        dataset = tf.data.Dataset.from_tensor_slices((images, labels))
        count = len(labels)
    else:
        # The IDX files read by tf.data itself: fixed-length records after the header.
        images = tf.data.FixedLengthRecordDataset(
            images_path, 28 * 28, header_bytes=16, compression_type="GZIP"
        ).map(lambda record: tf.reshape(tf.io.decode_raw(record, tf.uint8), [28, 28, 1]))
        labels = tf.data.FixedLengthRecordDataset(
            labels_path, 1, header_bytes=8, compression_type="GZIP"
        ).map(lambda record: tf.cast(tf.io.decode_raw(record, tf.uint8)[0], tf.int32))
        dataset = tf.data.Dataset.zip((images, labels))
        count = 60000
    dataset = dataset.shuffle(count, seed=SEED).batch(args.batch_size)
    dataset = dataset.map(
        lambda image, label: (tf.cast(image, tf.float32) / 255.0, label),
        num_parallel_calls=args.threads,
    )
    return dataset.prefetch(tf.data.AUTOTUNE)


def cpu_seconds():
    """User and system CPU time of this process, all threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main():
    args = parse_args()
    common.limit_threads_env(args.threads)
    import tensorflow as tf

    build = jpeg_pipeline if args.workload == "jpeg" else fashion_pipeline
    dataset = build(tf, args)
    options = tf.data.Options()
    options.threading.private_threadpool_size = args.threads
    options.threading.max_intra_op_parallelism = 1
    dataset = dataset.with_options(options)

    rates = []
    cpu_rates = []  # elements per CPU-second of this process: robust to other processes' load
    elements = 0
    for _ in range(args.passes):
        cpu_before = cpu_seconds()
        started = time.perf_counter()
        elements = 0
        for _, labels in dataset:
            elements += int(labels.shape[0])
        rates.append(elements / (time.perf_counter() - started))
        cpu_rates.append(elements / (cpu_seconds() - cpu_before))
    result = {
        "framework": "tensorflow",
        "version": tf.__version__,
        "workload": args.workload,
        "variant": args.decode if args.workload == "jpeg" else args.source,
        "threads": args.threads,
        "batch_size": args.batch_size,
        "elements": elements,
        "elements_per_sec": statistics.median(rates[1:]),
        "pass_elements_per_sec": rates,
        "elements_per_cpu_sec": statistics.median(cpu_rates[1:]),
    }
    line = json.dumps(result)
    if args.report:
        with open(args.report, "w") as file:
            file.write(line + "\n")
    print(line, flush=True)


if __name__ == "__main__":
    main()
