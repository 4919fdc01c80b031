"""A TensorFlow-style script (examples/python/fashion_mnist_cnn.py: Sequential CNN, tf.data from
numpy, fit with TensorBoard and validation data) reaches the accuracy `tandem train` reaches."""

import json
import pathlib
import subprocess
import sys

import pytest

import tandem

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = pathlib.Path("/usr/share/datasets/fashion-mnist")
EPOCHS = "2"


@pytest.mark.skipif(
    not DATA.is_dir(), reason="Fashion-MNIST is not installed (dataset-fashion-mnist)"
)
def test_the_tensorflow_style_script_reaches_tandem_trains_accuracy(tmp_path):
    script = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples/python/fashion_mnist_cnn.py"),
            "--epochs",
            EPOCHS,
            "--logdir",
            str(tmp_path / "logs"),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert script.returncode == 0, script.stderr[-4000:]
    result = json.loads(script.stdout.strip().splitlines()[-1])

    # The package lives in <build>/python/tandem; the CLI beside it, in <build>.
    binary = pathlib.Path(tandem.__file__).resolve().parents[2] / "tandem"
    report_path = tmp_path / "report.json"
    cli = subprocess.run(
        [
            str(binary),
            "train",
            "--epochs",
            EPOCHS,
            "--lr-schedule",
            "constant",
            "--validation-split",
            "0.1",
            "--report",
            str(report_path),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert cli.returncode == 0, cli.stderr[-4000:]
    reference = json.loads(report_path.read_text())["test_accuracy"]

    assert result["test_accuracy"] > 0.86, result
    assert abs(result["test_accuracy"] - reference) < 0.015, (result, reference)
    for run in ("train", "validation"):
        assert list((tmp_path / "logs" / run).glob("events.out.tfevents.*")), run
