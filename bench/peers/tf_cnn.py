"""Tandem's main job in TensorFlow 2.15 / Keras, trained the way a Keras user does (model.fit on
NumPy arrays, shuffled), timed with a callback at the end of every training step.

    .venv/bin/python bench/peers/tf_cnn.py --epochs 1 --batch-size 32 --threads 2
"""

import time

import common


def step_timing_callback(tf, clock, num_examples, batch_size):
    """A Keras callback that feeds `clock` at the end of every training step and records each
    epoch's wall-clock seconds in its `epoch_seconds`. Built here because its base class needs
    TensorFlow, which is imported only after the thread variables are set."""

    class StepTiming(tf.keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            # Leaves the step's outputs as tensors: asking for NumPy logs would add a copy per
            # step that a user's fit() does not have.
            self._supports_tf_logs = True
            self.epoch_seconds = []
            self.epoch_started = None

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch_started = time.perf_counter()
            clock.start_epoch()

        def on_train_batch_end(self, batch, logs=None):
            # Keras' last batch of an epoch holds the remainder.
            clock.step_done(min(batch_size, num_examples - batch * batch_size))

        def on_epoch_end(self, epoch, logs=None):
            self.epoch_seconds.append(time.perf_counter() - self.epoch_started)

    return StepTiming()


def main():
    args = common.parse_args("TensorFlow/Keras")
    common.limit_threads_env(args.threads)
    # After limit_threads_env: TensorFlow reads the variables on import.
    import keras
    import tensorflow as tf

    import tf_zoo

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.keras.utils.set_random_seed(args.seed)

    train_images, train_labels = common.load_fashion_mnist(args.data_dir, "train")
    model = tf_zoo.cnn(input_shape=(28, 28, 1), num_classes=10)
    model.compile(
        optimizer=tf.keras.optimizers.Adam(learning_rate=1e-3),
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        jit_compile=args.compile,
    )
    clock = common.StepClock(args.warmup_steps)
    timing = step_timing_callback(tf, clock, len(train_images), args.batch_size)
    model.fit(
        train_images,
        train_labels,
        batch_size=args.batch_size,
        epochs=args.epochs,
        shuffle=True,
        verbose=0,
        callbacks=[timing],
    )

    test_accuracy = None
    if not args.no_evaluate:
        test_images, test_labels = common.load_fashion_mnist(args.data_dir, "t10k")
        _, test_accuracy = model.evaluate(test_images, test_labels, batch_size=1000, verbose=0)
    common.emit(
        args,
        framework="tensorflow-xla" if args.compile else "tensorflow",
        version=f"{tf.__version__} (keras {keras.__version__})",
        clock=clock,
        epoch_seconds=timing.epoch_seconds,
        test_accuracy=test_accuracy,
        layout="NHWC",
    )


if __name__ == "__main__":
    main()
