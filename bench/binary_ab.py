#!/usr/bin/env python3
"""Two Tandem builds side by side on the same training run: CPU seconds and samples/s.

    bench/binary_ab.py BEFORE AFTER [--repeats 4] [--threads 1] [--fraction 0.1]

Runs `tandem train --epochs 1` on the first FRACTION of Fashion-MNIST's training set (through
--validation-split) with each binary in turn, REPEATS times, interleaved so that a machine's drift
hits both alike, and prints per run and then the median and range of each binary's CPU seconds
(user + system of the child, which other processes on a shared machine disturb less than wall
time) and samples/s.
"""
import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--fraction", type=float, default=0.1)
    args = parser.parse_args()
    binaries = {"before": args.before, "after": args.after}
    results = {name: [] for name in binaries}
    with tempfile.TemporaryDirectory() as work:
        report = f"{work}/report.json"
        for repeat in range(args.repeats):
            for name, binary in binaries.items():
                start = resource.getrusage(resource.RUSAGE_CHILDREN)
                subprocess.run([binary, "train", "--epochs", "1", "--validation-split",
                                str(round(1 - args.fraction, 6)), "--threads", str(args.threads),
                                "--quiet", "--report", report],
                               check=True, stdout=subprocess.DEVNULL)
                end = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = (end.ru_utime - start.ru_utime) + (end.ru_stime - start.ru_stime)
                with open(report) as f:
                    samples = json.load(f)["samples_per_sec"]
                results[name].append((cpu, samples))
                print(f"repeat {repeat + 1} {name}: {cpu:.2f} CPU s, {samples:.0f} samples/s",
                      file=sys.stderr, flush=True)
    for name, runs in results.items():
        cpus = [cpu for cpu, _ in runs]
        rates = [rate for _, rate in runs]
        print(f"{name}: CPU s median {statistics.median(cpus):.2f} "
              f"({min(cpus):.2f}..{max(cpus):.2f}), samples/s median "
              f"{statistics.median(rates):.0f} ({min(rates):.0f}..{max(rates):.0f})")


if __name__ == "__main__":
    main()
