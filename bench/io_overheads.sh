#!/usr/bin/env bash
# What the io features cost the main job, measured side by side: deterministic mode (kernels
# summing in a fixed order, tandem train --deterministic) and checkpointing every N steps
# (the state copied on the training thread, the files written in the background). Runs the
# three variants interleaved, REPEATS times each, and prints the median training samples/s of
# each with its spread (min-max) and the ratio to the plain run, and how long the checkpoints
# took to copy (training's share) and to write (the writer thread's).
#
#   bench/io_overheads.sh [--tandem PATH] [--model cnn] [--repeats 3] [--threads 2]
#                         [--train-fraction 0.2] [--checkpoint-every 100]
#
# --train-fraction keeps the first fraction of Fashion-MNIST's training set (through
# --validation-split) so a repeat takes seconds; the throughput is per step either way.
set -euo pipefail

tandem=build/tandem
model=cnn
repeats=3
threads=2
fraction=0.2
every=100
while [ $# -gt 0 ]; do
  case "$1" in
    --tandem) tandem=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --train-fraction) fraction=$2; shift 2 ;;
    --checkpoint-every) every=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "io_overheads: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$tandem" ] || { echo "io_overheads: no tandem binary at $tandem; build first" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
split=$(python3 -c "print(round(1 - $fraction, 6))")
common=(train --model "$model" --epochs 1 --threads "$threads" --validation-split "$split" --quiet)

declare -A samples
checkpoint_lines=()
for ((r = 1; r <= repeats; r++)); do
  for variant in plain deterministic checkpoints; do
    extra=()
    case $variant in
      deterministic) extra=(--deterministic) ;;
      checkpoints) rm -rf "$work/ckpt"; extra=(--checkpoint-dir "$work/ckpt" --checkpoint-every "$every") ;;
    esac
    output=$("$tandem" "${common[@]}" "${extra[@]}" --report "$work/report.json")
    value=$(python3 -c "import json; print(json.load(open('$work/report.json'))['samples_per_sec'])")
    samples[$variant]+="$value "
    if [ "$variant" = checkpoints ]; then
      checkpoint_lines+=("$(grep '^checkpoints:' <<<"$output")")
    fi
    echo "repeat $r $variant: $value samples/s" >&2
  done
done

python3 - "${samples[plain]}" "${samples[deterministic]}" "${samples[checkpoints]}" <<'EOF'
import statistics, sys
names = ["plain", "deterministic", "checkpoints"]
values = {name: [float(v) for v in text.split()] for name, text in zip(names, sys.argv[1:])}
base = statistics.median(values["plain"])
for name in names:
    vs = values[name]
    median = statistics.median(vs)
    print(f"{name:14s} median {median:9.1f} samples/s (min {min(vs):.1f}, max {max(vs):.1f}), "
          f"{median / base:.3f}x plain")
EOF
printf '%s\n' "${checkpoint_lines[@]}"
