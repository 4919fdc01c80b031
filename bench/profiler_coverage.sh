#!/usr/bin/env bash
# How much of a training step the profiler's op times explain: `tandem train --profile` prints
# "accounted for X% of the step time"; the rest is dispatch, tape bookkeeping and the host
# between ops. The share depends on the machine's load, so it is measured here, REPEATS times,
# and reported as the median with its spread (min-max), not asserted in a test.
#
#   bench/profiler_coverage.sh [--tandem PATH] [--repeats 5] [--threads 2] [--steps 100:149]
#                              [--train-fraction 0.1]
#
# --train-fraction keeps the first fraction of Fashion-MNIST's training set (through
# --validation-split) so a repeat takes seconds.
set -euo pipefail

tandem=build/tandem
repeats=5
threads=2
steps=100:149
fraction=0.1
while [ $# -gt 0 ]; do
  case "$1" in
    --tandem) tandem=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --train-fraction) fraction=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "profiler_coverage: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$tandem" ] || { echo "profiler_coverage: no tandem binary at $tandem; build first" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
split=$(python3 -c "print(round(1 - $fraction, 6))")
shares=()
for ((r = 1; r <= repeats; r++)); do
  output=$("$tandem" train --epochs 1 --threads "$threads" --validation-split "$split" --quiet \
    --profile --profile-steps "$steps" --trace "$work/trace.json")
  share=$(sed -n 's/.*accounted for \([0-9.]*\)% of the step time.*/\1/p' <<<"$output" | head -1)
  [ -n "$share" ] || { echo "profiler_coverage: no 'accounted for' line in the output:" >&2; echo "$output" >&2; exit 1; }
  echo "repeat $r: $share% of the step time accounted for" >&2
  shares+=("$share")
done
python3 - "${shares[@]}" <<'PY'
import statistics, sys
values = [float(v) for v in sys.argv[1:]]
print(f"profiler coverage: median {statistics.median(values):.1f}% of the step time "
      f"(min {min(values):.1f}%, max {max(values):.1f}%, {len(values)} runs)")
PY
