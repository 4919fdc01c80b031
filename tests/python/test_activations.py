"""tf.keras.activations and tf.nn's activations: Keras 2.15's definitions, by name and as
functions, and in a layer's activation= argument."""

import numpy as np
import pytest

import tandem as tf

X = np.array([-30, -7, -2.6, -1, -0.3, 0, 0.4, 1, 2.4, 5.9, 6.5, 30], np.float32)


def softplus(x):
    return np.log1p(np.exp(x.astype(np.float64)))


DEFINITIONS = {
    "elu": lambda x: np.where(x > 0, x, np.expm1(x)),
    "selu": lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x)),
    "softplus": softplus,
    "softsign": lambda x: x / (1 + np.abs(x)),
    "swish": lambda x: x / (1 + np.exp(-x.astype(np.float64))),
    "exponential": lambda x: np.exp(x.astype(np.float64)),
    "hard_sigmoid": lambda x: np.clip(0.2 * x + 0.5, 0, 1),
    "mish": lambda x: x * np.tanh(softplus(x)),
}


@pytest.mark.parametrize("name", sorted(DEFINITIONS))
def test_keras_activations_follow_their_definitions(name):
    want = DEFINITIONS[name](X)
    for function in (getattr(tf.keras.activations, name), tf.keras.activations.get(name)):
        np.testing.assert_allclose(function(X).numpy(), want, rtol=2e-6, atol=1e-6)


def test_tf_nn_has_tensorflows_activations():
    np.testing.assert_allclose(tf.nn.relu6(X).numpy(), np.clip(X, 0, 6))
    np.testing.assert_allclose(tf.nn.leaky_relu(X).numpy(), np.where(X > 0, X, 0.2 * X))
    np.testing.assert_allclose(tf.nn.silu(X).numpy(), DEFINITIONS["swish"](X), rtol=2e-6)
    np.testing.assert_allclose(tf.nn.elu(X).numpy(), DEFINITIONS["elu"](X), rtol=2e-6, atol=1e-7)
    with pytest.raises(NotImplementedError, match="alpha=0.1"):
        tf.nn.leaky_relu(X, alpha=0.1)


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(Exception, match="unknown activation 'hard_swish'.*mish, relu6"):
        tf.keras.activations.get("hard_swish")
    assert tf.keras.activations.get(None) is tf.keras.activations.linear


def test_a_layer_takes_the_names_keras_does():
    layer = tf.keras.layers.Dense(3, activation="silu")
    x = np.random.default_rng(0).normal(size=(4, 5)).astype(np.float32)
    y = layer(x).numpy()
    kernel, bias = layer.get_weights()
    np.testing.assert_allclose(y, DEFINITIONS["swish"](x @ kernel + bias), rtol=1e-5, atol=1e-6)
