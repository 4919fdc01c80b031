"""The peers of `tandem bench --peers tf,torch`: one training workload of Tandem's zoo (mlp, the
tutorial cnn, resnet50, the BERT-style transformer encoder) in TensorFlow 2.15 / Keras
(tf_zoo.py) or PyTorch (torch_zoo.py), built layer for layer as Tandem builds it, trained with
Adam (learning rate 1e-3) and sparse softmax cross-entropy on logits, on one batch of synthetic
data of the model's input shape kept on the device (the model's step time, not an input
pipeline's). After --warmup-steps untimed steps, each of --steps full training steps (forward,
loss, backward, update; TensorFlow's as a tf.function with jit_compile off, Keras' default, or
with --jit-compile on, XLA's) is timed alone, ended by reading its loss back. Prints exactly one JSON line on stdout:

    {"framework": "tf", "version": "2.15.1", "model": "cnn", "batch_size": 32, "precision":
     "fp32", "threads": 2, "device": "cpu", "input_shape": [28, 28, 1], "classes": 10,
     "parameters": 121930, "trainable_parameters": 121930, "warmup_steps": 10, "steps": 20,
     "step_seconds": [...], "samples_per_second": batch_size / median step}

    .venv/bin/python bench/peers/run_peer.py --framework torch --model resnet50 --batch-size 8 \\
        --precision bf16 --warmup-steps 3 --steps 10 --threads 2 --image-size 112

Workloads (input shape without the batch; --classes overrides the classes):
    mlp, cnn     28x28x1 images (--image-size N: NxNx1), 10 classes
    resnet50     224x224x3 images (--image-size N: NxNx3), 1000 classes
    transformer  Tandem's zoo "bert_base" (hidden 768, 12 layers, 12 heads, feed-forward 3072,
                 vocabulary 30522, positions 512, dropout 0.1) over --sequence-length 128 token
                 ids, 2 classes; --layers, --hidden-size, --heads, --intermediate-size give
                 zoo::transformer_encoder's smaller configurations
Precision: fp32, or bf16 (TensorFlow's mixed_bfloat16 policy; PyTorch's autocast to bfloat16),
the logits in float32 in both as in Tandem's zoo. --threads sets the intra-op threads (TF's
tf.config.threading, torch.set_num_threads) and the OpenMP/MKL variables; inter-op is 1.

Exit status: 0 measured; 2 bad arguments; 3 the framework is not installed (run
scripts/python-env.sh bench); 4 the combination is unsupported (the reason on stderr); 1 the run
failed. Everything but the JSON line, the frameworks' logging included, goes to stderr.
"""

import argparse
import importlib
import importlib.util
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field

import common

NOT_INSTALLED = 3
UNSUPPORTED = 4
FRAMEWORKS = {"tf": ("tensorflow", "tf_zoo"), "torch": ("torch", "torch_zoo")}
MODELS = ("mlp", "cnn", "resnet50", "transformer")
LEARNING_RATE = 1e-3  # Adam's, as `tandem train` and the smoke test use
# Tandem's zoo::TransformerEncoderConfig defaults: BERT-base.
BERT_BASE = {
    "vocabulary_size": 30522,
    "max_sequence_length": 512,
    "hidden_size": 768,
    "layers": 12,
    "heads": 12,
    "intermediate_size": 3072,
    "dropout": 0.1,
    "layer_norm_epsilon": 1e-12,
}
TRANSFORMER_OPTIONS = ("layers", "hidden_size", "heads", "intermediate_size")
# Two valid 3x3 convolutions each followed by 2x2 pooling leave at least one pixel from 10x10.
CNN_MIN_IMAGE_SIZE = 10


@dataclass
class Workload:
    model: str
    input_shape: tuple  # without the batch dimension: (H, W, C) images or (S,) token ids
    classes: int
    batch_size: int
    seed: int
    transformer: dict = field(default_factory=dict)
    learning_rate: float = LEARNING_RATE

    def synthetic_batch(self):
        """Features (B, *input_shape): uniform [0, 1) f32 images or i32 token ids; labels (B,)
        i32 uniform over the classes."""
        import numpy as np  # after the framework check: NumPy comes with either framework

        rng = np.random.default_rng(self.seed)
        shape = (self.batch_size, *self.input_shape)
        if self.model == "transformer":
            features = rng.integers(0, self.transformer["vocabulary_size"], shape, np.int32)
        else:
            features = rng.random(shape, np.float32)
        return features, rng.integers(0, self.classes, self.batch_size, np.int32)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n\n".join(__doc__.split("\n\n")[3:]),
    )
    parser.add_argument("--framework", required=True, choices=sorted(FRAMEWORKS))
    parser.add_argument("--model", required=True, choices=MODELS)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--warmup-steps", type=int, default=common.DEFAULT_WARMUP_STEPS)
    parser.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--image-size", type=int, help="mlp, cnn, resnet50: NxN images")
    parser.add_argument("--classes", type=int)
    parser.add_argument("--sequence-length", type=int, help="transformer (default 128)")
    for option in TRANSFORMER_OPTIONS:
        parser.add_argument(
            f"--{option.replace('_', '-')}",
            type=int,
            help=f"transformer (default {BERT_BASE[option]})",
        )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jit-compile", action="store_true",
                        help="tf: compile the training step with XLA (jit_compile=True)")
    args = parser.parse_args(argv)
    if args.jit_compile and args.framework != "tf":
        parser.error("--jit-compile is TensorFlow's (jit_compile=True); use --framework tf")

    for name in ("batch_size", "steps", "threads", "image_size", "classes", "sequence_length",
                 *TRANSFORMER_OPTIONS):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if args.warmup_steps < 0:
        parser.error(f"--warmup-steps must not be negative, got {args.warmup_steps}")
    transformer_only = [name for name in ("sequence_length", *TRANSFORMER_OPTIONS)
                        if getattr(args, name) is not None]
    if args.model == "transformer":
        if args.image_size is not None:
            parser.error("--image-size is for the image models; the transformer takes "
                         "--sequence-length")
    elif transformer_only:
        parser.error(f"--{transformer_only[0].replace('_', '-')} is for --model transformer only")
    hidden = args.hidden_size or BERT_BASE["hidden_size"]
    heads = args.heads or BERT_BASE["heads"]
    if hidden % heads != 0:
        parser.error(f"--hidden-size {hidden} must be a multiple of --heads {heads}")
    if (args.sequence_length or 0) > BERT_BASE["max_sequence_length"]:
        parser.error(f"--sequence-length must be at most {BERT_BASE['max_sequence_length']} "
                     f"(the position table's rows), got {args.sequence_length}")
    return args


def workload_of(args):
    """The Workload the arguments name, or raises ValueError with why the model cannot take
    them."""
    if args.model == "transformer":
        config = dict(BERT_BASE)
        for option in TRANSFORMER_OPTIONS:
            if getattr(args, option) is not None:
                config[option] = getattr(args, option)
        length = args.sequence_length or 128
        return Workload(args.model, (length,), args.classes or 2, args.batch_size, args.seed,
                        config)
    if args.model == "resnet50":
        side = args.image_size or 224
        return Workload(args.model, (side, side, 3), args.classes or 1000, args.batch_size,
                        args.seed)
    side = args.image_size or 28
    if args.model == "cnn" and side < CNN_MIN_IMAGE_SIZE:
        raise ValueError(f"the cnn needs images of at least {CNN_MIN_IMAGE_SIZE}x"
                         f"{CNN_MIN_IMAGE_SIZE} (two 3x3 convolutions and 2x2 poolings), got "
                         f"--image-size {side}")
    return Workload(args.model, (side, side, 1), args.classes or 10, args.batch_size, args.seed)


def fail(status, message):
    print(f"run_peer.py: {message}", file=sys.stderr, flush=True)
    return status


def measure(args, workload, stdout):
    """Runs the workload; returns the exit status after writing the JSON line to `stdout`."""
    package, zoo_module = FRAMEWORKS[args.framework]
    if importlib.util.find_spec(package) is None:
        return fail(NOT_INSTALLED, f"{package} is not installed for {sys.executable}; "
                    "scripts/python-env.sh bench installs the peers into the project .venv")
    zoo = importlib.import_module(zoo_module)
    reason = zoo.unsupported(args.device, args.precision)
    if reason:
        return fail(UNSUPPORTED, f"{args.framework} cannot run {args.model} {args.precision} on "
                    f"{args.device}: {reason}")
    compile_options = {"jit_compile": True} if args.jit_compile else {}
    version, parameters, trainable, step = zoo.train_step_timer(
        workload, args.threads, args.device, args.precision, args.seed, **compile_options)
    for _ in range(args.warmup_steps):
        step()
    step_seconds = []
    for _ in range(args.steps):
        started = time.perf_counter()
        loss = step()
        step_seconds.append(time.perf_counter() - started)
        if not math.isfinite(loss):
            return fail(1, f"the loss diverged to {loss}")
    result = {
        "framework": args.framework,
        "version": version,
        "model": args.model,
        "batch_size": args.batch_size,
        "precision": args.precision,
        "threads": args.threads,
        "device": args.device,
        "jit_compile": args.jit_compile,
        "input_shape": list(workload.input_shape),
        "classes": workload.classes,
        "parameters": int(parameters),
        "trainable_parameters": int(trainable),
        "warmup_steps": args.warmup_steps,
        "steps": args.steps,
        "step_seconds": step_seconds,
        "samples_per_second": args.batch_size / statistics.median(step_seconds),
    }
    stdout.write(json.dumps(result) + "\n")
    stdout.flush()
    return 0


def main(argv=None):
    args = parse_args(argv)
    try:
        workload = workload_of(args)
    except ValueError as error:
        return fail(UNSUPPORTED, str(error))
    common.limit_threads_env(args.threads)
    # Only the JSON line may reach stdout: the frameworks' own output (Python's and their C++
    # libraries') goes to stderr while they run.
    json_out = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        return measure(args, workload, json_out)
    except Exception as error:  # the run's failure, reported as one line with its cause
        return fail(1, f"{args.framework} {args.model} failed: {type(error).__name__}: {error}")
    finally:
        json_out.close()


if __name__ == "__main__":
    sys.exit(main())
