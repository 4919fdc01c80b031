"""The main job's CNN on Fashion-MNIST, written as a TensorFlow 2.15 user writes it.

The same script runs on TensorFlow or on Tandem: the only difference is the import, chosen with
--framework (``import tensorflow as tf`` or ``import tandem as tf``). Both read the same arrays
from Debian's dataset-fashion-mnist files (TensorFlow's own loader would download them). The
script trains with tf.data from numpy arrays, a validation set split off the training set, and
TensorBoard logs, then prints one JSON line: test accuracy and loss, and training samples/s.

    PYTHONPATH=build/python .venv/bin/python examples/python/fashion_mnist_cnn.py --epochs 5
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import json
import pathlib
import time

import numpy as np

DATA = pathlib.Path("/usr/share/datasets/fashion-mnist")


def read_idx(path: pathlib.Path) -> np.ndarray:
    """An IDX file (gzip or plain) of unsigned bytes as an array of its shape."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    dims = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load_fashion_mnist() -> tuple:
    def split(name: str) -> tuple:
        images = read_idx(DATA / f"{name}-images-idx3-ubyte.gz")
        return images[..., None].astype(np.float32) / 255.0, read_idx(
            DATA / f"{name}-labels-idx1-ubyte.gz"
        )

    return split("train"), split("t10k")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--framework", choices=["tandem", "tensorflow"], default="tandem")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: every core)")
    parser.add_argument("--logdir", default="", help="TensorBoard logs here (fit only)")
    parser.add_argument(
        "--loop",
        choices=["fit", "custom"],
        default="fit",
        help="model.fit, or a custom loop: GradientTape inside tf.function",
    )
    args = parser.parse_args()

    tf = importlib.import_module(args.framework)
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.random.set_seed(42)

    (x_train, y_train), (x_test, y_test) = load_fashion_mnist()
    held_out = len(x_train) // 10
    train = (
        tf.data.Dataset.from_tensor_slices((x_train[:-held_out], y_train[:-held_out]))
        .shuffle(10000, seed=0)
        .batch(args.batch_size)
        .prefetch(tf.data.AUTOTUNE)
    )
    validation = tf.data.Dataset.from_tensor_slices(
        (x_train[-held_out:], y_train[-held_out:])
    ).batch(args.batch_size)

    model = tf.keras.Sequential(
        [
            tf.keras.layers.Conv2D(32, 3, activation="relu", input_shape=(28, 28, 1)),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Conv2D(64, 3, activation="relu"),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(64, activation="relu"),
            tf.keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer=tf.keras.optimizers.Adam(1e-3),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )

    epoch_seconds = []
    if args.loop == "fit":

        class EpochTimer(tf.keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                self.start = time.perf_counter()

            def on_epoch_end(self, epoch, logs=None):
                epoch_seconds.append(time.perf_counter() - self.start)

        callbacks = [EpochTimer()]
        if args.logdir:
            callbacks.append(tf.keras.callbacks.TensorBoard(log_dir=args.logdir))
        history = model.fit(
            train, epochs=args.epochs, validation_data=validation, callbacks=callbacks, verbose=2
        )
        val_accuracy = history.history["val_accuracy"][-1]
    else:
        loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        optimizer = model.optimizer

        @tf.function
        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))
            return loss

        for epoch in range(args.epochs):
            start = time.perf_counter()
            for x, y in train:
                loss = train_step(x, y)
            epoch_seconds.append(time.perf_counter() - start)
            print(f"epoch {epoch + 1}: last loss {float(loss):.4f}", flush=True)
        val_accuracy = model.evaluate(validation, verbose=0)[1]
    test_loss, test_accuracy = model.evaluate(x_test, y_test, verbose=0)
    # Epochs after the first (which pays for tracing and warm-up); fit's include validation.
    steady = epoch_seconds[1:] or epoch_seconds
    report = {
        "framework": args.framework,
        "epochs": args.epochs,
        "test_accuracy": float(test_accuracy),
        "test_loss": float(test_loss),
        "val_accuracy": float(val_accuracy),
        "loop": args.loop,
        "samples_per_sec": (len(x_train) - held_out) / float(np.median(steady)),
        "epoch_seconds": epoch_seconds,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
