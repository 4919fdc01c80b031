#!/usr/bin/env bash
# Installs the Debian packages Tandem needs to build, test and run its main job.
# Idempotent: asks apt only for packages that are missing, so a second run is instant.
set -euo pipefail

packages=(
  build-essential cmake pkg-config
  libdnnl-dev          # oneDNN: CPU kernels for conv, matmul, pooling, batch norm, eltwise
  ocl-icd-opencl-dev opencl-headers       # oneDNN's CMake package calls find_package(OpenCL)
  libhwy-dev           # Highway: portable SIMD for loops oneDNN lacks
  libgtest-dev libgmock-dev
  zlib1g-dev           # gzip IDX files, gzip TFRecords
  libjpeg62-turbo-dev libpng-dev          # image decoding in the input pipeline
  protobuf-compiler libprotobuf-dev       # tf.train.Example, TensorBoard events, ONNX
  libonnx-dev                             # ONNX protos and checker for export
  libhdf5-dev                             # HDF5: Keras' model.weights.h5 and .h5 files
  nlohmann-json3-dev                      # JSON for checkpoints and saved models
  libtomlplusplus-dev                     # toml++: tandem bench's TOML price tables
  openmpi-bin libopenmpi-dev              # multi-worker training: launch and bootstrap
  clang libclang-rt-14-dev                # libFuzzer targets for the readers
  dataset-fashion-mnist
  mate-backgrounds                        # photographs for the input-pipeline JPEG benchmark
  python3 python3-venv # benchmark peers and interop tests run in a project virtualenv
  python3-dev                             # headers the Python package's native module builds on
  chromium                                # headless browser: the bench HTML report's render test
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "install-deps: need root or sudo to install: ${missing[*]}" >&2
    exit 1
  fi
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"; then
  "${sudo_cmd[@]}" apt-get update
  "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi
