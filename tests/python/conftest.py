"""pytest for the Python package: `make test` runs it against <build>/python (PYTHONPATH)."""

import numpy as np
import pytest

import tandem as tf


@pytest.fixture(autouse=True)
def fresh_session():
    """Every test starts with layer names from dense, dense_1, ... and the default seed, on two
    threads: the automatic count follows the machine's load, and comparisons of bits between
    two runs hold at one count."""
    tf.keras.backend.clear_session()
    tf.random.set_seed(42)
    tf.config.threading.set_intra_op_parallelism_threads(2)
    yield


def blobs(n=1024, seed=0):
    """Two Gaussian blobs in 8 dimensions, labelled 0 and 1: a task a small model learns to
    ~100% accuracy in a few epochs."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    centers = np.where(labels[:, None] == 1, 1.5, -1.5)
    features = (centers + rng.normal(size=(n, 8))).astype(np.float32)
    return features, labels.astype(np.int64)


def classifier():
    """Dense 16 relu, Dense 2 softmax, Adam at 0.01: learns blobs() in a few epochs."""
    model = tf.keras.Sequential(
        [
            tf.keras.layers.Dense(16, activation="relu", input_shape=(8,)),
            tf.keras.layers.Dense(2, activation="softmax"),
        ]
    )
    model.compile(
        optimizer=tf.keras.optimizers.Adam(0.01),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    return model
