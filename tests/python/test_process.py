"""The package in a process of its own: Ctrl-C during fit, and memory over many fits."""

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np

import tandem as tf

CHILD_FIT = textwrap.dedent("""
    import sys
    import numpy as np
    import tandem as tf

    x = np.random.default_rng(0).normal(size=(4096, 32)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    model = tf.keras.Sequential([tf.keras.layers.Dense(64, activation="relu", input_shape=(32,)),
                                 tf.keras.layers.Dense(2, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")

    class Started(tf.keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 0:
                print("started", flush=True)

    try:
        model.fit(x, y, epochs=100000, batch_size=32, verbose=0, callbacks=[Started()])
        print("fit ended without the interrupt", flush=True)
    except KeyboardInterrupt:
        steps = model.optimizer.iterations
        finite = all(np.isfinite(w).all() for w in model.get_weights())
        predicted = model.predict(x[:4], verbose=0).shape
        print(f"interrupted after {steps} steps; finite={finite}; predict={predicted}", flush=True)
""")


def test_ctrl_c_stops_fit_at_a_step_with_keyboard_interrupt_and_the_model_intact():
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD_FIT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert child.stdout.readline().strip() == "started"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    line = out.strip()
    assert line.startswith("interrupted after "), (out, err)
    steps = int(line.split()[2])
    assert 128 <= steps < 100000 * 128, "stopped after the first epoch, long before the end"
    assert "finite=True" in line and "predict=(4, 2)" in line


def resident_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_two_hundred_fits_hold_memory_flat():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 16)).astype(np.float32)
    y = rng.integers(0, 4, 256)

    def one_fit():
        tf.keras.backend.clear_session()
        model = tf.keras.Sequential(
            [
                tf.keras.layers.Dense(32, activation="relu", input_shape=(16,)),
                tf.keras.layers.Dense(4, activation="softmax"),
            ]
        )
        model.compile(
            optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"]
        )
        model.fit(x, y, epochs=1, batch_size=64, verbose=0)
        model.predict(x, verbose=0)

    for _ in range(20):  # allocator pools, compiled-step caches and imports settle
        one_fit()
    settled = resident_bytes()
    for _ in range(180):
        one_fit()
    growth = resident_bytes() - settled
    assert growth < 16 * 2**20, f"resident memory grew {growth / 2**20:.1f} MiB over 180 fits"
