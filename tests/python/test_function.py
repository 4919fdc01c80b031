"""tf.function: a custom training step traced once per signature and run compiled."""

import numpy as np
import pytest
from conftest import blobs

import tandem as tf


def train(compiled: bool):
    """Three epochs of a custom loop on blobs, eager or under tf.function; the losses, the
    optimizer's update count and how often the Python step ran."""
    tf.keras.backend.clear_session()
    tf.random.set_seed(3)
    model = tf.keras.Sequential(
        [tf.keras.layers.Dense(16, activation="relu", input_shape=(8,)), tf.keras.layers.Dense(2)]
    )
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = tf.keras.optimizers.Adam(0.01)
    python_calls = []

    def train_step(x, y):
        python_calls.append(1)
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        gradients = tape.gradient(loss, model.trainable_weights)
        optimizer.apply_gradients(zip(gradients, model.trainable_weights))
        return {"loss": loss}

    step = tf.function(train_step) if compiled else train_step
    x, y = blobs(500)  # batches of 32 and a last one of 20: two signatures
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
    losses = [float(step(xb, yb)["loss"]) for _ in range(3) for xb, yb in dataset]
    return losses, optimizer.iterations, len(python_calls), step


def test_a_compiled_custom_step_traces_once_per_signature_and_trains_like_the_eager_one():
    eager_losses, eager_updates, eager_calls, _ = train(compiled=False)
    losses, updates, calls, step = train(compiled=True)
    assert eager_calls == eager_updates == updates == 3 * 16
    assert calls == 2, "traced for the batches of 32 and for the last one of 20, then compiled"
    assert step.compiles == 2
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    assert np.mean(losses[-16:]) < 0.2 * np.mean(losses[:16])


def test_python_arguments_are_part_of_the_signature():
    traces = []

    @tf.function
    def scaled(x, factor):
        traces.append(factor)
        return x * factor

    x = tf.constant([1.0, 2.0])
    np.testing.assert_array_equal(scaled(x, 2.0).numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(scaled(x, 2.0).numpy(), [2.0, 4.0])
    np.testing.assert_array_equal(scaled(x, 3.0).numpy(), [3.0, 6.0])
    assert traces == [2.0, 3.0]


def test_reading_a_value_inside_the_traced_function_is_an_error_naming_it():
    @tf.function
    def branchy(x):
        if float(tf.reduce_sum(x)) > 0:  # a Python branch on a value: TensorFlow refuses too
            return x
        return -x

    with pytest.raises(Exception, match="symbolic|traced"):
        branchy(tf.constant([1.0]))
