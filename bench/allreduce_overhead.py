"""What the gradient all-reduce costs a multi-worker step: the main job (the Fashion-MNIST CNN) as
two MPI workers (`tandem launch -n 2 -- tandem train --strategy multi-worker`) against the same two
processes training independently at the same time on the same per-process batch, so both
variants load the cores alike and differ only by the communication. Prints each variant's median
step time with its spread, the overhead share of a multi-worker step (1 - independent / multi-
worker step time) and what the workers measured themselves: the share of the step spent waiting
for the all-reduce (communication the backward pass did not hide) and packing buckets.

    bench/allreduce_overhead.sh --repeats 3 --bucket-kib 1024,64
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import cnn_vs_peers as harness

REPO = harness.REPO
WORKERS = 2


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-size", type=int, default=32, help="per process (default 32)")
    parser.add_argument("--threads", type=int, default=1, help="per process (default 1)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--bucket-kib",
        default="1024,64",
        help="comma-separated bucket sizes for the multi-worker runs (default 1024,64: one "
        "bucket for the CNN's 0.47 MiB of gradients, and the CPU default, small buckets that "
        "start during the backward pass)",
    )
    parser.add_argument(
        "--tandem",
        default=os.environ.get("TANDEM_BIN", str(REPO / "build/tandem")),
        help="the tandem binary (default $TANDEM_BIN, else build/tandem)",
    )
    parser.add_argument("--out-dir", help="reports (default out/bench/allreduce-<date-time>)")
    parser.add_argument(
        "--wait-idle",
        type=float,
        default=0,
        metavar="SECONDS",
        help="before each run, wait up to SECONDS until other processes leave the CPUs idle",
    )
    return parser.parse_args()


def run(commands, reports, args):
    """Runs the commands at once; returns their reports and the CPU share others used."""
    commands = [[*command, "--report", str(report)] for command, report in zip(commands, reports)]
    measured = harness.run_measured(commands, args.wait_idle)
    failure = measured.failure(commands)
    missing = [str(report) for report in reports if not report.exists()]
    if failure or missing:
        sys.exit(failure or f"no report written: {', '.join(missing)}")
    return [json.loads(report.read_text()) for report in reports], measured.others_share


def main():
    args = parse_args()
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    out_dir = Path(args.out_dir or REPO / "out/bench" / time.strftime("allreduce-%Y%m%d-%H%M%S"))
    out_dir.mkdir(parents=True, exist_ok=True)
    train = [
        "train", "--quiet", "--epochs", str(args.epochs), "--batch-size", str(args.batch_size),
        "--threads", str(args.threads),
    ]
    independent = [args.tandem, *train, "--strategy", "cpu"]
    buckets = [int(kib) for kib in args.bucket_kib.split(",")]
    multi_worker = {
        kib: [args.tandem, "launch", "-n", str(WORKERS), "--", args.tandem, *train,
              "--strategy", "multi-worker", "--bucket-kib", str(kib)]
        for kib in buckets
    }
    print(f"started {started} on {harness.describe_machine()}")
    print(f"independent: {WORKERS} x {' '.join(independent)} --report FILE, at the same time")
    for kib, command in multi_worker.items():
        print(f"multi-worker ({kib} KiB buckets): {' '.join(command)} --report FILE")
    sys.stdout.flush()

    variants = ["independent", *[f"multi-worker {kib} KiB" for kib in buckets]]
    step_ms = {variant: [] for variant in variants}
    wait_share = {variant: [] for variant in variants[1:]}
    pack_share = {variant: [] for variant in variants[1:]}
    for repeat in range(args.repeats):
        # Which variant goes first rotates, so none gains from a drift of the machine.
        order = variants[repeat % len(variants):] + variants[:repeat % len(variants)]
        for variant in order:
            name = f"{variant.replace(' ', '-')}-{repeat + 1}"
            if variant == "independent":
                reports = [out_dir / f"{name}-{index}.json" for index in range(WORKERS)]
                results, share = run([independent] * WORKERS, reports, args)
                # Each process takes batch-size examples per step.
                milliseconds = statistics.mean(
                    1000.0 * args.batch_size / result["samples_per_sec"] for result in results
                )
            else:
                kib = int(variant.split()[1])
                results, share = run([multi_worker[kib]], [out_dir / f"{name}.json"], args)
                result = results[0]
                # samples_per_sec counts the global batch: every worker's examples.
                milliseconds = 1000.0 * result["global_batch_size"] / result["samples_per_sec"]
                wait_share[variant].append(result["allreduce_wait_share"])
                pack_share[variant].append(result["allreduce_pack_share"])
            step_ms[variant].append(milliseconds)
            contended = (
                f", CONTENDED: other processes used {share:.0%} of the CPUs"
                if share > harness.CONTENDED_SHARE
                else ""
            )
            print(f"  {name}: {milliseconds:.2f} ms/step{contended}", flush=True)

    print()
    reference = statistics.median(step_ms["independent"])
    rows = [("variant", "ms/step median", "min..max", "overhead", "waiting", "packing")]
    for variant in variants:
        values = step_ms[variant]
        median = statistics.median(values)
        row = [variant, f"{median:.2f}", f"{min(values):.2f}..{max(values):.2f}"]
        if variant == "independent":
            row += ["-", "-", "-"]
        else:
            row += [
                f"{1.0 - reference / median:.1%}",
                f"{statistics.median(wait_share[variant]):.1%}",
                f"{statistics.median(pack_share[variant]):.1%}",
            ]
        rows.append(tuple(row))
    harness.print_table(rows)
    summary = {
        "started": started,
        "machine": harness.describe_machine(),
        "independent": independent,
        "multi_worker": {str(kib): command for kib, command in multi_worker.items()},
        "step_ms": step_ms,
        "allreduce_wait_share": wait_share,
        "allreduce_pack_share": pack_share,
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"reports: {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
