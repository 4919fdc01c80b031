"""Tensors: TensorFlow's conversions, the operators, and memory shared without copies."""

import ml_dtypes
import numpy as np
import pytest

import tandem as tf


def test_python_values_convert_as_tensorflow_converts_them():
    assert tf.constant(1.5).dtype == tf.float32
    assert tf.constant(3).dtype == tf.int32
    assert tf.constant([True, False]).dtype == tf.bool
    assert tf.constant(np.zeros(2, np.float64)).dtype == tf.float64  # numpy keeps its dtype
    assert tf.constant([1, 2], dtype="float32").dtype == "float32"
    filled = tf.constant(7.0, shape=[2, 3])
    assert filled.shape == (2, 3) and filled.shape.as_list() == [2, 3]
    np.testing.assert_array_equal(filled.numpy(), np.full((2, 3), 7.0, np.float32))


def test_operators_and_math_match_numpy():
    a_np = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    b_np = np.linspace(1, 2, 3, dtype=np.float32)
    a, b = tf.constant(a_np), tf.constant(b_np)
    np.testing.assert_allclose((a + b).numpy(), a_np + b_np)
    np.testing.assert_allclose((a - 1).numpy(), a_np - 1)
    np.testing.assert_allclose((2 * a).numpy(), 2 * a_np)
    np.testing.assert_allclose((a / b).numpy(), a_np / b_np, rtol=1e-6)
    np.testing.assert_allclose((-a).numpy(), -a_np)
    np.testing.assert_allclose((a @ tf.transpose(a)).numpy(), a_np @ a_np.T, rtol=1e-6)
    np.testing.assert_allclose(tf.reduce_sum(a, axis=1).numpy(), a_np.sum(axis=1), rtol=1e-6)
    np.testing.assert_allclose(tf.reduce_mean(a).numpy(), a_np.mean(), rtol=1e-6)
    np.testing.assert_allclose(tf.nn.relu(a).numpy(), np.maximum(a_np, 0))
    np.testing.assert_allclose(tf.math.exp(a).numpy(), np.exp(a_np), rtol=1e-6)
    np.testing.assert_array_equal(tf.argmax(a, axis=1).numpy(), a_np.argmax(axis=1))
    softmax = tf.nn.softmax(a).numpy()
    np.testing.assert_allclose(softmax.sum(axis=-1), np.ones(2), rtol=1e-6)
    np.testing.assert_array_equal(tf.reshape(a, [3, 2]).numpy(), a_np.reshape(3, 2))
    np.testing.assert_array_equal(tf.cast(a, tf.int32).numpy(), a_np.astype(np.int32))
    np.testing.assert_array_equal((a > 0).numpy(), a_np > 0)
    np.testing.assert_array_equal(tf.where(a > 0, a, 0.0).numpy(), np.where(a_np > 0, a_np, 0))
    np.testing.assert_array_equal(tf.concat([a, a], axis=0).numpy(), np.concatenate([a_np] * 2))
    assert float(tf.constant([3.5])) == 3.5


def test_numpy_shares_the_tensors_memory():
    tensor = tf.constant(np.arange(12, dtype=np.float32).reshape(3, 4))
    array = tensor.numpy()
    assert array.ctypes.data == tensor.data_address()
    assert np.asarray(tensor).ctypes.data == tensor.data_address()
    variable = tf.Variable(tensor)
    view = variable.numpy()
    variable.assign_add(1.0)
    assert view[0, 0] == 1.0, "a view taken before the write sees it"


def test_from_dlpack_shares_numpy_memory_both_ways():
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    tensor = tf.experimental.dlpack.from_dlpack(array)
    assert tensor.data_address() == array.ctypes.data
    array[1, 2] = 42.0
    assert tensor.numpy()[1, 2] == 42.0
    back = np.from_dlpack(tensor)
    assert back.ctypes.data == array.ctypes.data
    del array, back
    np.testing.assert_array_equal(tensor.numpy().ravel()[:5], np.arange(5))  # still alive


def test_a_strided_array_is_refused_with_the_fix():
    array = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    with pytest.raises(tf.errors.InvalidArgumentError, match="ascontiguousarray"):
        tf.experimental.dlpack.from_dlpack(array)


def test_bfloat16_crosses_as_ml_dtypes_bfloat16():
    values = np.array([1.0, -2.5, 3.0e38], dtype=ml_dtypes.bfloat16)
    tensor = tf.constant(values)
    assert tensor.dtype == tf.bfloat16
    assert tensor.numpy().dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(tensor.numpy().astype(np.float32), values.astype(np.float32))
    as_f32 = tf.cast(tensor, tf.float32).numpy()
    np.testing.assert_array_equal(as_f32, values.astype(np.float32))


def test_pytorch_shares_memory_both_ways():
    torch = pytest.importorskip("torch", reason="PyTorch is in the bench group (python-env.sh)")
    tensor = tf.constant(np.arange(8, dtype=np.float32))
    from_tandem = torch.from_dlpack(tensor)
    assert from_tandem.data_ptr() == tensor.data_address()
    source = torch.arange(4, dtype=torch.int64)
    into_tandem = tf.experimental.dlpack.from_dlpack(source)
    assert into_tandem.data_address() == source.data_ptr()
    assert into_tandem.dtype == tf.int64
    source.add_(10)
    np.testing.assert_array_equal(into_tandem.numpy(), np.arange(4) + 10)


def test_indexing_matches_numpy_and_carries_gradients():
    array = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    tensor = tf.constant(array)
    for index in [
        0,
        -1,
        (1, 2),
        (slice(None), 1),
        (..., 0),
        (0, slice(1, 3)),
        (None, 1),
        (slice(-2, None), ..., slice(0, 2)),
    ]:
        np.testing.assert_array_equal(tensor[index].numpy(), array[index], err_msg=str(index))
    with pytest.raises(IndexError, match="out of range"):
        tensor[2]
    with pytest.raises(NotImplementedError, match="strided_slice"):
        tensor[::2]
    x = tf.Variable(array)
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(x[1, :, 2:])
    expected = np.zeros_like(array)
    expected[1, :, 2:] = 1.0
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), expected)


def test_tf_device_places_new_tensors_with_soft_placement():
    gpus = tf.config.list_physical_devices("GPU")
    with tf.device("/CPU:0"):
        x = tf.constant([1.0])
    assert x.device == "/job:localhost/replica:0/task:0/device:CPU:0"
    with tf.device("/GPU:0"):
        y = tf.zeros([2]) + tf.random.normal([2])
    expected = "GPU:0" if gpus else "CPU:0"
    assert y.device.endswith(expected), y.device
    with pytest.raises(ValueError, match="unknown device"):
        with tf.device("/XPU:0"):
            pass


def test_device_placement_logging_names_each_op_and_its_device(capfd):
    a = tf.constant([[1.0, 2.0]])
    tf.debugging.set_log_device_placement(True)
    try:
        tf.matmul(a, tf.transpose(a))
    finally:
        tf.debugging.set_log_device_placement(False)
    tf.matmul(a, tf.transpose(a))
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("Executing op matmul")]
    assert lines == ["Executing op matmul in device /job:localhost/replica:0/task:0/device:CPU:0"]
    assert "Executing op transpose" in err
