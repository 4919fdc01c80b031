"""GradientTape: gradients of the op table's rules, and a custom training loop."""

import numpy as np
import pytest
from conftest import blobs

import tandem as tf


def test_gradients_of_a_function_of_watched_tensors():
    x = tf.constant([1.0, -2.0, 3.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(x * x * x)
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), 3 * np.array([1.0, 4.0, 9.0]))


def test_variables_are_watched_and_unconnected_sources_get_none():
    w = tf.Variable([[1.0, 2.0], [3.0, 4.0]])
    unused = tf.Variable([5.0])
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.matmul(tf.constant([[1.0, 1.0]]), w))
    gradient_w, gradient_unused = tape.gradient(loss, [w, unused])
    np.testing.assert_allclose(gradient_w.numpy(), np.full((2, 2), 0.5))
    assert gradient_unused is None


def test_a_tape_gives_gradients_once_unless_persistent():
    x = tf.Variable(3.0)
    with tf.GradientTape() as tape:
        y = x * x
    assert float(tape.gradient(y, x)) == 6.0
    with pytest.raises(tf.errors.InvalidArgumentError, match="persistent=True"):
        tape.gradient(y, x)
    with tf.GradientTape(persistent=True) as tape:
        y = x * x
        z = y * x
    assert float(tape.gradient(y, x)) == 6.0
    assert float(tape.gradient(z, x)) == 27.0


def test_a_custom_training_loop_learns():
    features, labels = blobs(512)
    model = tf.keras.Sequential(
        [
            tf.keras.layers.Dense(16, activation="relu", input_shape=(8,)),
            tf.keras.layers.Dense(2),
        ]
    )
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = tf.keras.optimizers.Adam(0.01)
    dataset = tf.data.Dataset.from_tensor_slices((features, labels)).shuffle(512, seed=0).batch(32)
    losses = []
    for _ in range(3):
        for x, y in dataset:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            gradients = tape.gradient(loss, model.trainable_weights)
            optimizer.apply_gradients(zip(gradients, model.trainable_weights))
            losses.append(float(loss))
    assert optimizer.iterations == 3 * 16
    assert np.mean(losses[-16:]) < 0.5 * np.mean(losses[:16])
    predictions = np.argmax(model.predict(features, verbose=0), axis=1)
    assert (predictions == labels).mean() > 0.95
