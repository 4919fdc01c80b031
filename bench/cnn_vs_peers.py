"""Tandem against TensorFlow/Keras and PyTorch on the main job (the Fashion-MNIST CNN): same
batch size, threads and data, R repeats interleaved; prints each framework's median samples/s
and spread, and Tandem's ratio to each peer against the targets. Each framework runs its step
both ways: Tandem compiled (--jit on) and eager (tandem-eager), Keras' tf.function and with
jit_compile=True (tensorflow-xla), PyTorch eager and torch.compile (pytorch-compile). Needs only the standard
library: the peers run in the project virtualenv (scripts/python-env.sh bench), Tandem from
build/tandem or $TANDEM_BIN.

    bench/cnn_vs_peers.sh --batch-size 32 --threads 2 --repeats 3
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Each peer's script, and whether it runs with --compile.
PEER_SCRIPTS = {
    "tensorflow": (REPO / "bench/peers/tf_cnn.py", False),
    "tensorflow-xla": (REPO / "bench/peers/tf_cnn.py", True),
    "pytorch": (REPO / "bench/peers/torch_cnn.py", False),
    "pytorch-compile": (REPO / "bench/peers/torch_cnn.py", True),
}
# Tandem's training step compiled (the default) and eager.
TANDEM_JIT = {"tandem": "on", "tandem-eager": "off"}
FRAMEWORKS = [*TANDEM_JIT, *PEER_SCRIPTS]
# Tandem's (compiled) samples/s must be at least this multiple of each peer's; and its compiled
# step at least 1.3x its eager one.
TARGETS = {"tensorflow": 1.5, "pytorch": 1.2, "tandem-eager": 1.3}
# Tandem's `train` leaves its first 10 steps out of samples_per_sec; the peers are told the same.
WARMUP_STEPS = 10
INDEX_UNREACHABLE = 3  # scripts/python-env.sh's status when the package index cannot be reached
# A run during which other processes used more than this share of the CPUs is flagged: on a
# small machine a compiler running alongside moves the figures far more than any framework does.
CONTENDED_SHARE = 0.10


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument(
        "--frameworks",
        default=",".join(FRAMEWORKS),
        help=f"comma-separated subset of {','.join(FRAMEWORKS)} (default all)",
    )
    parser.add_argument(
        "--tandem",
        default=os.environ.get("TANDEM_BIN", str(REPO / "build/tandem")),
        help="the tandem binary (default $TANDEM_BIN, else build/tandem)",
    )
    parser.add_argument(
        "--out-dir", help="where each run's JSON report goes (default out/bench/<date-time>)"
    )
    parser.add_argument(
        "--wait-idle",
        type=float,
        default=0,
        metavar="SECONDS",
        help="before each run, wait up to this long for other processes to leave the CPUs idle",
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is not met")
    args = parser.parse_args()
    args.frameworks = args.frameworks.split(",")
    unknown = set(args.frameworks) - set(FRAMEWORKS)
    if unknown:
        parser.error(
            f"unknown framework(s) {','.join(sorted(unknown))}; choose from {','.join(FRAMEWORKS)}"
        )
    for name in ("batch_size", "threads", "repeats", "epochs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def busy_cpu_seconds():
    """Seconds all CPUs together have spent busy since boot (the "cpu" line of /proc/stat)."""
    with open("/proc/stat") as stat:
        ticks = [int(value) for value in stat.readline().split()[1:9]]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def wait_for_idle_cpus(limit_seconds, quiet_seconds=5):
    """Waits until the CPUs have been idle for quiet_seconds in a row, at most limit_seconds: a
    build leaves gaps of a second or two between compiler runs, which must not count as quiet."""
    deadline = time.monotonic() + limit_seconds
    quiet = 0
    while quiet < quiet_seconds and time.monotonic() < deadline:
        before = busy_cpu_seconds()
        time.sleep(1)
        idle = (busy_cpu_seconds() - before) / os.cpu_count() < CONTENDED_SHARE
        quiet = quiet + 1 if idle else 0


@dataclass
class Measured:
    """What run_measured saw: each command's exit status and last output lines, the CPU seconds
    the commands used together and the share of the CPUs other processes used meanwhile."""

    statuses: list
    tails: list
    cpu_seconds: float
    others_share: float

    def failure(self, commands):
        """The first failed command with its exit status and output, or ""."""
        for command, status, tail in zip(commands, self.statuses, self.tails):
            if status != 0:
                return f"`{' '.join(map(str, command))}` exited with {status}:\n{tail}"
        return ""


def run_measured(commands, wait_idle=0):
    """Runs the commands at the same time, after waiting up to wait_idle seconds for idle CPUs."""
    if wait_idle:
        wait_for_idle_cpus(wait_idle)
    busy_before, children_before = busy_cpu_seconds(), children_cpu_seconds()
    started = time.monotonic()
    processes = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for command in commands
    ]
    outputs = [process.communicate()[0] for process in processes]
    wall = time.monotonic() - started
    cpu = children_cpu_seconds() - children_before
    others = (busy_cpu_seconds() - busy_before) - cpu
    return Measured(
        statuses=[process.returncode for process in processes],
        tails=["\n".join(output.strip().splitlines()[-15:]) for output in outputs],
        cpu_seconds=cpu,
        others_share=max(0.0, others) / (wall * os.cpu_count()),
    )


@dataclass
class Run:
    samples_per_sec: float
    epoch_seconds: float
    test_accuracy: float
    version: str
    others_share: float  # share of the CPUs that other processes used during the run
    report: dict


@dataclass
class Framework:
    name: str
    command: list = field(default_factory=list)
    skipped: str = ""
    failure: str = ""
    runs: list = field(default_factory=list)


def read_run(framework, report, others_share):
    """The figures compared, from Tandem's `train --report` or a peer's JSON line."""
    return Run(
        samples_per_sec=report["samples_per_sec"],
        epoch_seconds=report["epoch_seconds"],
        test_accuracy=report["test_accuracy"],
        version=report["tandem_version" if framework in TANDEM_JIT else "version"],
        others_share=others_share,
        report=report,
    )


def prepare_peers(frameworks):
    """Installs the peers' virtualenv; returns its python, or marks the peers skipped."""
    peers = [framework for framework in frameworks if framework.name in PEER_SCRIPTS]
    if not peers:
        return None
    setup = subprocess.run([str(REPO / "scripts/python-env.sh"), "bench"], stdout=sys.stderr)
    if setup.returncode == 0:
        return Path(os.environ.get("TANDEM_VENV", REPO / ".venv")) / "bin/python"
    reason = (
        "the Python package index cannot be reached to install them (scripts/python-env.sh bench)"
        if setup.returncode == INDEX_UNREACHABLE
        else f"scripts/python-env.sh bench failed with status {setup.returncode} (see above)"
    )
    for peer in peers:
        peer.skipped = reason
    return None


def build_commands(frameworks, args, python):
    job = ["--epochs", str(args.epochs), "--batch-size", str(args.batch_size)]
    job += ["--threads", str(args.threads)]
    for framework in frameworks:
        if framework.skipped:
            continue
        if framework.name in TANDEM_JIT:
            if not os.access(args.tandem, os.X_OK):
                framework.skipped = (
                    f"no tandem binary at {args.tandem}: run `make build` or set TANDEM_BIN"
                )
                continue
            # --quiet: no progress bar, as the peers train with Keras' verbose=0.
            jit = ["--jit", TANDEM_JIT[framework.name]]
            framework.command = [args.tandem, "train", *job, *jit, "--quiet"]
        else:
            script, compiled = PEER_SCRIPTS[framework.name]
            framework.command = [str(python), str(script), *job, "--warmup-steps", str(WARMUP_STEPS)]
            if compiled:
                framework.command.append("--compile")


def run_once(framework, report_path, args):
    """One training run; returns its Run, or None after recording the failure."""
    command = [*framework.command, "--report", str(report_path)]
    measured = run_measured([command], args.wait_idle)
    framework.failure = measured.failure([command])
    if not framework.failure and not report_path.exists():
        framework.failure = f"`{' '.join(command)}` wrote no report {report_path}"
    if framework.failure:
        return None
    report = json.loads(report_path.read_text())
    if report.get("warmup_steps", WARMUP_STEPS) != WARMUP_STEPS:
        framework.failure = (
            f"{report_path} left out {report['warmup_steps']} warm-up steps, the peers "
            f"{WARMUP_STEPS}: set WARMUP_STEPS in {__file__} to Tandem's"
        )
        return None
    return read_run(framework.name, report, measured.others_share)


def describe_machine():
    with open("/proc/cpuinfo") as cpuinfo:
        models = [
            line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")
        ]
    return f"{models[0] if models else 'unknown CPU'}, {len(models)} logical CPUs"


def print_table(rows):
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())


def summarize(frameworks):
    """Prints the median table and the ratios; returns the medians and whether all targets hold."""
    rows = [("framework", "version", "samples/s median", "min..max", "epoch s", "test acc")]
    medians = {}
    for framework in frameworks:
        if not framework.runs:
            continue
        rates = [run.samples_per_sec for run in framework.runs]
        medians[framework.name] = statistics.median(rates)
        rows.append(
            (
                framework.name,
                framework.runs[0].version,
                f"{medians[framework.name]:.0f}",
                f"{min(rates):.0f}..{max(rates):.0f}",
                f"{statistics.median(run.epoch_seconds for run in framework.runs):.1f}",
                f"{statistics.median(run.test_accuracy for run in framework.runs):.4f}",
            )
        )
    print_table(rows)
    all_met = True
    if "tandem" in medians:
        print()
        for peer, target in TARGETS.items():
            if peer in medians:
                ratio = medians["tandem"] / medians[peer]
                all_met &= ratio >= target
                verdict = "met" if ratio >= target else "NOT met"
                print(f"Tandem / {peer}: {ratio:.2f}x   (target >= {target}x: {verdict})")
    return medians, all_met


def main():
    args = parse_args()
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    frameworks = [Framework(name) for name in args.frameworks]
    python = prepare_peers(frameworks)
    build_commands(frameworks, args, python)
    out_dir = Path(args.out_dir or REPO / "out/bench" / time.strftime("%Y%m%d-%H%M%S"))
    out_dir.mkdir(parents=True, exist_ok=True)

    print(f"started {started} on {describe_machine()}")
    print(
        f"job: Fashion-MNIST CNN, {args.epochs} epoch(s), batch {args.batch_size}, "
        f"{args.threads} threads, {args.repeats} repeats interleaved; samples/s leaves out each "
        f"run's first {WARMUP_STEPS} steps"
    )
    active = [framework for framework in frameworks if framework.command]
    for framework in active:
        print(f"  {framework.name}: {' '.join(framework.command)} --report FILE")
    sys.stdout.flush()

    # Interleaved, each repeat starting one framework later, so that a slow drift of the machine
    # (heat, other load) spreads over all frameworks instead of favouring one.
    for repeat in range(args.repeats):
        shift = repeat % len(active) if active else 0
        for framework in active[shift:] + active[:shift]:
            if framework.failure:
                continue
            name = f"{framework.name}-b{args.batch_size}-t{args.threads}-{repeat + 1}.json"
            run = run_once(framework, out_dir / name, args)
            if run is None:
                print(f"  {framework.name} #{repeat + 1}: FAILED", flush=True)
                continue
            framework.runs.append(run)
            contended = (
                f", CONTENDED: other processes used {run.others_share:.0%} of the CPUs"
                if run.others_share > CONTENDED_SHARE
                else ""
            )
            print(
                f"  {framework.name} #{repeat + 1}: {run.samples_per_sec:.1f} samples/s{contended}",
                flush=True,
            )

    print()
    medians, all_met = summarize(frameworks)
    for framework in frameworks:
        if framework.skipped:
            print(f"SKIP {framework.name}: {framework.skipped}")
        if framework.failure:
            print(f"FAILED {framework.name}: {framework.failure}")
    summary = {
        "started": started,
        "machine": describe_machine(),
        "batch_size": args.batch_size,
        "threads": args.threads,
        "repeats": args.repeats,
        "epochs": args.epochs,
        "warmup_steps": WARMUP_STEPS,
        "commands": {framework.name: framework.command for framework in active},
        "median_samples_per_sec": medians,
        "runs": [
            {
                "framework": framework.name,
                "others_cpu_share": round(run.others_share, 3),
                "report": run.report,
            }
            for framework in frameworks
            for run in framework.runs
        ],
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"reports: {out_dir}")
    if any(framework.failure for framework in frameworks):
        return 1
    return 1 if args.check and not all_met else 0


if __name__ == "__main__":
    sys.exit(main())
