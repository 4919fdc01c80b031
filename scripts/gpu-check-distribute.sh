#!/usr/bin/env bash
# The device and strategy part of the GPU check (run by scripts/gpu-check.sh on a GPU machine, or
# alone): discovery and the doctor, training on one GPU, MultiWorker over NCCL with one worker per
# GPU under `tandem launch`, and Mirrored over every GPU when there are several. Prints each
# run's result lines; exits non-zero at the first failure.
#
#   scripts/gpu-check-distribute.sh [TANDEM_BINARY] [FASHION_MNIST_DIR]
set -euo pipefail

tandem=${1:-build/tandem}
data_dir=${2:-/usr/share/datasets/fashion-mnist}
common=(--epochs 1 --quiet --data-dir "$data_dir")

# A bundle from scripts/gpu-bundle.sh carries Open MPI's runtime beside bin/ (the GPU machine has
# none): Open MPI and PMIx find their plugins and help texts through these variables, which
# mpirun passes on to the workers.
bundle_root=$(cd "$(dirname "$tandem")/.." && pwd)
if [ -x "$bundle_root/openmpi/bin/mpirun" ]; then
  export OPAL_PREFIX=$bundle_root/openmpi
  export PMIX_PREFIX=$bundle_root/pmix PMIX_LIBDIR=$bundle_root/pmix/lib
  export PMIX_PKGLIBDIR=$bundle_root/pmix/lib/pmix PMIX_DATADIR=$bundle_root/pmix/share
  export PMIX_PKGDATADIR=$bundle_root/pmix/share/pmix
  export PATH=$bundle_root/openmpi/bin:$PATH
  export LD_LIBRARY_PATH=$bundle_root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  echo "Open MPI: the bundle's ($OPAL_PREFIX)"
fi

echo "== tandem devices"
"$tandem" devices
echo "== tandem doctor"
"$tandem" doctor --data-dir "$data_dir" || echo "(doctor reported failures; see above)"

gpus=$("$tandem" devices --json | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["gpus"]))')
if [ "$gpus" -eq 0 ]; then
  echo "no GPU found; nothing more to check here" >&2
  exit 1
fi

echo "== one GPU: tandem train --strategy gpu"
"$tandem" train --strategy gpu "${common[@]}"

# One worker per GPU: with one GPU this is a NCCL communicator of one rank, which still runs
# NCCL's start-up over MPI, the bucketed all-reduce on its stream and the completion polling.
echo "== MultiWorker over NCCL: tandem launch -n $gpus -- tandem train --strategy multi-worker"
if command -v mpirun >/dev/null; then
  "$tandem" launch -n "$gpus" -- "$tandem" train --strategy multi-worker "${common[@]}"
else
  echo "SKIPPED: no mpirun here (neither the bundle's openmpi/ nor an installed Open MPI), and" \
    "tandem launch starts the workers through it; rebuild the bundle with scripts/gpu-bundle.sh"
fi

if [ "$gpus" -gt 1 ]; then
  echo "== Mirrored over $gpus GPUs: tandem train --strategy mirrored"
  "$tandem" train --strategy mirrored "${common[@]}"
else
  echo "== Mirrored: one GPU, so it is OneDevice (needs two GPUs to run NCCL in one process)"
fi
