"""Keras models on Tandem: build, train to an accuracy, call back into Python, save and load."""

import json

import numpy as np
import pytest
from conftest import blobs, classifier

import tandem as tf


def test_a_sequential_model_learns_and_reports_like_keras():
    x, y = blobs()
    model = classifier()
    history = model.fit(x, y, epochs=5, batch_size=32, validation_split=0.2, verbose=0)
    assert history.epoch == [0, 1, 2, 3, 4]
    assert set(history.history) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert history.history["val_accuracy"][-1] > 0.95
    loss, accuracy = model.evaluate(x, y, verbose=0)
    assert accuracy > 0.95
    assert model.evaluate(x, y, verbose=0, return_dict=True) == pytest.approx(
        {"loss": loss, "accuracy": accuracy}
    )
    predictions = model.predict(x[:10], verbose=0)
    assert isinstance(predictions, np.ndarray) and predictions.shape == (10, 2)
    np.testing.assert_allclose(predictions.sum(axis=1), np.ones(10), rtol=1e-5)


def test_the_same_seed_trains_the_same_bits():
    x, y = blobs()
    losses = []
    for _ in range(2):
        tf.keras.backend.clear_session()
        tf.random.set_seed(7)
        losses.append(classifier().fit(x, y, epochs=2, verbose=0).history["loss"])
    assert losses[0] == losses[1]


def test_a_functional_model_is_built_from_its_input():
    inputs = tf.keras.Input(shape=(8,))
    hidden = tf.keras.layers.Dense(16, activation="relu")(inputs)
    outputs = tf.keras.layers.Dense(2, activation="softmax")(hidden)
    model = tf.keras.Model(inputs, outputs, name="blobs")
    assert model.name == "blobs"
    assert model.input_shape == (None, 8) and model.output_shape == (None, 2)
    assert model.count_params() == 8 * 16 + 16 + 16 * 2 + 2
    assert [layer.name for layer in model.layers][-2:] == ["dense", "dense_1"]
    lines = []
    model.summary(print_fn=lines.append)
    assert "dense_1 (Dense)" in lines[0] and "Total params: 178" in lines[0]


def test_python_callbacks_see_every_epoch_and_batch_and_can_stop_training():
    x, y = blobs(256)

    class Recorder(tf.keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.epochs, self.batches = [], 0

        def on_epoch_end(self, epoch, logs=None):
            self.epochs.append((epoch, sorted(logs)))

        def on_train_batch_end(self, batch, logs=None):
            self.batches += 1
            assert "loss" in logs
            if self.model.optimizer.iterations >= 12:
                self.model.stop_training = True

    recorder = Recorder()
    classifier().fit(x, y, epochs=4, batch_size=32, verbose=0, callbacks=[recorder])
    assert recorder.batches == 12, "stopped after the step that asked (the 4th of epoch 1)"
    assert recorder.epochs == [(0, ["accuracy", "loss"]), (1, ["accuracy", "loss"])]


def test_an_exception_in_a_callback_stops_fit_with_it():
    class Broken(tf.keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            raise ZeroDivisionError("from the callback")

    x, y = blobs(64)
    with pytest.raises(ZeroDivisionError, match="from the callback"):
        classifier().fit(x, y, epochs=3, verbose=0, callbacks=[Broken()])


def test_keras_callbacks_by_their_names(tmp_path, capsys):
    x, y = blobs(256)
    rates = []

    def schedule(epoch, rate):
        rates.append(rate)
        return 0.01 * 0.5**epoch

    model = classifier()
    stopper = tf.keras.callbacks.EarlyStopping(
        monitor="loss", patience=0, min_delta=10.0, verbose=1
    )
    board = tf.keras.callbacks.TensorBoard(log_dir=str(tmp_path / "logs"))
    model.fit(
        x,
        y,
        epochs=5,
        verbose=0,
        callbacks=[tf.keras.callbacks.LearningRateScheduler(schedule), stopper, board],
    )
    assert stopper.stopped_epoch == 1, "no epoch improves the loss by 10: stops after the second"
    assert "Epoch 2: early stopping" in capsys.readouterr().out
    assert rates == pytest.approx([0.01, 0.01])
    assert model.optimizer.learning_rate == pytest.approx(0.005)
    assert list((tmp_path / "logs" / "train").glob("events.out.tfevents.*"))


def test_saved_models_load_with_the_same_predictions(tmp_path):
    x, y = blobs(256)
    model = classifier()
    model.fit(x, y, epochs=1, verbose=0)
    expected = model.predict(x, verbose=0)
    for path in (tmp_path / "model.keras", tmp_path / "folder"):
        model.save(str(path))
        loaded = tf.keras.models.load_model(str(path))
        np.testing.assert_allclose(loaded.predict(x, verbose=0), expected, rtol=1e-6, atol=1e-7)


def test_weights_round_trip_through_numpy():
    model = classifier()
    weights = model.get_weights()
    assert [w.shape for w in weights] == [(8, 16), (16,), (16, 2), (2,)]
    changed = [w + 1.0 for w in weights]
    model.set_weights(changed)
    for got, want in zip(model.get_weights(), changed):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="4 weights, 1 were given"):
        model.set_weights(changed[:1])


def test_fit_releases_the_gil():
    import sys
    import threading

    x, y = blobs(4096)
    model = classifier()
    counter = {"ticks": 0, "done": False}

    def tick():
        while not counter["done"]:
            counter["ticks"] += 1

    # A long switch interval: the main thread keeps the GIL up to the call, so whatever the
    # thread counts it counts while fit runs, which it can only do with the GIL released.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.2)
    thread = threading.Thread(target=tick)
    thread.start()
    ticks_before = counter["ticks"]
    try:
        model._native.fit(tf.constant(x), tf.constant(y), 32, 3, 0, [], 0.0, None, True, 0, 0, 0)
        ticks_during = counter["ticks"] - ticks_before
    finally:
        counter["done"] = True
        thread.join()
        sys.setswitchinterval(interval)
    assert ticks_during > 1000, "a Python thread ran while fit trained"


def test_the_progress_bar_goes_to_python_stdout_and_redraws_in_place_in_a_notebook(
    capsys, monkeypatch
):
    import sys
    import types

    x, y = blobs(256)
    model = classifier()
    model.fit(x, y, epochs=2, batch_size=32)
    out = capsys.readouterr().out
    assert "Epoch 2/2" in out and "8/8" in out and "accuracy:" in out
    assert "\r" not in out, "captured output is no terminal: one line per epoch"
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    model.fit(x, y, epochs=1, batch_size=2)
    out = capsys.readouterr().out
    assert out.count("\n") == 2, "the header and the bar, redrawn in place with carriage returns"
    assert "\r" in out and "128/128" in out


def test_to_json_and_model_from_json_rebuild_the_architecture():
    model = classifier()
    text = model.to_json()
    description = json.loads(text)
    assert description["class_name"] == "Functional"
    assert [layer["class_name"] for layer in description["config"]["layers"]] == [
        "InputLayer",
        "Dense",
        "Dense",
    ]
    rebuilt = tf.keras.models.model_from_json(text)
    assert [w.shape for w in rebuilt.get_weights()] == [w.shape for w in model.get_weights()]
    rebuilt.set_weights(model.get_weights())
    x, _ = blobs(16)
    np.testing.assert_allclose(rebuilt.predict(x, verbose=0), model.predict(x, verbose=0))
    with pytest.raises(tf.errors.InvalidArgumentError, match="model_from_json: not JSON"):
        tf.keras.models.model_from_json("{not json")


def test_tensorflow_reads_to_json(tmp_path):
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("TensorFlow is in the bench group (scripts/python-env.sh bench)")
    model = classifier()
    (tmp_path / "model.json").write_text(model.to_json())
    read = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, tensorflow as tf; "
            "m = tf.keras.models.model_from_json(open(sys.argv[1]).read()); "
            "print(m.count_params(), [l.__class__.__name__ for l in m.layers])",
            str(tmp_path / "model.json"),
        ],
        capture_output=True,
        text=True,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"},
    )
    assert read.returncode == 0, read.stderr[-3000:]
    assert read.stdout.split("[")[0].strip() == str(model.count_params())
    assert "'Dense', 'Dense'" in read.stdout


def test_model_checkpoint_saves_each_improvement_under_its_formatted_name(tmp_path):
    x, y = blobs(256)
    model = classifier()
    checkpoint = tf.keras.callbacks.ModelCheckpoint(
        str(tmp_path / "model-{epoch:02d}.keras"), monitor="loss", save_best_only=True
    )
    history = model.fit(x, y, epochs=3, verbose=0, callbacks=[checkpoint])
    losses = history.history["loss"]
    improved = [e + 1 for e, loss in enumerate(losses) if loss == min(losses[: e + 1])]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"model-{e:02d}.keras" for e in improved]
    last = tf.keras.models.load_model(str(tmp_path / f"model-{improved[-1]:02d}.keras"))
    np.testing.assert_allclose(last.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-6)


def test_backup_and_restore_resumes_an_interrupted_fit_to_the_uninterrupted_weights(tmp_path):
    x, y = blobs(256)

    def fresh():
        tf.keras.backend.clear_session()
        tf.random.set_seed(5)
        return classifier()

    uninterrupted = fresh()
    uninterrupted.fit(x, y, epochs=4, verbose=0)

    class Preempted(tf.keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                raise RuntimeError("preempted")

    backup_dir = tmp_path / "backup"
    backup = tf.keras.callbacks.BackupAndRestore(str(backup_dir))
    model = fresh()
    with pytest.raises(RuntimeError, match="preempted"):
        model.fit(x, y, epochs=4, verbose=0, callbacks=[backup, Preempted()])
    assert backup_dir.is_dir(), "the backup stays after a failed fit"

    resumed = fresh()  # a new process would start from fresh weights
    history = resumed.fit(x, y, epochs=4, verbose=0, callbacks=[backup])
    assert history.epoch == [2, 3], "the two epochs the backup had not done"
    for got, want in zip(resumed.get_weights(), uninterrupted.get_weights()):
        np.testing.assert_array_equal(got, want)
    assert not backup_dir.exists(), "deleted once fit ends normally"


def test_learning_rate_schedules_drive_the_optimizer_step_by_step():
    cosine = tf.keras.optimizers.schedules.CosineDecay(0.01, decay_steps=16)
    assert cosine(0) == pytest.approx(0.01) and cosine(8) == pytest.approx(0.005)
    assert cosine(16) == pytest.approx(0.0) and cosine(100) == pytest.approx(0.0)
    warm = tf.keras.optimizers.schedules.CosineDecay(
        0.0, decay_steps=10, warmup_target=0.1, warmup_steps=4
    )
    assert [round(warm(s), 6) for s in (0, 2, 4)] == [0.0, 0.05, 0.1]
    stairs = tf.keras.optimizers.schedules.ExponentialDecay(0.1, 4, 0.5, staircase=True)
    assert [stairs(s) for s in (0, 3, 4, 9)] == pytest.approx([0.1, 0.1, 0.05, 0.025])
    with pytest.raises(NotImplementedError, match="staircase=False"):
        tf.keras.optimizers.schedules.ExponentialDecay(0.1, 4, 0.5)
    x, y = blobs(256)
    model = tf.keras.Sequential([tf.keras.layers.Dense(2, activation="softmax", input_shape=(8,))])
    optimizer = tf.keras.optimizers.Adam(learning_rate=cosine)
    model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy")
    model.fit(x, y, epochs=1, batch_size=32, verbose=0)  # 8 updates
    assert optimizer.iterations == 8
    assert optimizer.learning_rate == pytest.approx(cosine(8))


def test_a_subclassed_model_is_built_from_its_call_and_trains():
    class Classifier(tf.keras.Model):
        def __init__(self):
            super().__init__()
            self.hidden = tf.keras.layers.Dense(16, activation="relu")
            self.out = tf.keras.layers.Dense(2, activation="softmax")

        def call(self, inputs, training=None):
            return self.out(self.hidden(inputs))

    model = Classifier()
    with pytest.raises(ValueError, match="not yet been built"):
        model.summary()
    model.compile(
        optimizer=tf.keras.optimizers.Adam(0.01),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    x, y = blobs(512)
    history = model.fit(x, y, epochs=3, verbose=0)
    assert history.history["accuracy"][-1] > 0.95
    assert model.name == "classifier" and model.count_params() == 8 * 16 + 16 + 16 * 2 + 2
    assert model.predict(x[:4], verbose=0).shape == (4, 2)

    class UsesOps(tf.keras.Model):
        def call(self, inputs):
            return tf.nn.relu(inputs) * 2.0

    with pytest.raises(NotImplementedError, match="use layers"):
        UsesOps().predict(x[:4], verbose=0)
