#!/usr/bin/env python3
"""One TF-style script, two imports: TensorFlow 2.15 against `import tandem as tf`, and both
against `tandem train`, on the main job's CNN, side by side.

    PYTHONPATH=build/python .venv/bin/python bench/python_vs_tf.py [--repeats 3] [--epochs 2]
        [--threads 2] [--tandem build/tandem]

Runs examples/python/fashion_mnist_cnn.py with --framework tensorflow and --framework tandem, with
model.fit and with a custom loop (GradientTape inside tf.function, --loop custom),
(same data, threads, batch 32, Adam 1e-3, tf.data from numpy with a shuffle buffer of 10,000 and
validation data), and `tandem train` with the same settings (--lr-schedule constant
--validation-split 0.1), REPEATS times each, interleaved so that a shared machine's drift hits
all alike. Each run's samples/s is the median over its epochs after the first (tracing, warm-up),
validation included for the scripts; `tandem train` reports its steady-state training
throughput. Prints each run, then the median and range of each, and the ratios of the medians.
TensorFlow comes from the bench group (scripts/python-env.sh bench).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]


def script_run(framework: str, epochs: int, threads: int, loop: str = "fit") -> float:
    env = dict(os.environ)
    if framework == "tensorflow":
        env["TF_NUM_INTRAOP_THREADS"] = str(threads)
        env["TF_NUM_INTEROP_THREADS"] = "1"
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples/python/fashion_mnist_cnn.py"),
            "--framework",
            framework,
            "--epochs",
            str(epochs),
            "--threads",
            str(threads),
            "--loop",
            loop,
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    return report["samples_per_sec"], report["test_accuracy"]


def cli_run(binary: str, epochs: int, threads: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        report = pathlib.Path(folder) / "report.json"
        subprocess.run(
            [
                binary,
                "train",
                "--epochs",
                str(epochs),
                "--threads",
                str(threads),
                "--lr-schedule",
                "constant",
                "--validation-split",
                "0.1",
                "--quiet",
                "--report",
                str(report),
            ],
            capture_output=True,
            check=True,
        )
        data = json.loads(report.read_text())
        return data["samples_per_sec"], data["test_accuracy"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--tandem", default=str(ROOT / "build/tandem"))
    args = parser.parse_args()
    runs = {
        "tensorflow fit": lambda: script_run("tensorflow", args.epochs, args.threads),
        "tandem fit": lambda: script_run("tandem", args.epochs, args.threads),
        "tandem train": lambda: cli_run(args.tandem, args.epochs, args.threads),
        "tensorflow custom": lambda: script_run("tensorflow", args.epochs, args.threads, "custom"),
        "tandem custom": lambda: script_run("tandem", args.epochs, args.threads, "custom"),
    }
    results: dict = {name: [] for name in runs}
    for repeat in range(args.repeats):
        for name, run in runs.items():
            samples_per_sec, accuracy = run()
            results[name].append(samples_per_sec)
            print(
                f"repeat {repeat + 1} {name:20s} {samples_per_sec:9.0f} samples/s  "
                f"test accuracy {accuracy:.4f}",
                flush=True,
            )
    medians = {name: statistics.median(values) for name, values in results.items()}
    print(f"\nthreads {args.threads}, epochs {args.epochs}, repeats {args.repeats}")
    for name, values in results.items():
        print(
            f"{name:20s} median {medians[name]:9.0f} samples/s (range {min(values):.0f}.."
            f"{max(values):.0f})"
        )
    for name, over in [
        ("tandem fit", "tensorflow fit"),
        ("tandem fit", "tandem train"),
        ("tandem custom", "tensorflow custom"),
    ]:
        print(f"{name} / {over}: {medians[name] / medians[over]:.3f}")


if __name__ == "__main__":
    main()
