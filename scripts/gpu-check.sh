#!/usr/bin/env bash
# The GPU check, in one call on a GPU machine (which needs no build tools, package registry or
# network): unpacks a bundle made by scripts/gpu-bundle.sh on a development machine, then
#   1. lists the devices,
#   2. runs the CUDA parity tests (every op against the CPU reference, gradients included; the
#      CUDA graph's test first on its own), the CPU kernels' tests on this machine's CPU, then
#      the fused products' parity on more seeds,
#   3. trains the tutorial CNN on Fashion-MNIST for 5 epochs on the GPU and checks >= 90% test
#      accuracy,
#   3b. trains it for 1 epoch with the compiled step (--jit on) and eagerly (--jit off) from the
#      same seed: the test accuracies agree within 1% (the GPU's atomic sums vary run to run) and
#      the samples/s ratio is printed (the compiled step runs its nodes one by one here,
#      TANDEM_CUDA_GRAPHS=0; 3e replays it as one CUDA graph, the default),
#   3c. trains it for 1 epoch through XLA:GPU (--strategy xla-gpu, the jax-cuda13-pjrt plugin of
#      this machine's Python, found where JAX finds it) and checks >= 85% test accuracy; skipped
#      with the reason when the Python has no such plugin,
#   3d. trains it for 1 epoch with --precision fp16 compiled (replayed as a CUDA graph) and
#      eagerly (dynamic loss scaling inside the compiled step): the accuracies agree within 1%
#      and reach 85%,
#   3e. trains it for 1 epoch with the compiled step replayed as one CUDA graph
#      (TANDEM_CUDA_GRAPHS=1): recorded, and within 1% of 3b's eager accuracy (run after 3b; the
#      parity tests of step 2 check replays bit for bit and a bad label inside one),
#   4. benchmarks ResNet-50 training (synthetic 224x224 data, batch 256) in fp32 and bf16, eager,
#      compiled and as a CUDA graph, with `tandem bench --peers torch`, Tandem
#      against PyTorch on the same GPU (channels-last, AMP), and prints images/s and the ratios
#      against the targets (bf16 >= 1.3x PyTorch AMP and >= 6,000 img/s; bf16 >= 2.5x fp32),
#   5. runs the device and strategy checks (scripts/gpu-check-distribute.sh) when present,
#   6. profiles ResNet-50 training op by op (fp32 and bf16, 224x224, batch 256) for the tables
#      of where its step time goes (run after 4; 5 stays last).
# Every step's output is shown; the logs, the benchmark table and results.json (everything, with
# the summary) go to $OUT (the device tool's output folder) or ./gpu-check-out. Exits 1 when a
# check failed; a missed performance target is reported, not a failure.
#
#   scripts/gpu-check.sh [BUNDLE] [--skip-distribute] [--only STEPS]
#       BUNDLE  default gpu-bundle/tandem-gpu.tar.xz
#       --only  a comma-separated list of the steps to run (e.g. 1,2,3b), for a lease too short
#               for all of them; step 1 (devices) always runs
#
# Each command of a step is stopped after STEP_TIMEOUT seconds (default 240) and counted as a
# failure, so a hang on the GPU costs one step's time, not the lease: what ran before it is in
# $OUT already. PARITY_SEEDS (default 30): how many more seeds step 2 runs the matmul and conv2d
# parity with (0: none). BENCH_VARIANTS (default "off on graph"): the ResNet-50 runs of step 4
# (off: eager, with PyTorch beside it; on: compiled; graph: compiled and replayed as a CUDA graph).
#
# cuDNN, cuBLASLt and NCCL come from the machine: the nvidia-* packages of the python3 that has
# PyTorch, and /usr/local/cuda; LD_LIBRARY_PATH is set to them and the bundle's lib/.
set -uo pipefail
cd "$(dirname "$0")/.."

bundle=gpu-bundle/tandem-gpu.tar.xz
run_distribute=1
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --skip-distribute) run_distribute=0 ;;
    --only)
      [ $# -ge 2 ] || { echo "gpu-check: --only needs a list of steps, e.g. --only 1,2,3b" >&2; exit 2; }
      only=",$2,"
      shift ;;
    -h | --help) sed -n '2,41p' "$0"; exit 0 ;;
    *) bundle=$1 ;;
  esac
  shift
done
step_timeout=${STEP_TIMEOUT:-240}
parity_seeds=${PARITY_SEEDS:-30}
bench_variants=${BENCH_VARIANTS:-off on graph}
results=${OUT:-$PWD/gpu-check-out}
mkdir -p "$results"
work=$(mktemp -d /tmp/tandem-gpu-check.XXXXXX)
failures=()
summary=()

note() { summary+=("$1"); echo ">> $1"; }
failed() { failures+=("$1"); note "FAIL: $1"; }
# Whether step $1 is to run (every step unless --only names others).
wanted() { [ -z "$only" ] || [[ "$only" == *",$1,"* ]]; }
# Runs a command with the step time limit; a command stopped by it returns 124 (137 if killed).
limited() { timeout --kill-after=10 "$step_timeout" "$@"; }

echo "== unpacking $bundle"
[ -f "$bundle" ] || { echo "gpu-check: no bundle at $bundle; make one with scripts/gpu-bundle.sh" >&2; exit 1; }
tar -C "$work" -xJf "$bundle" || { echo "gpu-check: $bundle is not a readable xz tarball" >&2; exit 1; }
root=$work/tandem-gpu
cat "$root/MANIFEST"

# The CUDA libraries Tandem loads at run time: the Python environment's NVIDIA packages
# (cuDNN, cuBLAS/cuBLASLt, NCCL, ...), PyTorch's own lib folder, the CUDA installation.
library_path=$(python3 - <<'EOF' 2>/dev/null
import glob, importlib.util, os
folders = []
spec = importlib.util.find_spec("nvidia")
for base in (spec.submodule_search_locations if spec else []):
    for folder in sorted(glob.glob(os.path.join(base, "**", "lib"), recursive=True)):
        if glob.glob(os.path.join(folder, "*.so*")):
            folders.append(folder)
torch = importlib.util.find_spec("torch")
if torch and torch.origin:
    folders.append(os.path.join(os.path.dirname(torch.origin), "lib"))
print(":".join(folders))
EOF
)
for folder in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/nvidia/lib64; do
  [ -d "$folder" ] && library_path=$library_path:$folder
done
export LD_LIBRARY_PATH=$root/lib:$library_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$root/bin:$PATH
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true

echo "== 1. devices"
limited tandem devices || failed "tandem devices"

if wanted 2; then
  echo "== 2. CUDA parity tests"
  parity_log=$results/parity.log
  # The CUDA graph's test alone first: the others (a device refusing an allocation) may leave the
  # pools in a state it has to cope with.
  limited tandem_backend_tests --gtest_color=no \
    --gtest_filter=CudaBackend.ACompiledStepReplaysAsOneGraph 2>&1 | tee "$results/parity_graph.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || failed "the CUDA graph test on its own (see parity_graph.log)"
  limited tandem_backend_tests --gtest_color=no 2>&1 | tee "$parity_log"
  parity_status=${PIPESTATUS[0]}
  if [ "$parity_status" -ne 0 ]; then
    failed "parity tests (status $parity_status; see parity.log)"
  elif grep -q "OK \] CudaBackend.WithoutAGpuSaysWhy" "$parity_log"; then
    failed "parity tests skipped: the backend saw no usable GPU (see parity.log)"
  else
    note "parity tests passed ($(grep -c '^\[       OK \]' "$parity_log") tests)"
  fi
  # The fused products in bf16 and f16 on more inputs than one run's: a relu mask flipped by a
  # second rounding shows up on some seeds only.
  seeds_failed=0
  for seed in $(seq 1 "$parity_seeds"); do
    TANDEM_TEST_SEED=$seed limited tandem_backend_tests --gtest_color=no \
      --gtest_filter='Ops/BackendsMode.MatchTheCpuReference/matmul:Ops/BackendsMode.MatchTheCpuReference/conv2d' \
      >"$results/parity_seed.log" 2>&1 || { seeds_failed=$((seeds_failed + 1)); grep "error" "$results/parity_seed.log"; }
  done
  if [ "$parity_seeds" -eq 0 ]; then :
  elif [ "$seeds_failed" -eq 0 ]; then
    note "matmul and conv2d parity on $parity_seeds more seeds: passed"
  else
    failed "matmul and conv2d parity: $seeds_failed of $parity_seeds seeds failed (the errors are above)"
  fi
  # The CPU's own kernels on this machine's CPU (an AMX Xeon on the H200 machines): oneDNN 2.6's
  # AMX bf16 products were wrong there for shapes with partial 64-element blocks, now padded.
  limited tandem_ops_tests --gtest_color=no 2>&1 | tee "$results/cpu_ops.log" | grep -E "Failure|^\[  FAILED|error|N [0-9]+, K [0-9]+"
  [ "${PIPESTATUS[0]}" -eq 0 ] && note "the CPU kernels' tests passed on this machine's CPU" ||
    failed "the CPU kernels' tests on this machine's CPU (see cpu_ops.log)"
fi

if wanted 3; then
  echo "== 3. the tutorial CNN on Fashion-MNIST, 5 epochs on the GPU"
  cnn_report=$results/cnn.json
  if limited tandem train --strategy gpu --epochs 5 --data-dir "$root/data" --report "$cnn_report"; then
    accuracy=$(python3 -c "import json; print(json.load(open('$cnn_report'))['test_accuracy'])")
    if python3 -c "import sys; sys.exit(0 if $accuracy >= 0.90 else 1)"; then
      note "tutorial CNN: test accuracy $accuracy (>= 0.90)"
    else
      failed "tutorial CNN: test accuracy $accuracy, below 0.90"
    fi
  else
    failed "tandem train on the GPU"
  fi
fi

if wanted 3b; then
  echo "== 3b. the compiled step on the GPU against the eager one (1 epoch, same seed)"
  jit_ok=1
  for jit in on off; do
    TANDEM_CUDA_GRAPHS=0 limited tandem train --strategy gpu --epochs 1 --jit "$jit" --quiet \
      --data-dir "$root/data" --report "$results/cnn_jit_$jit.json" ||
      { failed "tandem train --jit $jit on the GPU"; jit_ok=0; }
  done
  if [ "$jit_ok" -eq 1 ]; then
    if python3 - "$results/cnn_jit_on.json" "$results/cnn_jit_off.json" <<'EOF'; then
import json, sys
on, off = (json.load(open(path)) for path in sys.argv[1:3])
print(f"compiled: jit {on['jit']}, accuracy {on['test_accuracy']:.4f}, {on['samples_per_sec']:.0f} samples/s")
print(f"eager:    jit {off['jit']}, accuracy {off['test_accuracy']:.4f}, {off['samples_per_sec']:.0f} samples/s")
print(f"compiled / eager samples/s: {on['samples_per_sec'] / off['samples_per_sec']:.2f}x")
sys.exit(0 if on["jit"] and not off["jit"] and abs(on["test_accuracy"] - off["test_accuracy"]) <= 0.01 else 1)
EOF
      note "compiled step on the GPU agrees with the eager one"
    else
      failed "compiled step on the GPU: accuracy differs from the eager step by more than 1% (see above)"
    fi
  fi
fi

if wanted 3e; then
  echo "== 3e. the compiled step replayed as one CUDA graph (TANDEM_CUDA_GRAPHS=1) against eager"
  graph_log=$results/cnn_graph.log
  TANDEM_CUDA_GRAPHS=1 limited tandem train --strategy gpu --epochs 1 --jit on --quiet \
    --data-dir "$root/data" --report "$results/cnn_graph.json" 2>&1 | tee "$graph_log"
  if [ "${PIPESTATUS[0]}" -ne 0 ]; then
    failed "tandem train --jit on with CUDA graphs"
  elif grep -q "runs op by op" "$graph_log" || ! grep -q "recorded as one unit" "$graph_log"; then
    failed "the compiled step was not recorded as a CUDA graph (see cnn_graph.log)"
  elif [ -f "$results/cnn_jit_off.json" ] && python3 - "$results/cnn_graph.json" "$results/cnn_jit_off.json" <<'EOF'; then
import json, sys
graph, eager = (json.load(open(path)) for path in sys.argv[1:3])
print(f"CUDA graph: accuracy {graph['test_accuracy']:.4f}, {graph['samples_per_sec']:.0f} samples/s")
print(f"eager:      accuracy {eager['test_accuracy']:.4f}, {eager['samples_per_sec']:.0f} samples/s")
print(f"graph / eager samples/s: {graph['samples_per_sec'] / eager['samples_per_sec']:.2f}x")
sys.exit(0 if abs(graph["test_accuracy"] - eager["test_accuracy"]) <= 0.01 else 1)
EOF
    note "CUDA graph of the compiled step agrees with the eager step"
  else
    failed "CUDA graph: accuracy off the eager step's by more than 1%, or step 3b's eager run missing"
  fi
fi

if wanted 3c; then
  echo "== 3c. the tutorial CNN through XLA:GPU (1 epoch, the whole step compiled by XLA)"
  if tandem devices | grep -q '^xla-gpu plugin'; then
    xla_report=$results/cnn_xla_gpu.json
    if limited tandem train --strategy xla-gpu --epochs 1 --data-dir "$root/data" --report "$xla_report"; then
      accuracy=$(python3 -c "import json; print(json.load(open('$xla_report'))['test_accuracy'])")
      if python3 -c "import sys; sys.exit(0 if $accuracy >= 0.85 else 1)"; then
        note "XLA:GPU CNN: test accuracy $accuracy (>= 0.85)"
      else
        failed "XLA:GPU CNN: test accuracy $accuracy, below 0.85"
      fi
    else
      failed "tandem train --strategy xla-gpu"
    fi
  else
    note "XLA:GPU: skipped: this machine's Python has no jax-cuda13-pjrt plugin (tandem devices)"
  fi
fi

if wanted 3d; then
  echo "== 3d. mixed_float16 with dynamic loss scaling inside the compiled step (1 epoch, same seed)"
  fp16_ok=1
  for jit in on off; do
    limited tandem train --strategy gpu --epochs 1 --precision fp16 --jit "$jit" --quiet \
      --data-dir "$root/data" --report "$results/cnn_fp16_jit_$jit.json" ||
      { failed "tandem train --precision fp16 --jit $jit on the GPU"; fp16_ok=0; }
  done
  if [ "$fp16_ok" -eq 1 ]; then
    if python3 - "$results/cnn_fp16_jit_on.json" "$results/cnn_fp16_jit_off.json" <<'EOF'; then
import json, sys
on, off = (json.load(open(path)) for path in sys.argv[1:3])
for name, run in (("compiled", on), ("eager", off)):
    print(f"fp16 {name}: jit {run['jit']}, accuracy {run['test_accuracy']:.4f}, {run['samples_per_sec']:.0f} samples/s")
print(f"compiled / eager samples/s: {on['samples_per_sec'] / off['samples_per_sec']:.2f}x")
agree = abs(on["test_accuracy"] - off["test_accuracy"]) <= 0.01
sys.exit(0 if on["jit"] and not off["jit"] and agree and on["test_accuracy"] >= 0.85 else 1)
EOF
      note "fp16 with in-graph loss scaling: compiled agrees with eager"
    else
      failed "fp16 compiled step: accuracy below 0.85 or off the eager step's by more than 1% (see above)"
    fi
  fi
fi

if wanted 4; then
  echo "== 4. ResNet-50 training, synthetic 224x224, batch 256: tandem bench against PyTorch"
  # tandem bench runs Tandem in fp32 and bf16 on the GPU, eagerly and with the compiled step, and
  # bench/peers/run_peer.py (PyTorch from this machine's Python, channels-last, autocast bf16) on
  # the same GPU, model, batch and steps.
  for jit in $bench_variants; do
    peers=()
    [ "$jit" = off ] && peers=(--peers torch --peer-python python3)
    graphs=0
    [ "$jit" = graph ] && graphs=1
    if TANDEM_CUDA_GRAPHS=$graphs limited tandem bench --devices cuda:0 --model resnet50 \
      --precision fp32,bf16 --batch-size 256 --warmup-steps 10 --steps 20 --windows 3 \
      --jit "$([ "$jit" = off ] && echo off || echo on)" "${peers[@]}" --estimate none \
      --json "$results/bench_resnet50_jit_$jit.json"; then :; else
      failed "tandem bench ResNet-50 on the GPU (--jit $jit)"
    fi
  done
  python3 - "$results/bench_resnet50_jit_off.json" "$results/bench_resnet50_jit_on.json" \
    "$results/bench_resnet50_jit_graph.json" <<'EOF' |
import json, sys
def rows(path):
    try:
        return json.load(open(path))["rows"]
    except (OSError, ValueError, KeyError):
        return []
eager, compiled, graph = rows(sys.argv[1]), rows(sys.argv[2]), rows(sys.argv[3])
def rate(table, kind, framework, precision):
    for row in table:
        if row["kind"] == kind and row["framework"] == framework and row["precision"] == precision:
            return row["samples_per_second"]
    return None
print("ResNet-50 training, synthetic 224x224, batch 256 (images/s: batch / median step)")
print(f"{'':6} {'eager':>10} {'compiled':>10} {'CUDA graph':>10} {'PyTorch':>10} {'best/PyTorch':>13}")
best = {}
for precision in ("fp32", "bf16"):
    values = (rate(eager, "measured", "tandem", precision),
              rate(compiled, "measured", "tandem", precision),
              rate(graph, "measured", "tandem", precision),
              rate(eager, "peer", "torch", precision))
    best[precision] = max((v for v in values[:3] if v), default=None)
    torch = values[3]
    ratio = f"{best[precision] / torch:.2f}" if best[precision] and torch else "-"
    shown = [f"{value:.1f}" if value else "-" for value in values]
    print(f"{precision:6} {shown[0]:>10} {shown[1]:>10} {shown[2]:>10} {shown[3]:>10} {ratio:>13}")
def target(label, value, goal):
    if value is None:
        print(f"{label}: not measured (target >= {goal})")
    else:
        print(f"{label}: {value:.2f} ({'meets' if value >= goal else 'MISSES'} the target >= {goal})")
t32, t16, p16 = best["fp32"], best["bf16"], rate(eager, "peer", "torch", "bf16")
target("Tandem bf16 / PyTorch AMP bf16", t16 / p16 if t16 and p16 else None, 1.3)
target("Tandem bf16 images/s", t16, 6000)
target("Tandem bf16 / Tandem fp32", t16 / t32 if t16 and t32 else None, 2.5)
EOF
    tee "$results/benchmark.txt"
fi

if wanted 6; then
  echo "== 6. where ResNet-50's step goes: per-op profiles, fp32 and bf16, 224x224, batch 256"
  # Fashion-MNIST resized to 224x224 (5% of it: 11 steps), steps 4-7 profiled, eagerly and
  # compiled; the tables go to profile_resnet50_<precision>_jit_<on|off>.txt, the Chrome traces
  # beside them.
  for jit in off on; do
    for precision in fp32 bf16; do
      limited tandem train --model resnet50 --strategy gpu --precision "$precision" --jit "$jit" \
        --image-size 224x224 --batch-size 256 --data-fraction 0.05 --epochs 1 --quiet \
        --data-dir "$root/data" --profile --profile-steps 4:7 \
        --trace "$results/trace_resnet50_${precision}_jit_$jit.json" 2>&1 |
        tee "$results/profile_resnet50_${precision}_jit_$jit.txt"
      [ "${PIPESTATUS[0]}" -eq 0 ] || failed "profiling ResNet-50 in $precision --jit $jit on the GPU"
    done
  done
fi

if wanted 5 && [ "$run_distribute" -eq 1 ] && [ -x scripts/gpu-check-distribute.sh ]; then
  echo "== 5. devices and strategies (scripts/gpu-check-distribute.sh)"
  if limited scripts/gpu-check-distribute.sh "$root/bin/tandem" "$root/data"; then
    note "device and strategy checks passed"
  else
    failed "device and strategy checks (scripts/gpu-check-distribute.sh)"
  fi
fi

echo "== summary"
printf '%s\n' "${summary[@]}"
python3 - "$results" "${#failures[@]}" "${summary[@]}" <<'EOF'
import glob, json, os, sys
results, failures = sys.argv[1], int(sys.argv[2])
report = {"failures": failures, "summary": sys.argv[3:]}
for path in glob.glob(os.path.join(results, "*.json")):
    if os.path.basename(path) == "results.json":
        continue
    try:
        report[os.path.basename(path)[:-5]] = json.load(open(path))
    except ValueError:
        pass
json.dump(report, open(os.path.join(results, "results.json"), "w"), indent=1)
EOF
rm -rf "$work"
[ "${#failures[@]}" -eq 0 ]
