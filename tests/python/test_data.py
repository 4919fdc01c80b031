"""tf.data on Tandem's pipelines: structure, stages, Python map functions, and fit."""

import numpy as np
import pytest
from conftest import blobs, classifier

import tandem as tf


def test_slices_keep_their_structure_and_values():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    y = np.arange(6)
    pairs = list(tf.data.Dataset.from_tensor_slices((x, y)))
    assert len(pairs) == 6 and isinstance(pairs[0], tuple)
    np.testing.assert_array_equal(pairs[4][0].numpy(), x[4])
    assert int(pairs[4][1]) == 4
    records = list(tf.data.Dataset.from_tensor_slices({"a": x, "b": y}).as_numpy_iterator())
    assert sorted(records[2]) == ["a", "b"] and records[2]["b"] == 2
    singles = list(tf.data.Dataset.from_tensor_slices(y).as_numpy_iterator())
    assert singles == list(range(6))


def test_batch_take_skip_repeat_and_cardinality():
    dataset = tf.data.Dataset.from_tensor_slices(np.arange(10))
    batches = [b.numpy().tolist() for b in dataset.batch(4)]
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert len(list(dataset.batch(4, drop_remainder=True))) == 2
    assert list(dataset.skip(3).take(2).as_numpy_iterator()) == [3, 4]
    assert int(dataset.repeat(3).cardinality()) == 30
    assert int(dataset.repeat().cardinality()) == tf.data.INFINITE_CARDINALITY
    assert len(dataset.batch(3)) == 4


def test_shuffle_is_a_permutation_that_changes_every_pass_and_repeats_with_its_seed():
    dataset = tf.data.Dataset.from_tensor_slices(np.arange(100)).shuffle(100, seed=3)
    first, second = list(dataset.as_numpy_iterator()), list(dataset.as_numpy_iterator())
    assert sorted(first) == list(range(100)) and first != list(range(100))
    assert first != second, "reshuffled each iteration"
    again = tf.data.Dataset.from_tensor_slices(np.arange(100)).shuffle(100, seed=3)
    assert list(again.as_numpy_iterator()) == first


def test_a_python_map_function_sees_the_elements_structure():
    dataset = tf.data.Dataset.from_tensor_slices((np.arange(8, dtype=np.float32), np.arange(8)))
    mapped = dataset.map(lambda x, y: (x * 2.0, y + 1), num_parallel_calls=tf.data.AUTOTUNE)
    values = list(mapped.as_numpy_iterator())
    assert [float(x) for x, _ in values] == [2.0 * i for i in range(8)]
    assert [int(y) for _, y in values] == [i + 1 for i in range(8)]


def test_an_error_in_a_map_function_reaches_the_consumer():
    def broken(x):
        raise ValueError("bad element")

    dataset = tf.data.Dataset.from_tensor_slices(np.arange(4)).map(broken)
    with pytest.raises(Exception, match="bad element"):
        list(dataset)


def test_fit_and_evaluate_take_datasets_and_validation_data():
    x, y = blobs(1024, 0)
    x_val, y_val = blobs(256, 1)
    train = (
        tf.data.Dataset.from_tensor_slices((x, y))
        .shuffle(1024, seed=1)
        .batch(32)
        .prefetch(tf.data.AUTOTUNE)
    )
    model = classifier()
    # float64 validation arrays (numpy's default) are taken as float32, as fit's x is
    history = model.fit(
        train, epochs=3, validation_data=(x_val.astype(np.float64), y_val), verbose=0
    )
    assert history.history["val_accuracy"][-1] > 0.95
    loss, accuracy = model.evaluate(
        tf.data.Dataset.from_tensor_slices((x_val, y_val)).batch(64), verbose=0
    )
    assert accuracy == pytest.approx(history.history["val_accuracy"][-1])
    with pytest.raises(ValueError, match="no y, batch_size or validation_split"):
        model.fit(train, y, epochs=1, verbose=0)
