#!/usr/bin/env bash
# The TPU check: the one script a user with a Cloud TPU VM runs to verify Tandem there. It needs
# a built Tandem (`make` in this folder) and Google's libtpu (`pip install libtpu`; its licence
# forbids shipping it with Tandem), and then
#   1. lists the devices: the TPU chips on the PCI bus and the libtpu Tandem found,
#   2. runs a few ops through libtpu against Tandem's CPU kernels (the op harness's xla mode with
#      libtpu in place of XLA:CPU; TPUs multiply f32 matrices in bf16 passes by default, hence
#      the bf16-sized tolerance),
#   3. trains the tutorial CNN on Fashion-MNIST with --strategy tpu (every core) for 3 epochs and
#      checks >= 90% test accuracy,
#   4. benchmarks the CNN on the TPU and on this VM's CPU (`tandem bench --devices tpu,cpu`) and
#      prints samples/s and the cost per 1,000 steps of each.
# Logs and the JSON results go to ./tpu-check-out (or $OUT). Exits 1 when a check failed.
# It has not been run on a TPU by Tandem's developers yet: please send its output.
#
#   scripts/tpu-check.sh [--libtpu PATH] [--data-dir DIR]
set -uo pipefail
cd "$(dirname "$0")/.."

libtpu=""
data_dir=/usr/share/datasets/fashion-mnist
while [ $# -gt 0 ]; do
  case "$1" in
    --libtpu) libtpu=$2; shift 2 ;;
    --data-dir) data_dir=$2; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "tpu-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
results=${OUT:-$PWD/tpu-check-out}
mkdir -p "$results"
tandem=build/tandem
[ -x "$tandem" ] || { echo "tpu-check: no $tandem: run make first" >&2; exit 1; }
if [ -z "$libtpu" ]; then
  libtpu=$(python3 -c 'import libtpu, os; print(os.path.join(os.path.dirname(libtpu.__file__), "libtpu.so"))' 2>/dev/null || true)
fi
[ -f "$libtpu" ] || { echo "tpu-check: libtpu not found: pip install libtpu, or pass --libtpu PATH" >&2; exit 1; }
export TANDEM_PJRT_PLUGIN=$libtpu

failed=0
summary=()
step() { echo; echo "== $1"; }
record() { summary+=("$1: $2"); [ "$2" = ok ] || failed=1; }

step "1. devices"
"$tandem" devices | tee "$results/devices.txt"
if grep -q '^tpu    available' "$results/devices.txt"; then record devices ok; else record devices "no usable TPU (see above)"; fi

step "2. ops through libtpu against the CPU kernels"
ops="matmul conv2d conv2d_backward_filter conv2d_backward_input max_pool2d max_pool2d_backward batch_norm softmax sparse_softmax_cross_entropy relu sum dropout"
filter=$(for op in $ops; do printf 'Ops/XlaMode.XlaCpuMatchesEager/%s:' "$op"; done)
if [ -x build/tests/tandem_compile_tests ]; then
  TANDEM_XLA_HARNESS_PLUGIN=$libtpu TANDEM_XLA_HARNESS_TOLERANCE=1e-2 \
    build/tests/tandem_compile_tests --gtest_filter="$filter" 2>&1 | tee "$results/parity.txt"
  if [ "${PIPESTATUS[0]}" -eq 0 ]; then record parity ok; else record parity "an op differs (see parity.txt)"; fi
else
  record parity "build/tests/tandem_compile_tests not built (make test builds it)"
fi

step "3. the tutorial CNN on the TPU, 3 epochs"
"$tandem" train --strategy tpu --epochs 3 --data-dir "$data_dir" --report "$results/train.json" 2>&1 |
  tee "$results/train.txt"
accuracy=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["test_accuracy"])' "$results/train.json" 2>/dev/null || echo 0)
if python3 -c "import sys; sys.exit(0 if float('$accuracy') >= 0.90 else 1)"; then
  record "cnn accuracy $accuracy" ok
else
  record "cnn accuracy $accuracy" "below 0.90"
fi

step "4. speed and cost: the CNN on the TPU and on the CPU"
"$tandem" bench --model cnn --devices tpu,cpu --batch-size 128 --estimate none \
  --json "$results/bench.json" 2>&1 | tee "$results/bench.txt"
if [ "${PIPESTATUS[0]}" -eq 0 ]; then record bench ok; else record bench "failed (see bench.txt)"; fi

step "summary"
printf '%s\n' "${summary[@]}" | tee "$results/summary.txt"
exit "$failed"
