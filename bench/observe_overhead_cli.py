"""What watching a run costs: the main job's training throughput with TensorBoard logging of
scalars every step plus the resource monitor at 1 Hz (`tandem train --logdir DIR`, its defaults),
against the same job without, in pairs run back to back. Prints the median samples/s of each,
their spread, the median of the per-pair ratios and the overhead against the 2% target, and the
CPU time the observers add (the steadier figure when other processes share the machine).

    bench/observe_overhead_cli.sh --repeats 5 --threads 2
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

import cnn_vs_peers as harness

REPO = harness.REPO
# The overhead of the observed run must stay under this share of the plain run's throughput.
TARGET_OVERHEAD = 0.02


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeats", type=int, default=5, help="pairs of runs (default 5)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument(
        "--observe-args",
        default="--log-every 1 --monitor-interval 1",
        help="what the observed run adds besides --logdir (default: scalars every step, the "
        "monitor at 1 Hz)",
    )
    parser.add_argument(
        "--tandem",
        default=os.environ.get("TANDEM_BIN", str(REPO / "build/tandem")),
        help="the tandem binary (default $TANDEM_BIN, else build/tandem)",
    )
    parser.add_argument("--out-dir", help="reports and logs (default out/bench/observe-<date-time>)")
    parser.add_argument(
        "--wait-idle",
        type=float,
        default=0,
        metavar="SECONDS",
        help="before each run, wait up to SECONDS until other processes leave the CPUs idle",
    )
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when the overhead is over the target"
    )
    return parser.parse_args()


def run_once(command, report, args):
    """One training run; returns (samples/s, its CPU seconds, the share of the CPUs other
    processes used)."""
    command = [*command, "--report", str(report)]
    measured = harness.run_measured([command], args.wait_idle)
    failure = measured.failure([command])
    if failure or not report.exists():
        sys.exit(failure or f"`{' '.join(command)}` wrote no report {report}")
    return (
        json.loads(report.read_text())["samples_per_sec"],
        measured.cpu_seconds,
        measured.others_share,
    )


def main():
    args = parse_args()
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    out_dir = Path(args.out_dir or REPO / "out/bench" / time.strftime("observe-%Y%m%d-%H%M%S"))
    out_dir.mkdir(parents=True, exist_ok=True)
    job = [
        args.tandem, "train", "--quiet", "--epochs", str(args.epochs),
        "--batch-size", str(args.batch_size), "--threads", str(args.threads),
    ]
    print(f"started {started} on {harness.describe_machine()}")
    print(f"plain:    {' '.join(job)} --report FILE")
    print(f"observed: {' '.join(job)} --logdir DIR {args.observe_args} --report FILE")
    sys.stdout.flush()

    contended_runs = 0
    rates = {"plain": [], "observed": []}
    cpu_seconds = {"plain": [], "observed": []}
    ratios = []
    cpu_ratios = []
    for repeat in range(args.repeats):
        # ABBA: which variant goes first alternates, so neither gains from a drift.
        order = ["plain", "observed"] if repeat % 2 == 0 else ["observed", "plain"]
        pair = {}
        pair_cpu = {}
        for variant in order:
            name = f"{variant}-{repeat + 1}"
            command = list(job)
            if variant == "observed":
                logdir = out_dir / f"logs-{repeat + 1}"
                shutil.rmtree(logdir, ignore_errors=True)
                command += ["--logdir", str(logdir), *args.observe_args.split()]
            rate, cpu, share = run_once(command, out_dir / f"{name}.json", args)
            pair[variant] = rate
            pair_cpu[variant] = cpu
            rates[variant].append(rate)
            cpu_seconds[variant].append(cpu)
            contended = (
                f", CONTENDED: other processes used {share:.0%} of the CPUs"
                if share > harness.CONTENDED_SHARE
                else ""
            )
            contended_runs += bool(contended)
            print(f"  {name}: {rate:.1f} samples/s, {cpu:.2f} CPU s{contended}", flush=True)
        ratios.append(pair["observed"] / pair["plain"])
        cpu_ratios.append(pair_cpu["observed"] / pair_cpu["plain"])

    print()
    rows = [("variant", "samples/s median", "min..max", "CPU s median", "min..max")]
    for variant, values in rates.items():
        cpu = cpu_seconds[variant]
        rows.append(
            (
                variant,
                f"{statistics.median(values):.0f}",
                f"{min(values):.0f}..{max(values):.0f}",
                f"{statistics.median(cpu):.2f}",
                f"{min(cpu):.2f}..{max(cpu):.2f}",
            )
        )
    harness.print_table(rows)
    median_ratio = statistics.median(ratios)
    overhead = 1.0 - statistics.median(rates["observed"]) / statistics.median(rates["plain"])
    paired_overhead = 1.0 - median_ratio
    print()
    print(f"overhead (medians): {overhead:.2%}")
    print(
        f"overhead (median of the {len(ratios)} pairs): {paired_overhead:.2%}; pair ratios "
        + ", ".join(f"{ratio:.3f}" for ratio in ratios)
    )
    # CPU time is what the observers add to the process's work; unlike throughput it barely
    # moves when other processes take CPUs away, so it is the figure to read on a busy machine.
    cpu_overhead = statistics.median(cpu_ratios) - 1.0
    print(
        f"CPU time added (median of the pairs): {cpu_overhead:.2%}; pair ratios "
        + ", ".join(f"{ratio:.3f}" for ratio in cpu_ratios)
    )
    met = paired_overhead < TARGET_OVERHEAD
    if contended_runs:
        # Other processes move throughput by far more than 2%: no verdict from such runs.
        print(
            f"target < {TARGET_OVERHEAD:.0%}: not judged: {contended_runs} of "
            f"{2 * args.repeats} runs were CONTENDED; rerun on an idle machine (--wait-idle)"
        )
    else:
        print(f"target < {TARGET_OVERHEAD:.0%}: {'met' if met else 'NOT met'}")
    summary = {
        "started": started,
        "machine": harness.describe_machine(),
        "job": job,
        "observe_args": args.observe_args,
        "samples_per_sec": rates,
        "cpu_seconds": cpu_seconds,
        "pair_ratios": ratios,
        "cpu_pair_ratios": cpu_ratios,
        "cpu_overhead_paired": cpu_overhead,
        "overhead_of_medians": overhead,
        "overhead_paired": paired_overhead,
        "contended_runs": contended_runs,
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"reports: {out_dir}")
    return 1 if args.check and (contended_runs or not met) else 0


if __name__ == "__main__":
    sys.exit(main())
