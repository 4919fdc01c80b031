#!/usr/bin/env bash
# Fetches what Tandem's XLA backend needs from PyPI, as the ecosystem ships it, into .deps/pjrt/
# (or $TANDEM_PJRT_DIR):
#
#   include/pjrt_c_api.h   the PJRT C API header (API 0.90), from the tensorflow-cpu 2.21.0
#                          wheel, with that wheel's LICENSE (Apache 2.0) beside it; the build
#                          compiles the XLA backend against it
#   cpu/pjrt_c_api_cpu_plugin.so
#                          XLA:CPU as a PJRT plugin (API 0.115, StableHLO 1.20), from the
#                          lammps-jax-pjrt-cpu 0.11.2 wheel, with its LICENSE and
#                          THIRD_PARTY_NOTICES; the tests and `--strategy xla-cpu` load it
#
# Each wheel is pinned by version and SHA-256 and fetched with `pip download --no-deps` (the
# plugin's metadata asks for jax, which it does not need); only the files above are kept.
# libtpu is never fetched: its licence forbids redistribution, so a TPU user installs it with
# `pip install libtpu` and Tandem finds it there.
#
# Idempotent: a stamp per part records the pins, so a second run returns at once.
# Exit status: 0 ready; 3 the package index cannot be reached (the build then has no XLA
# backend and says so); 1 anything else (a checksum mismatch, a wheel without the file).
set -euo pipefail

readonly INDEX_UNREACHABLE=3
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target="${TANDEM_PJRT_DIR:-$repo_root/.deps/pjrt}"
# pip comes from the project virtualenv (Debian's python3 has none without python3-pip; the
# venv gets one from python3-venv, which scripts/install-deps.sh installs).
venv="${TANDEM_VENV:-$repo_root/.venv}"
python="$venv/bin/python"

# name, version, wheel file, SHA-256 of the wheel
readonly HEADER_WHEEL=(tensorflow-cpu 2.21.0
  tensorflow_cpu-2.21.0-cp312-cp312-manylinux_2_27_x86_64.whl
  dcc8afd32930e42d5296b6ee19078b773706830af4ea97fbe503b9f5e0f820cb)
readonly CPU_PLUGIN_WHEEL=(lammps-jax-pjrt-cpu 0.11.2
  lammps_jax_pjrt_cpu-0.11.2-py3-none-manylinux_2_27_x86_64.whl
  1319390d948b39f69f7dade496b7c385149d9ca6097a6b62114da113216d9ad1)

fail() {
  echo "fetch-pjrt: $1" >&2
  exit "${2:-1}"
}

stamp_of() { echo "$target/.stamp-$1-$2"; }

# Extracts the member `$2` of the wheel `$1` to `$3` (read with Python's zipfile: no unzip
# needed).
extract() {
  "$python" - "$1" "$2" "$3" <<'EOF'
import shutil, sys, zipfile
wheel, member, destination = sys.argv[1:4]
with zipfile.ZipFile(wheel) as archive:
    try:
        source = archive.open(member)
    except KeyError:
        sys.exit(f"fetch-pjrt: {wheel} has no {member}")
    with source, open(destination + ".partial", "wb") as out:
        shutil.copyfileobj(source, out, 1 << 20)
EOF
  mv "$3.partial" "$3"
}

# Downloads the pinned wheel `name version file sha256` into $download and checks it.
download() {
  local name="$1" version="$2" file="$3" sha256="$4"
  local -a platform=()
  # The header's wheel is for CPython 3.12; the header is the same whatever Python runs here.
  [ "$name" = tensorflow-cpu ] && platform=(--python-version 3.12 --only-binary=:all:)
  echo "fetch-pjrt: downloading $name==$version"
  if ! "$python" -m pip --disable-pip-version-check download --no-deps --quiet "${platform[@]}" \
    --timeout 30 --retries 2 -d "$download" "$name==$version" >"$download/pip.log" 2>&1; then
    if grep -qiE "connection|network|resolve|timed out|unreachable|certificate" "$download/pip.log"; then
      fail "the Python package index cannot be reached (or its TLS certificate not verified), \
so $name==$version was not fetched; the build has no XLA backend: $(grep -m1 -iE \
"error|warning" "$download/pip.log" | cut -c1-200)" "$INDEX_UNREACHABLE"
    fi
    fail "pip download $name==$version failed: $(tail -3 "$download/pip.log")"
  fi
  [ -f "$download/$file" ] || fail "pip download $name==$version gave no $file"
  echo "$sha256  $download/$file" | sha256sum --check --quiet - ||
    fail "$file does not have the pinned SHA-256 $sha256; not using it"
}

header_stamp="$(stamp_of header "${HEADER_WHEEL[1]}")"
plugin_stamp="$(stamp_of cpu-plugin "${CPU_PLUGIN_WHEEL[1]}")"
[ -f "$header_stamp" ] && [ -f "$plugin_stamp" ] && exit 0

if [ ! -x "$python" ]; then
  /usr/bin/python3 -m venv "$venv" ||
    fail "could not create $venv: install python3-venv (scripts/install-deps.sh) and retry"
fi
"$python" -m pip --version >/dev/null 2>&1 || fail "$venv has no pip; remove it and retry"
mkdir -p "$target/include" "$target/cpu"
download=$(mktemp -d "${TMPDIR:-/tmp}/tandem-pjrt.XXXXXX")
trap 'rm -rf "$download"' EXIT

if [ ! -f "$header_stamp" ]; then
  download "${HEADER_WHEEL[@]}"
  wheel="$download/${HEADER_WHEEL[2]}"
  extract "$wheel" tensorflow/include/xla/pjrt/c/pjrt_c_api.h "$target/include/pjrt_c_api.h"
  extract "$wheel" tensorflow/include/LICENSE "$target/include/LICENSE"
  rm -f "$wheel" "$target"/.stamp-header-*
  touch "$header_stamp"
fi
if [ ! -f "$plugin_stamp" ]; then
  download "${CPU_PLUGIN_WHEEL[@]}"
  wheel="$download/${CPU_PLUGIN_WHEEL[2]}"
  info=lammps_jax_pjrt_cpu-0.11.2.dist-info/licenses
  extract "$wheel" lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so \
    "$target/cpu/pjrt_c_api_cpu_plugin.so"
  extract "$wheel" "$info/LICENSE" "$target/cpu/LICENSE"
  extract "$wheel" "$info/THIRD_PARTY_NOTICES" "$target/cpu/THIRD_PARTY_NOTICES"
  rm -f "$target"/.stamp-cpu-plugin-*
  touch "$plugin_stamp"
fi
echo "fetch-pjrt: ready: $target (PJRT C API header, XLA:CPU plugin)"
