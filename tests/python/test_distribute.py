"""tf.distribute: the strategies of this machine, the TPU -> GPUs -> GPU -> CPU fallback that
TensorFlow users write, and training under a strategy's scope."""

import pytest
from conftest import blobs, classifier

import tandem as tf


def choose_strategy():
    """The fallback as TensorFlow users write it, unchanged."""
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver()
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    except ValueError:
        gpus = tf.config.list_logical_devices("GPU")
        if len(gpus) > 1:
            return tf.distribute.MirroredStrategy()
        if gpus:
            return tf.distribute.OneDeviceStrategy("/gpu:0")
        return tf.distribute.get_strategy()


def test_the_usual_fallback_picks_what_this_machine_has():
    strategy = choose_strategy()
    gpus = tf.config.list_physical_devices("GPU")
    assert tf.test.is_gpu_available() == bool(gpus)
    if not gpus and not isinstance(strategy, tf.distribute.TPUStrategy):
        assert strategy is tf.distribute.get_strategy()
        assert strategy.num_replicas_in_sync == 1


def test_without_a_tpu_the_resolver_raises_value_error_as_tensorflow_does():
    reason = tf._native.tpu_unavailable_reason()
    if not reason:
        pytest.skip("this machine has a usable TPU")
    with pytest.raises(ValueError, match="no TPU to connect to"):
        tf.distribute.cluster_resolver.TPUClusterResolver()


def test_mirrored_on_a_machine_without_gpus_is_one_cpu_replica():
    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has GPUs")
    strategy = tf.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 1
    assert strategy.description == "OneDevice(cpu)"


def test_a_model_compiled_in_a_scope_trains_on_global_batches():
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    assert tf.distribute.get_strategy() is not strategy
    with strategy.scope():
        assert tf.distribute.get_strategy() is strategy
        model = classifier()
    assert not tf.distribute.has_strategy()
    x, y = blobs(512)
    batch = 32 * strategy.num_replicas_in_sync
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(batch)
    history = model.fit(dataset, epochs=3, verbose=0)
    assert history.history["accuracy"][-1] > 0.95
    with pytest.raises(ValueError, match="unknown device"):
        tf.distribute.OneDeviceStrategy("/tpu:0")


def test_a_custom_loop_under_a_one_replica_strategy_runs_as_written():
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    x, y = blobs(64)
    dataset = strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
    )

    def step(xb, yb):
        return tf.reduce_sum(xb, axis=1)

    totals = [
        strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step, args=batch), axis=0)
        for batch in dataset
    ]
    assert sum(float(t) for t in totals) == pytest.approx(float(x.sum()), rel=1e-5)
