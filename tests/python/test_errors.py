"""Errors arrive as TensorFlow's classes with Tandem's messages; what is missing says so."""

import pytest

import tandem as tf


def test_bad_arguments_are_invalid_argument_errors_and_value_errors():
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        tf.reshape(x, [3])
    assert isinstance(caught.value, ValueError)
    assert "(2, 2)" in str(caught.value) and "(3,)" in caught.value.message


def test_a_missing_model_file_is_not_found(tmp_path):
    with pytest.raises(tf.errors.NotFoundError) as caught:
        tf.keras.models.load_model(str(tmp_path / "absent.keras"))
    assert isinstance(caught.value, FileNotFoundError)
    assert "absent.keras" in str(caught.value)


def test_what_tandem_lacks_raises_not_implemented_naming_the_tensorflow_symbol():
    with pytest.raises(NotImplementedError, match=r"tf\.linalg"):
        tf.linalg  # noqa: B018
    with pytest.raises(NotImplementedError, match=r"tf\.keras\.layers\.LSTM"):
        tf.keras.layers.LSTM(4)
    with pytest.raises(NotImplementedError, match=r"Adam\(amsgrad=True\)"):
        tf.keras.optimizers.Adam(amsgrad=True)
    assert not hasattr(tf, "linalg"), "introspection sees the name as absent"


def test_an_argument_tandem_lacks_names_the_layer_and_the_argument():
    with pytest.raises(tf.errors.InvalidArgumentError, match="Dense.*kernel_regularizer"):
        tf.keras.layers.Dense(4, kernel_regularizer="l2")
    tf.keras.layers.Dense(4, kernel_regularizer=None)  # Keras' default is accepted
