#!/usr/bin/env bash
# Builds, on a machine with the CUDA toolkit (no GPU needed), what scripts/gpu-check.sh runs on a
# GPU machine, and packs it into one xz-compressed tarball under 64 MiB:
#   bin/   tandem (also the benchmark: tandem bench), tandem_backend_tests (the CUDA parity tests),
#          tandem_ops_tests (the CPU kernels' tests, for the GPU machine's CPU: AMX there),
#          stripped; the CUDA runtime is linked in statically
#   lib/   every shared library they need that is not part of the C runtime (oneDNN, OpenMP,
#          protobuf, ONNX, OpenMPI's libraries, ...). cuDNN, cuBLASLt and NCCL are not carried:
#          Tandem loads them at run time, and gpu-check.sh finds them in the GPU machine's
#          Python environment (PyTorch's nvidia-* packages) or CUDA installation
#   openmpi/, pmix/  Open MPI's runtime (mpirun, orted, plugins, help texts; its libraries go
#          into lib/), so `tandem launch` runs the multi-worker check on a GPU machine without
#          Open MPI (scripts/bundle-openmpi.sh; gpu-check-distribute.sh sets OPAL_PREFIX)
#   data/  the Fashion-MNIST files, for training the tutorial CNN there
#   MANIFEST with the commit, the toolkit and the library versions it was built with
#
#   scripts/gpu-bundle.sh [OUTPUT] [BUILD_DIR]
#       OUTPUT     default gpu-bundle/tandem-gpu.tar.xz (gpu-bundle/ is ignored by git)
#       BUILD_DIR  default build-gpu (a Release build with the CUDA backend)
#
# Environment: FASHION_MNIST_DIR (default /usr/share/datasets/fashion-mnist), JOBS (default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-gpu-bundle/tandem-gpu.tar.xz}
build=${2:-build-gpu}
data_dir=${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
jobs=${JOBS:-$(nproc)}
limit_bytes=$((64 * 1024 * 1024))

fail() {
  echo "gpu-bundle: $*" >&2
  exit 1
}

command -v nvcc >/dev/null || fail "nvcc is not on PATH; install the CUDA toolkit (with cuDNN) to build the CUDA backend"
for file in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  [ -e "$data_dir/$file.gz" ] || [ -e "$data_dir/$file" ] ||
    fail "$data_dir lacks $file(.gz); install dataset-fashion-mnist or set FASHION_MNIST_DIR"
done

echo "== configuring $build (Release, CUDA backend)"
configure_log=$(cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTANDEM_CUDA=ON)
echo "$configure_log" | grep "CUDA backend" || true
echo "$configure_log" | grep -q "CUDA backend: on" ||
  fail "CMake did not enable the CUDA backend (see above); check nvcc and cudnn.h"
echo "== building"
cmake --build "$build" -j "$jobs" --target tandem_cli tandem_backend_tests tandem_ops_tests

stage_root=$(mktemp -d)
trap 'rm -rf "$stage_root"' EXIT
stage=$stage_root/tandem-gpu
mkdir -p "$stage/bin" "$stage/lib" "$stage/data"
binaries=("$build/tandem" "$build/tests/tandem_backend_tests" "$build/tests/tandem_ops_tests")
for binary in "${binaries[@]}"; do
  cp "$binary" "$stage/bin/"
  strip --strip-unneeded "$stage/bin/$(basename "$binary")"
done

# The shared libraries ldd resolves, except the C runtime (glibc's, libgcc_s, libstdc++: the GPU
# machine's own are newer and the CUDA libraries loaded there need them) and the driver.
for library in $(ldd "${binaries[@]}" | awk '/=> \// {print $3}' | sort -u); do
  case "$(basename "$library")" in
    libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | ld-linux*.so.* | \
      libgcc_s.so.* | libstdc++.so.* | libcuda.so.*) ;;
    *) cp -L "$library" "$stage/lib/" ;;
  esac
done
strip --strip-unneeded "$stage"/lib/*.so* 2>/dev/null || true
scripts/bundle-openmpi.sh "$stage"

cp "$data_dir"/*-ubyte* "$stage/data/"

{
  echo "tandem $(git describe --always --dirty 2>/dev/null || echo unknown), built $(date -u +%Y-%m-%dT%H:%MZ) on $(uname -m)"
  echo "nvcc: $(nvcc --version | tail -1)"
  grep -E "define CUDNN_(MAJOR|MINOR|PATCHLEVEL) " "$(dirname "$(command -v nvcc)")/../include/cudnn_version.h" 2>/dev/null | awk '{printf "%s %s  ", $2, $3} END {print ""}'
  echo "CUDA architectures: $(grep -E '^CMAKE_CUDA_ARCHITECTURES' "$build/CMakeCache.txt" | cut -d= -f2)"
  echo "libraries:"
  ls "$stage/lib"
} >"$stage/MANIFEST"

mkdir -p "$(dirname "$out")"
echo "== packing $out"
tar -C "$stage_root" -cf - tandem-gpu | xz -9 -T0 >"$out"
size=$(stat -c %s "$out")
echo "bundle: $out, $((size / 1024 / 1024)) MiB ($size bytes)"
[ "$size" -lt "$limit_bytes" ] || fail "the bundle is $size bytes, over the 64 MiB a device run carries"
