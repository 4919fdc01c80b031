"""Tandem's input pipeline against tf.data (TensorFlow 2.15) on the same files and threads:
(a) decoding and augmenting real JPEG photographs at ImageNet sizes to 224x224 batches and
(b) reading Fashion-MNIST into shuffled, scaled batches. R repeats, interleaved; prints each
side's median elements/s and spread, and Tandem's ratio to tf.data against the 1.3x target,
with elements per CPU-second of each process (what the work costs, whatever else the machine
runs) beside it.

    bench/data_pipeline_vs_tfdata.sh --threads 2 --repeats 3

The photographs come from the Debian package mate-backgrounds (its nature/ photos and
Elephants.jpg; scripts/install-deps.sh installs it, and this script runs that when they are
missing); `data_pipeline prepare` re-encodes random
crops of them at ImageNet-like sizes (longer side 333..500 pixels, JPEG quality 90) into
out/bench-data/. The peer runs in the project virtualenv (scripts/python-env.sh bench).
"""

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import cnn_vs_peers as shared

REPO = Path(__file__).resolve().parent.parent
PEER = REPO / "bench/peers/tf_data.py"
PHOTO_PACKAGE = "mate-backgrounds"
PHOTO_GLOBS = [
    "/usr/share/backgrounds/mate/nature/*.jpg",
    "/usr/share/backgrounds/mate/abstract/Elephants.jpg",
]
PREPARE_SEED = 7
TARGET = 1.3  # Tandem's elements/s over tf.data's, on the workloads that carry a target


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--passes", type=int, default=4, help="per run; the first is a warm-up")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--images", type=int, default=512, help="JPEG images in the data set")
    parser.add_argument(
        "--workloads", default="jpeg,fashion", help="comma-separated subset of jpeg,fashion"
    )
    parser.add_argument(
        "--bench-bin",
        default=os.environ.get("TANDEM_DATA_BENCH", str(REPO / "build/bench/data_pipeline")),
        help="Tandem's data_pipeline program (default $TANDEM_DATA_BENCH, else "
        "build/bench/data_pipeline)",
    )
    parser.add_argument("--out-dir", help="reports (default out/bench/data-<date-time>)")
    parser.add_argument("--wait-idle", type=float, default=0, metavar="SECONDS")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is not met")
    args = parser.parse_args()
    args.workloads = args.workloads.split(",")
    if set(args.workloads) - {"jpeg", "fashion"}:
        parser.error("--workloads takes jpeg and/or fashion")
    for name in ("threads", "batch_size", "repeats", "images"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.passes < 2:
        parser.error("--passes must be at least 2 (the first is a warm-up)")
    return args


def photographs():
    """The source photographs; scripts/install-deps.sh installs their package when missing."""
    photos = sorted(path for pattern in PHOTO_GLOBS for path in glob.glob(pattern))
    if photos:
        return photos
    print(f"the photographs ({PHOTO_PACKAGE}) are missing: running scripts/install-deps.sh",
          flush=True)
    subprocess.run([str(REPO / "scripts/install-deps.sh")], check=True)
    photos = sorted(path for pattern in PHOTO_GLOBS for path in glob.glob(pattern))
    if not photos:
        sys.exit(f"{PHOTO_PACKAGE} is installed but has no photographs at {PHOTO_GLOBS}")
    return photos


def jpeg_dataset(args):
    """The re-encoded JPEG folder, made once per (photos, count, seed) and reused."""
    photos = photographs()
    directory = REPO / f"out/bench-data/jpeg-{args.images}-seed{PREPARE_SEED}"
    stamp = directory / "prepared.json"
    settings = {"photos": photos, "images": args.images, "seed": PREPARE_SEED}
    if stamp.exists() and json.loads(stamp.read_text()) == settings:
        return directory
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    print(f"re-encoding {args.images} crops of {len(photos)} photographs into {directory}",
          flush=True)
    subprocess.run(
        [args.bench_bin, "prepare", "--photos", ",".join(photos), "--out", str(directory),
         "--count", str(args.images), "--seed", str(PREPARE_SEED)],
        check=True,
    )
    stamp.write_text(json.dumps(settings) + "\n")
    return directory


def peer_python():
    setup = subprocess.run([str(REPO / "scripts/python-env.sh"), "bench"], stdout=sys.stderr)
    if setup.returncode == 0:
        return Path(os.environ.get("TANDEM_VENV", REPO / ".venv")) / "bin/python"
    if setup.returncode == shared.INDEX_UNREACHABLE:
        print("SKIP tensorflow: the Python package index cannot be reached to install it "
              "(scripts/python-env.sh bench)")
    else:
        print(f"SKIP tensorflow: scripts/python-env.sh bench failed ({setup.returncode})")
    return None


def configurations(args, python):
    """(workload, side, variant, command, carries the target) for every run."""
    common = ["--threads", str(args.threads), "--batch-size", str(args.batch_size),
              "--passes", str(args.passes)]
    runs = []
    if "jpeg" in args.workloads:
        directory = str(jpeg_dataset(args))
        for decode, target in (("crop", True), ("full", False)):
            job = ["jpeg", "--dir", directory, "--decode", decode, *common]
            runs.append(("jpeg", "tandem", decode, [args.bench_bin, *job], target))
            if python:
                runs.append(("jpeg", "tensorflow", decode, [str(python), str(PEER), *job], target))
    if "fashion" in args.workloads:
        runs.append(("fashion", "tandem", "idx", [args.bench_bin, "fashion", *common], True))
        if python:
            for source in ("tensor_slices", "records"):
                runs.append(("fashion", "tensorflow", source,
                             [str(python), str(PEER), "fashion", "--source", source, *common], True))
    return runs


def run_once(command, report, args):
    if args.wait_idle:
        shared.wait_for_idle_cpus(args.wait_idle)
    busy_before, children_before = shared.busy_cpu_seconds(), shared.children_cpu_seconds()
    started = time.monotonic()
    completed = subprocess.run([*command, "--report", str(report)], capture_output=True, text=True)
    wall = time.monotonic() - started
    others = (shared.busy_cpu_seconds() - busy_before) - (
        shared.children_cpu_seconds() - children_before)
    if completed.returncode != 0 or not report.exists():
        sys.exit(f"`{' '.join(command)}` failed ({completed.returncode}):\n"
                 + "\n".join(completed.stderr.strip().splitlines()[-15:]))
    result = json.loads(report.read_text())
    result["others_cpu_share"] = round(max(0.0, others) / (wall * os.cpu_count()), 3)
    return result


def main():
    args = parse_args()
    if not os.access(args.bench_bin, os.X_OK):
        sys.exit(f"no {args.bench_bin}: build the bench_data_pipeline target (make build) or set "
                 "TANDEM_DATA_BENCH")
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    python = peer_python()
    runs = configurations(args, python)
    out_dir = Path(args.out_dir or REPO / "out/bench" / time.strftime("data-%Y%m%d-%H%M%S"))
    out_dir.mkdir(parents=True, exist_ok=True)
    print(f"started {started} on {shared.describe_machine()}")
    print(f"{args.threads} threads, batch {args.batch_size}, {args.passes} passes a run (the "
          f"first a warm-up), {args.repeats} repeats interleaved")
    results = {index: [] for index in range(len(runs))}
    for repeat in range(args.repeats):
        shift = repeat % len(runs)
        for index in list(range(len(runs)))[shift:] + list(range(len(runs)))[:shift]:
            workload, side, variant, command, _ = runs[index]
            result = run_once(command, out_dir / f"{workload}-{side}-{variant}-{repeat + 1}.json",
                              args)
            results[index].append(result)
            contended = (f", CONTENDED: other processes used {result['others_cpu_share']:.0%} "
                         "of the CPUs" if result["others_cpu_share"] > shared.CONTENDED_SHARE
                         else "")
            print(f"  {workload} {side} {variant} #{repeat + 1}: "
                  f"{result['elements_per_sec']:.0f} elements/s{contended}", flush=True)

    print()
    rows = [("workload", "framework", "variant", "elements/s median", "min..max",
             "elements/CPU-s median", "min..max")]
    medians = {}
    cpu_medians = {}
    for index, (workload, side, variant, _, _) in enumerate(runs):
        rates = [result["elements_per_sec"] for result in results[index]]
        cpu_rates = [result["elements_per_cpu_sec"] for result in results[index]]
        medians[(workload, side, variant)] = statistics.median(rates)
        cpu_medians[(workload, side, variant)] = statistics.median(cpu_rates)
        rows.append((workload, f"{side} {results[index][0]['version']}", variant,
                     f"{medians[(workload, side, variant)]:.0f}",
                     f"{min(rates):.0f}..{max(rates):.0f}",
                     f"{cpu_medians[(workload, side, variant)]:.0f}",
                     f"{min(cpu_rates):.0f}..{max(cpu_rates):.0f}"))
    shared.print_table(rows)
    print()
    all_met = True
    for workload, variants in (("jpeg", ("crop", "full")), ("fashion", ("idx",))):
        for variant in variants:
            ours = medians.get((workload, "tandem", variant))
            peers = {key[2]: value for key, value in medians.items()
                     if key[0] == workload and key[1] == "tensorflow"
                     and (workload == "fashion" or key[2] == variant)}
            if ours is None or not peers:
                continue
            best_variant, best = max(peers.items(), key=lambda item: item[1])
            ratio = ours / best
            cpu_ratio = cpu_medians[(workload, "tandem", variant)] / cpu_medians[
                (workload, "tensorflow", best_variant)]
            carries_target = any(run[4] for run in runs if run[0] == workload and run[2] == variant)
            verdict = ""
            if carries_target:
                all_met &= ratio >= TARGET
                verdict = f"   (target >= {TARGET}x: {'met' if ratio >= TARGET else 'NOT met'})"
            print(f"{workload} {variant}: Tandem / tf.data ({best_variant}) {ratio:.2f}x{verdict}; "
                  f"per CPU-second {cpu_ratio:.2f}x")
    summary = {
        "started": started,
        "machine": shared.describe_machine(),
        "threads": args.threads,
        "batch_size": args.batch_size,
        "passes": args.passes,
        "repeats": args.repeats,
        "runs": [{"command": runs[index][3], "results": results[index]} for index in results],
    }
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"reports: {out_dir}")
    return 1 if args.check and not all_met else 0


if __name__ == "__main__":
    sys.exit(main())
