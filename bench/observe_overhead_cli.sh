#!/usr/bin/env bash
# The cost of TensorBoard logging every step plus the resource monitor at 1 Hz, end to end:
# `tandem train` with and without --logdir, in interleaved pairs of whole runs. The work is done
# by observe_overhead_cli.py (standard library only); see bench/README.md and --help. The C++
# program bench/observe_overhead.cpp measures the same inside one run, which is steadier.
set -euo pipefail
exec python3 "$(dirname "$0")/observe_overhead_cli.py" "$@"
