"""Keras models for tests/cli/keras_model_test.cpp: written and trained by TensorFlow 2.15.

    python keras_models.py DIR EPOCHS

Builds two models for Fashion-MNIST (the Debian package's IDX files) and writes their
descriptions as Keras writes them: DIR/cnn.json (a Sequential CNN ending in logits,
model.to_json()) and DIR/residual.keras (a Functional model with a residual branch and
BatchNormalization, ending in a softmax, model.save()). Trains each with Adam from 1e-3, batch 32,
for EPOCHS epochs and writes DIR/keras_results.json: for each model its parameter count and test
accuracy, the figures Tandem's training of the same description is compared with. The rate
decays to 0 along a cosine over the run (Tandem's --lr-schedule cosine): the last epoch settles
instead of bouncing, so one run's accuracy is a fair figure to compare.
"""
import gzip
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(name):
    path = os.path.join(DATA, name)
    opener = gzip.open if os.path.exists(path + ".gz") else open
    with opener(path + ".gz" if os.path.exists(path + ".gz") else path, "rb") as file:
        data = file.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def cnn():
    return keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(64, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10),
        ],
        name="cnn",
    )


def residual():
    inputs = keras.Input((28, 28, 1))
    x = keras.layers.Conv2D(16, 3, padding="same", use_bias=False)(inputs)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.ReLU()(x)
    x = keras.layers.MaxPooling2D()(x)
    y = keras.layers.Conv2D(16, 3, padding="same", activation="relu", kernel_initializer="he_normal")(x)
    y = keras.layers.Conv2D(16, 3, padding="same")(y)
    x = keras.layers.Activation("relu")(keras.layers.Add()([x, y]))
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Flatten()(x)
    outputs = keras.layers.Dense(10, activation="softmax")(x)
    return keras.Model(inputs, outputs, name="residual")


def main():
    directory, epochs = sys.argv[1], int(sys.argv[2])
    tf.keras.utils.set_random_seed(42)
    train_x = read_idx("train-images-idx3-ubyte")[..., None].astype("float32") / 255.0
    train_y = read_idx("train-labels-idx1-ubyte").astype("int32")
    test_x = read_idx("t10k-images-idx3-ubyte")[..., None].astype("float32") / 255.0
    test_y = read_idx("t10k-labels-idx1-ubyte").astype("int32")
    results = {}
    for name, model, logits in (("cnn", cnn(), True), ("residual", residual(), False)):
        if name == "cnn":
            with open(os.path.join(directory, "cnn.json"), "w") as file:
                file.write(model.to_json())
        else:
            model.save(os.path.join(directory, "residual.keras"))
        steps = epochs * -(-len(train_x) // 32)
        model.compile(
            optimizer=keras.optimizers.Adam(keras.optimizers.schedules.CosineDecay(1e-3, steps)),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=logits),
            metrics=["accuracy"],
        )
        model.fit(train_x, train_y, batch_size=32, epochs=epochs, shuffle=True, verbose=0)
        _, accuracy = model.evaluate(test_x, test_y, batch_size=256, verbose=0)
        results[name] = {"params": int(model.count_params()), "test_accuracy": float(accuracy)}
    with open(os.path.join(directory, "keras_results.json"), "w") as file:
        json.dump(results, file)


if __name__ == "__main__":
    main()
