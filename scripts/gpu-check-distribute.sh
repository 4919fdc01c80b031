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
"$tandem" launch -n "$gpus" -- "$tandem" train --strategy multi-worker "${common[@]}"

if [ "$gpus" -gt 1 ]; then
  echo "== Mirrored over $gpus GPUs: tandem train --strategy mirrored"
  "$tandem" train --strategy mirrored "${common[@]}"
else
  echo "== Mirrored: one GPU, so it is OneDevice (needs two GPUs to run NCCL in one process)"
fi
