"""Tandem's f32 and int8 inference against onnxruntime's on the same models, inputs and threads.

  python3 bench/inference_vs_onnxruntime.py [--model resnet50] [--image-size 112] [--batch 8]
                                            [--threads 2] [--repeats 30] [--runs 3]

build/bench/inference builds the zoo model, exports it to ONNX, saves the input batches and
times Tandem four ways (eager predict; predict with the batch norms folded; the folded model as
a compiled function; the model quantised to int8 on the integer kernels, compiled); then
onnxruntime (CPUExecutionProvider, intra-op threads as Tandem's, sequential execution) loads the
f32 ONNX file and the int8 one (QDQ form, which onnxruntime runs on its int8 kernels) and runs
the same inputs. f32 outputs must agree within 1e-4; int8 ones are reported (the two round
differently at grid lines, so a few activations may be one step apart). The two alternate
for --runs rounds, so machine noise lands on both; the table gives the median over the rounds of
each side's figures, and the spread. Needs the interop group (scripts/python-env.sh interop).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np


def onnxruntime_figures(directory, threads, repeats, model="model.onnx",
                        outputs="inputs.safetensors", tolerance=1e-4):
    import onnxruntime as ort
    from safetensors.numpy import load_file

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(os.path.join(directory, model), options,
                                   providers=["CPUExecutionProvider"])
    data = load_file(os.path.join(directory, "inputs.safetensors"))
    expected = load_file(os.path.join(directory, outputs))
    difference = 0.0
    for name in ("one", "batch"):
        got = session.run(["output"], {"input": data[name]})[0]
        difference = max(difference, float(np.max(np.abs(got - expected[name + "_output"]))))
        if difference > tolerance:
            sys.exit(f"onnxruntime and Tandem disagree on '{name}' of {model} by {difference}")

    def timed(x):
        seconds = []
        for i in range(repeats + 2):
            start = time.perf_counter()
            session.run(["output"], {"input": x})
            if i >= 2:
                seconds.append(time.perf_counter() - start)
        return seconds

    latency = sorted(timed(data["one"]))
    batch = data["batch"].shape[0]
    throughput = [batch / s for s in timed(data["batch"])]
    return {"latency_ms": {"p50": 1e3 * np.percentile(latency, 50),
                           "p90": 1e3 * np.percentile(latency, 90),
                           "p99": 1e3 * np.percentile(latency, 99)},
            "images_per_sec": {"median": statistics.median(throughput), "min": min(throughput),
                               "max": max(throughput)},
            "version": ort.__version__, "difference": difference}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--image-size", type=int, default=112)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tandem", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                         "bench", "inference"))
    args = parser.parse_args()
    rounds = {}
    with tempfile.TemporaryDirectory() as directory:
        for _ in range(args.runs):
            out = subprocess.run(
                [args.tandem, "--out", directory, "--model", args.model, "--image-size",
                 str(args.image_size), "--batch", str(args.batch), "--threads", str(args.threads),
                 "--repeats", str(args.repeats)], check=True, capture_output=True, text=True)
            for way, figures in json.loads(out.stdout)["ways"].items():
                rounds.setdefault(way, []).append(figures)
            rounds.setdefault("onnxruntime", []).append(
                onnxruntime_figures(directory, args.threads, args.repeats))
            rounds.setdefault("onnxruntime int8", []).append(
                onnxruntime_figures(directory, args.threads, args.repeats, "model_int8.onnx",
                                    "int8_outputs.safetensors", tolerance=1.0))
    print(f"{args.model} at {args.image_size}x{args.image_size}, {args.threads} threads, "
          f"{args.runs} rounds of {args.repeats} timed calls (onnxruntime "
          f"{rounds['onnxruntime'][0]['version']})\n")
    print("| | batch 1 p50 ms | p90 ms | p99 ms | batch %d images/s (median, min-max of rounds) |"
          % args.batch)
    print("|---|---:|---:|---:|---:|")
    for side, runs in rounds.items():
        p = {k: statistics.median(r["latency_ms"][k] for r in runs) for k in ("p50", "p90", "p99")}
        rates = [r["images_per_sec"]["median"] for r in runs]
        print(f"| {side} | {p['p50']:.2f} | {p['p90']:.2f} | {p['p99']:.2f} | "
              f"{statistics.median(rates):.1f} ({min(rates):.1f}-{max(rates):.1f}) |")
    def rate(side):
        return statistics.median(r["images_per_sec"]["median"] for r in rounds[side])

    int8_difference = max(r["difference"] for r in rounds["onnxruntime int8"])
    print(f"\nint8 outputs, onnxruntime against Tandem: largest difference {int8_difference:.2e}")
    for side in rounds:
        if side.startswith("onnxruntime"):
            continue
        peer = "onnxruntime int8" if "int8" in side else "onnxruntime"
        print(f"{side} / {peer} throughput: {rate(side) / rate(peer):.2f}x")
    print(f"tandem int8 compiled / tandem folded compiled throughput: "
          f"{rate('tandem int8 compiled') / rate('tandem folded compiled'):.2f}x")


if __name__ == "__main__":
    main()
