"""Checks Tandem's files with the tools other people use (run by tests/io/interop_test.cpp).

  interop_check.py safetensors FILE EXPECTED.json
      The `safetensors` package loads FILE; every tensor must have the dtype, shape and exact
      bytes EXPECTED.json lists ({name: {"dtype", "shape", "hex"}}).
  interop_check.py onnx MODEL.onnx DATA.safetensors TOLERANCE
      onnxruntime runs MODEL on DATA's "input"; the result must match DATA's "output" (Tandem's
      prediction) within TOLERANCE, absolutely.
  interop_check.py savedmodel DIR DATA.safetensors TOLERANCE
      TensorFlow loads the SavedModel DIR with tf.saved_model.load; its "serving_default" signature
      runs on DATA's "input" and must match DATA's "output" within TOLERANCE. Then
      `saved_model_cli show` must list the signature's input and output. Needs tensorflow-cpu
      (the tfrecord group).
  interop_check.py keras-load MODEL.keras DATA.safetensors TOLERANCE
      tf.keras.models.load_model opens Tandem's .keras export; its predictions on DATA's "input"
      must match DATA's "output" within TOLERANCE. Needs tensorflow-cpu (the tfrecord group).
  interop_check.py keras-write MODEL.keras MODEL.h5 DATA.safetensors
      Builds the zoo's "cnn" in Keras with random weights, saves it with model.save as a .keras
      file and as a legacy .h5, and saves an input and Keras' predictions.
  interop_check.py torch ARCH WEIGHTS.safetensors DATA.safetensors
      Builds ARCH ("mlp" or "cnn", the zoo's models) in PyTorch with random weights, saves its
      state dict with safetensors.torch.save_file, and saves an input and PyTorch's output. Exits
      3 when PyTorch is not installed (it comes with the bench group).
Prints one line per check; exits 1 on a mismatch.
"""
import json
import sys

import numpy as np
from safetensors.numpy import load_file, save_file


def check_safetensors(path, expected_path):
    with open(expected_path) as f:
        expected = json.load(f)
    loaded = load_file(path)
    if sorted(loaded) != sorted(expected):
        print(f"tensor names differ: {sorted(loaded)} vs {sorted(expected)}")
        return 1
    for name, want in expected.items():
        array = loaded[name]
        if str(array.dtype) != want["dtype"] or list(array.shape) != want["shape"]:
            print(f"{name}: {array.dtype} {list(array.shape)}, expected {want['dtype']} {want['shape']}")
            return 1
        if array.tobytes().hex() != want["hex"]:
            print(f"{name}: values differ")
            return 1
    print(f"safetensors {__import__('safetensors').__version__} read {len(expected)} tensors of "
          f"{path} with the same values")
    return 0


def compare(who, result, expected, tolerance):
    """Prints how far `result` (from `who`) is from Tandem's `expected`; 1 past `tolerance`."""
    if result.shape != expected.shape:
        print(f"{who} gave shape {result.shape}, Tandem {expected.shape}")
        return 1
    difference = float(np.max(np.abs(result - expected)))
    print(f"{who}: max |difference| {difference:.3g} (tolerance {tolerance})")
    return 0 if difference <= tolerance else 1


def check_onnx(model_path, data_path, tolerance):
    import onnxruntime as ort

    data = load_file(data_path)
    session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    (result,) = session.run(["output"], {"input": data["input"]})
    return compare(f"onnxruntime {ort.__version__}: {model_path}", result, data["output"],
                   tolerance)


def check_saved_model(directory, data_path, tolerance):
    import os
    import subprocess

    import tensorflow as tf

    data = load_file(data_path)
    loaded = tf.saved_model.load(directory)
    serve = loaded.signatures["serving_default"]
    result = serve(input=tf.constant(data["input"]))["output"].numpy()
    if compare(f"TensorFlow {tf.__version__}: {directory}: serving_default", result,
               data["output"], tolerance):
        return 1
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    shown = subprocess.run([cli, "show", "--dir", directory, "--all"], capture_output=True,
                           text=True)
    listing = shown.stdout
    wanted = ["signature_def['serving_default']", "inputs['input']", "outputs['output']",
              "Method name is: tensorflow/serving/predict"]
    missing = [line for line in wanted if line not in listing]
    if shown.returncode != 0 or missing:
        print(f"saved_model_cli show (exit {shown.returncode}) lacks {missing}:\n{listing}"
              f"{shown.stderr}")
        return 1
    print("saved_model_cli show --all lists serving_default with its input and output")
    return 0


def check_keras_load(model_path, data_path, tolerance):
    import tensorflow as tf

    data = load_file(data_path)
    model = tf.keras.models.load_model(model_path)
    result = model.predict(data["input"], verbose=0)
    return compare(f"TensorFlow {tf.__version__} Keras: {model_path}", result, data["output"],
                   tolerance)


def write_keras(keras_path, h5_path, data_path):
    import tensorflow as tf

    tf.keras.utils.set_random_seed(7)
    layers = tf.keras.layers
    model = tf.keras.Sequential([
        tf.keras.Input((28, 28, 1)),
        layers.Conv2D(32, 3, activation="relu"), layers.MaxPooling2D(),
        layers.Conv2D(64, 3, activation="relu"), layers.MaxPooling2D(),
        layers.Flatten(), layers.Dense(64, activation="relu"), layers.Dense(10)])
    model.save(keras_path)
    model.save(h5_path, save_format="h5")
    x = np.random.default_rng(8).random((6, 28, 28, 1), dtype=np.float32)
    save_file({"input": x, "output": model.predict(x, verbose=0)}, data_path)
    print(f"TensorFlow {tf.__version__} Keras wrote {keras_path} and {h5_path}")
    return 0


def write_keras_activations(keras_path, data_path):
    """A Sequential of Dense layers with every activation Keras 2.15 takes by name (silu as users
    write it), ReLU(max_value=6) as MobileNetV2 has it, and its predictions."""
    import tensorflow as tf

    tf.keras.utils.set_random_seed(9)
    layers = tf.keras.layers
    activations = ["elu", "selu", "softplus", "softsign", "silu", "hard_sigmoid", "mish",
                   "relu6", "leaky_relu", "gelu", "exponential"]
    model = tf.keras.Sequential(
        [tf.keras.Input((6,))] + [layers.Dense(8, activation=a) for a in activations]
        + [layers.ReLU(max_value=6.0), layers.Activation("swish"), layers.Dense(3)])
    # Larger weights for the first layers, so that relu6 and ReLU(max_value=6) meet their cap.
    for layer in model.layers[:8]:
        kernel, bias = layer.get_weights()
        layer.set_weights([kernel * 3.0, bias + 0.5])
    model.save(keras_path)
    x = np.random.default_rng(10).uniform(-2, 2, (16, 6)).astype(np.float32)
    save_file({"input": x, "output": model.predict(x, verbose=0)}, data_path)
    print(f"TensorFlow {tf.__version__} Keras wrote {keras_path} with "
          f"activations {', '.join(activations)}, ReLU(max_value=6), swish")
    return 0


def write_torch(arch, weights_path, data_path):
    try:
        import torch
        from safetensors.torch import save_file as save_torch
    except ImportError:
        print("PyTorch is not installed in this environment (scripts/python-env.sh bench "
              "installs it)")
        return 3
    torch.manual_seed(0)
    if arch == "mlp":
        module = torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    else:
        # The TensorFlow tutorial CNN as a PyTorch user writes it: NCHW, Flatten of (C, H, W).
        module = torch.nn.Sequential(
            torch.nn.Conv2d(1, 32, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(32, 64, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(64 * 5 * 5, 64), torch.nn.ReLU(),
            torch.nn.Linear(64, 10))
    module.eval()
    images = torch.rand(4, 1, 28, 28)
    with torch.no_grad():
        output = module(images)
    save_torch(module.state_dict(), weights_path)
    # Tandem takes NHWC images.
    save_file({"input": images.permute(0, 2, 3, 1).contiguous().numpy(),
               "output": output.numpy()}, data_path)
    print(f"torch {torch.__version__}: wrote the {arch} state dict "
          f"({', '.join(module.state_dict())}) to {weights_path}")
    return 0


def main(argv):
    if len(argv) >= 3 and argv[0] == "safetensors":
        return check_safetensors(argv[1], argv[2])
    if len(argv) == 4 and argv[0] == "onnx":
        return check_onnx(argv[1], argv[2], float(argv[3]))
    if len(argv) == 4 and argv[0] == "savedmodel":
        return check_saved_model(argv[1], argv[2], float(argv[3]))
    if len(argv) == 4 and argv[0] == "keras-load":
        return check_keras_load(argv[1], argv[2], float(argv[3]))
    if len(argv) == 4 and argv[0] == "keras-write":
        return write_keras(argv[1], argv[2], argv[3])
    if len(argv) == 3 and argv[0] == "keras-activations":
        return write_keras_activations(argv[1], argv[2])
    if len(argv) == 4 and argv[0] == "torch":
        return write_torch(argv[1], argv[2], argv[3])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
