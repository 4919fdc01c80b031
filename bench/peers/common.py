"""What the peer benchmarks share: arguments, thread limits, the Fashion-MNIST IDX reader, the
steady-state step clock and the JSON result line. Kept free of TensorFlow and PyTorch imports
because the thread environment variables must be set before either is imported."""

import argparse
import gzip
import json
import os
import time

DEFAULT_DATA_DIR = "/usr/share/datasets/fashion-mnist"
# Tandem's `train` excludes the same number of first steps from its throughput.
DEFAULT_WARMUP_STEPS = 10


def parse_args(framework):
    parser = argparse.ArgumentParser(
        description=f"Train Tandem's main-job CNN on Fashion-MNIST with {framework} and print "
        "its steady-state training throughput as one JSON line."
    )
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument(
        "--warmup-steps",
        type=int,
        default=DEFAULT_WARMUP_STEPS,
        help="first training steps left out of samples_per_sec",
    )
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report", help="also write the JSON result to this file")
    parser.add_argument(
        "--compile",
        action="store_true",
        help="compile the training step: Keras' jit_compile=True (XLA) for TensorFlow, "
        "torch.compile for PyTorch (the default is tf.function without XLA, and eager PyTorch)",
    )
    parser.add_argument(
        "--no-evaluate",
        action="store_true",
        help="skip the (untimed) test-set accuracy after training",
    )
    args = parser.parse_args()
    for name in ("epochs", "batch_size", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup_steps < 0:
        parser.error("--warmup-steps must not be negative")
    return args


def limit_threads_env(threads):
    """Sets the thread counts that OpenMP, MKL, oneDNN and TensorFlow read at import time."""
    for variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "TF_NUM_INTRAOP_THREADS"):
        os.environ[variable] = str(threads)
    os.environ["TF_NUM_INTEROP_THREADS"] = "1"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


# IDX element type codes (the third byte of the magic number) and their NumPy dtypes.
_IDX_DTYPES = {0x08: "u1", 0x09: "i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path):
    # NumPy is imported where it is used, so that run_peer.py can tell "the framework is not
    # installed" apart from a failure when run by an interpreter that has neither.
    import numpy as np

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as file:
        data = file.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_DTYPES:
        raise ValueError(f"{path}: not an IDX file (bad magic number {data[:4].hex()})")
    rank = data[3]
    header_bytes = 4 + 4 * rank
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(rank))
    dtype = np.dtype(_IDX_DTYPES[data[2]])
    expected = header_bytes + int(np.prod(shape)) * dtype.itemsize
    if len(data) != expected:
        raise ValueError(f"{path}: {len(data)} bytes, the header {shape} needs {expected}")
    return np.frombuffer(data, dtype=dtype, offset=header_bytes).reshape(shape)


def load_fashion_mnist(data_dir, split):
    """Images (N, 28, 28, 1) f32 in [0, 1] and labels (N,) i64; split is "train" or "t10k"."""
    import numpy as np

    images = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"))  # (N, 28, 28) u8
    labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"))  # (N,) u8
    features = (images.astype(np.float32) / 255.0)[..., np.newaxis]  # (N, 28, 28, 1)
    return features, labels.astype(np.int64)


class StepClock:
    """Wall-clock throughput over training steps, leaving out the first `warmup_steps`.

    A step lasts from the end of the previous step (or the start of its epoch) to the end of its
    own update, so fetching and preparing the batch counts as part of the step, as in Tandem's
    Model::fit; the gap between epochs does not count, as in Tandem."""

    def __init__(self, warmup_steps):
        self.warmup_steps = warmup_steps
        self.step_seconds = []
        self.step_samples = []
        self.last_step_end = None

    def start_epoch(self):
        self.last_step_end = time.perf_counter()

    def step_done(self, samples):
        now = time.perf_counter()
        self.step_seconds.append(now - self.last_step_end)
        self.step_samples.append(samples)
        self.last_step_end = now

    def samples_per_sec(self):
        if len(self.step_seconds) <= self.warmup_steps:
            raise ValueError(
                f"only {len(self.step_seconds)} training steps, all of them warm-up "
                f"({self.warmup_steps}); train more epochs or pass a smaller --warmup-steps"
            )
        timed = slice(self.warmup_steps, None)
        return sum(self.step_samples[timed]) / sum(self.step_seconds[timed])


def emit(args, framework, version, clock, epoch_seconds, test_accuracy, layout):
    result = {
        "framework": framework,
        "version": version,
        "samples_per_sec": round(clock.samples_per_sec(), 2),
        "epoch_seconds": round(sum(epoch_seconds) / len(epoch_seconds), 3),
        "test_accuracy": None if test_accuracy is None else round(float(test_accuracy), 4),
        "threads": args.threads,
        "batch_size": args.batch_size,
        "epochs": args.epochs,
        "steps": len(clock.step_seconds),
        "warmup_steps": args.warmup_steps,
        "layout": layout,
        "compiled": args.compile,
    }
    line = json.dumps(result)
    if args.report:
        with open(args.report, "w") as file:
            file.write(line + "\n")
    print(line, flush=True)
