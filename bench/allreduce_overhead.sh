#!/usr/bin/env bash
# The all-reduce's share of a multi-worker step on the main job: two MPI workers against two
# independent processes on the same cores. The work is done by allreduce_overhead.py (standard
# library only); see bench/README.md and --help.
set -euo pipefail
exec python3 "$(dirname "$0")/allreduce_overhead.py" "$@"
