"""Training on a shared machine: the main job's CNN (one epoch of Fashion-MNIST, batch 64, each
framework's default thread settings) in Tandem and in TensorFlow 2.15, in three scenarios, the
frameworks' rounds interleaved:

  three   three runs at once, each in its own log folder with its own learning rate (a
          hyper-parameter A/B test as users start one): the wall time of the three
  busy    one run beside one busy process per usable core (a noisy neighbour, a build): its
          training samples/s
  alone   one run on a quiet machine: its training samples/s

    .venv/bin/python bench/shared_machine.py --tandem build/tandem --rounds 3
    .venv/bin/python bench/shared_machine.py --tandem build/tandem --baseline OLD/tandem \\
        --scenarios three,alone --rounds 5

--baseline adds a second Tandem binary (before and after a change, side by side); --tandem-env
NAME=VALUE (repeatable) sets a variable for the Tandem runs only (e.g. OMP_WAIT_POLICY=passive).
Before each round the script waits (up to --settle seconds) for the machine to be quiet, and
prints how busy it was. Prints a Markdown table per scenario: median and range over the rounds,
and each framework's ratio to Tandem's.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LEARNING_RATES = ("1e-3", "2e-3", "3e-3")
BATCH_SIZE = 64


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tandem", default=str(REPO / "build" / "tandem"))
    parser.add_argument("--baseline", help="a second tandem binary, measured beside --tandem")
    parser.add_argument("--python", default=str(REPO / ".venv" / "bin" / "python"))
    parser.add_argument("--scenarios", default="three,busy,alone")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--frameworks", default="tandem,tf", help="tandem and/or tf")
    parser.add_argument("--tandem-env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--settle", type=float, default=60, help="seconds to wait for quiet")
    args = parser.parse_args()
    args.scenarios = args.scenarios.split(",")
    for scenario in args.scenarios:
        if scenario not in ("three", "busy", "alone"):
            parser.error(f"--scenarios: unknown scenario {scenario!r} (three, busy, alone)")
    args.frameworks = args.frameworks.split(",")
    for name in (args.tandem, args.baseline):
        if name and not os.access(name, os.X_OK):
            parser.error(f"{name}: no such program; build it first (make build)")
    return args


def procs_running():
    with open("/proc/stat") as stat:
        for line in stat:
            if line.startswith("procs_running"):
                return int(line.split()[1]) - 1  # less this reader
    return 0


def wait_for_quiet(settle):
    """Waits until a second passes with no other runnable thread; returns the mean seen."""
    deadline = time.monotonic() + settle
    while True:
        samples = []
        for _ in range(10):
            samples.append(procs_running())
            time.sleep(0.1)
        mean = statistics.mean(samples)
        if mean < 0.2 or time.monotonic() > deadline:
            return mean


class Contenders:
    """Processes that spin on a core each while the object is in a with-block."""

    def __init__(self, count):
        self.count = count
        self.processes = []

    def __enter__(self):
        for _ in range(self.count):
            self.processes.append(subprocess.Popen([sys.executable, "-c", "while True: pass"]))
        time.sleep(1)  # they are running before the measured run starts
        return self

    def __exit__(self, *exc):
        for process in self.processes:
            process.kill()
            process.wait()


def tandem_command(binary, folder, learning_rate):
    return [
        binary, "train", "--epochs", "1", "--batch-size", str(BATCH_SIZE),
        "--lr", learning_rate, "--logdir", str(folder / "logs"),
        "--report", str(folder / "report.json"), "--quiet",
    ]  # fmt: skip


def tf_command(python, folder, learning_rate):
    # tf_cnn.py's Adam has Keras' default learning rate; the rate does not change the work.
    del learning_rate
    return [
        python, str(REPO / "bench" / "peers" / "tf_cnn.py"), "--epochs", "1",
        "--batch-size", str(BATCH_SIZE), "--report", str(folder / "report.json"),
    ]  # fmt: skip


def samples_per_second(folder):
    # Both reports name it so: Tandem's --report and tf_cnn.py's.
    return json.loads((folder / "report.json").read_text())["samples_per_sec"]


def start(runner, count, scratch, env):
    """Starts `count` runs of `runner` at once; returns (wall seconds, samples/s of each)."""
    folders = []
    processes = []
    began = time.perf_counter()
    for index in range(count):
        folder = Path(tempfile.mkdtemp(dir=scratch))
        folders.append(folder)
        command = runner["command"](folder, LEARNING_RATES[index % len(LEARNING_RATES)])
        log = open(folder / "output.log", "w")
        processes.append(
            subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        )
    for process, folder in zip(processes, folders):
        if process.wait() != 0:
            sys.exit(
                f"{runner['name']} failed ({process.returncode}):\n"
                + (folder / "output.log").read_text()[-3000:]
            )
    wall = time.perf_counter() - began
    return wall, [samples_per_second(folder) for folder in folders]


def runners(args):
    tandem_env = dict(os.environ)
    for assignment in args.tandem_env:
        name, _, value = assignment.partition("=")
        tandem_env[name] = value
    found = []
    if "tandem" in args.frameworks:
        found.append(
            {
                "name": "Tandem",
                "framework": "tandem",
                "command": lambda folder, lr: tandem_command(args.tandem, folder, lr),
                "env": tandem_env,
            }
        )
        if args.baseline:
            found.append(
                {
                    "name": "Tandem (baseline)",
                    "framework": "tandem",
                    "command": lambda folder, lr: tandem_command(args.baseline, folder, lr),
                    "env": tandem_env,
                }
            )
    if "tf" in args.frameworks:
        found.append(
            {
                "name": "TensorFlow 2.15",
                "framework": "tf",
                "command": lambda folder, lr: tf_command(args.python, folder, lr),
                "env": dict(os.environ),
            }
        )
    return found


def usable_cores():
    return len(os.sched_getaffinity(0))


def measure(args):
    results = {scenario: {} for scenario in args.scenarios}
    with tempfile.TemporaryDirectory(prefix="tandem-shared-") as scratch:
        for round_index in range(args.rounds):
            for scenario in args.scenarios:
                for runner in runners(args):
                    quiet = wait_for_quiet(args.settle)
                    if scenario == "three":
                        wall, rates = start(runner, 3, scratch, runner["env"])
                        value = wall
                    elif scenario == "busy":
                        with Contenders(usable_cores()):
                            _, rates = start(runner, 1, scratch, runner["env"])
                        value = rates[0]
                    else:
                        _, rates = start(runner, 1, scratch, runner["env"])
                        value = rates[0]
                    results[scenario].setdefault(runner["name"], []).append(value)
                    print(
                        f"round {round_index + 1} {scenario:5s} {runner['name']:18s} "
                        f"{value:9.1f} {'s' if scenario == 'three' else 'samples/s'} "
                        f"(each: {', '.join(f'{r:.0f}' for r in rates)} samples/s; "
                        f"others runnable before: {quiet:.1f})",
                        flush=True,
                    )
    return results


def table(scenario, by_runner):
    unit = "wall s, 3 runs" if scenario == "three" else "samples/s"
    lines = [
        f"\n{scenario}: median (range) over {len(next(iter(by_runner.values())))} rounds",
        f"| framework | {unit} | Tandem's advantage |",
        "|---|---:|---:|",
    ]
    tandem = statistics.median(by_runner["Tandem"]) if "Tandem" in by_runner else None
    for name, values in by_runner.items():
        median = statistics.median(values)
        if tandem is None:
            ratio = ""
        elif scenario == "three":
            ratio = f"{median / tandem:.2f}x"  # their time over Tandem's
        else:
            ratio = f"{tandem / median:.2f}x"  # Tandem's rate over theirs
        lines.append(f"| {name} | {median:.1f} ({min(values):.1f}..{max(values):.1f}) | {ratio} |")
    return "\n".join(lines)


def main():
    args = parse_args()
    print(
        f"{os.uname().nodename}: {usable_cores()} usable cores; Tandem {args.tandem}"
        + (f", baseline {args.baseline}" if args.baseline else "")
        + (f", Tandem env {' '.join(args.tandem_env)}" if args.tandem_env else ""),
        flush=True,
    )
    results = measure(args)
    for scenario in args.scenarios:
        print(table(scenario, results[scenario]))


if __name__ == "__main__":
    main()
